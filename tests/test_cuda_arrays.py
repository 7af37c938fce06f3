"""Per-lane arrays on the cuda backend (the cuda-ready issue, item 1): the host side of
the phases runs the executor's steps, the common per-lane array ones written once
against the launch's array namespace (``hydra/backends/cuda/arraysteps.py``).

Under ``HYDRA_ARRAY_NAMESPACE=strict`` those steps run on the CuPy stand-in, which
refuses every hidden transfer to the host and counts the explicit ones: an MLP-shaped
forward moves its inputs to the device once and nothing back but its results; an op
whose step is not namespace-generic (``np.sort``) moves its operand by one counted
transfer, which a zero budget catches; a host rule's write into a device array lands
in place, so views of it see it; every held-back case runs under it too.  The held-back
suite (tests/test_arrays_heldback.py), the per-lane array tests (``ARRAY_BACKENDS``) and
tests/test_grad_arrays.py run on cuda with the NumPy namespace."""

import numpy as np
import pytest

import hydra
from hydra import arraynamespace as an
from hydra.backends import available
from arrays_oracle import assert_same, check, per_example
import test_arrays_heldback as heldback
import test_arrays_views as views
from test_grad_arrays import rnn

pytestmark = pytest.mark.skipif(not available("cuda"), reason="no cuda backend here")

RNG = np.random.default_rng(31)
X = RNG.standard_normal((9, 3))
W1, B1, W2 = RNG.standard_normal((3, 5)), RNG.standard_normal(5), RNG.standard_normal((5, 4))


def mlp(x, w1, b1, w2):
    h = np.tanh(x @ w1 + b1)
    y = np.maximum(h @ w2, 0.0) + np.zeros(4)
    return y.sum(), np.argmax(y), y[1:3]


def sorted_top(x):
    h = np.tanh(x) * 2.0
    s = np.sort(h)
    return s[-1] + h.sum()


def write_through_view(x, i):
    a = np.tanh(np.zeros((3, 2)) + x[:, None])
    v = a[1:]
    a[i] = x[:2]  # a row at a varying index: the host rule writes a host copy
    return v.sum() * 10.0 + a.sum()


@pytest.fixture
def strict(monkeypatch):
    monkeypatch.setenv("HYDRA_ARRAY_NAMESPACE", "strict")
    return an.strict()


def moved(xp, call):
    """The transfers ``call()`` makes in the strict namespace, and its result."""
    before = dict(xp.transfers)
    out = call()
    return {k: xp.transfers[k] - before[k] for k in before}, out


def test_an_mlp_forward_stays_on_the_device_but_for_its_results(strict):
    k = hydra.compile(mlp, varying="x", backend="cuda")
    want = hydra.compile(mlp, varying="x", backend="numpy")(X, W1, B1, W2)
    for _ in range(2):  # and again, from the kept plans
        with strict.budget(to_host=3):  # the three results, nothing inside the steps
            counts, got = moved(strict, lambda: k(X, W1, B1, W2))
        # the four inputs uploaded once each: no step fell back to the host and back
        assert counts == {"to_host": 3, "to_device": 4}
        for g, w in zip(got, want):  # the same NumPy calls: the same bits
            np.testing.assert_array_equal(g, w)
    for j, g in enumerate(got):
        assert_same(g, [r[j] for r in per_example(mlp, ("x",), [X, W1, B1, W2], len(X))])


def test_a_loop_carries_its_arrays_on_the_device_and_uploads_its_inputs_once(strict):
    W, U = RNG.standard_normal((3, 3)) * 0.5, RNG.standard_normal(3)
    h0, xs, n = RNG.standard_normal((9, 3)), RNG.standard_normal((9, 7)), np.arange(9) % 8
    k = hydra.compile(rnn, varying=("h0", "xs", "n"), backend="cuda")
    with strict.budget(to_host=1):  # the result
        counts, got = moved(strict, lambda: k(W, U, h0, xs, n))
    # the four inputs once each, not once a trip (and the loop is never compacted: that
    # would run it by host rules, off the device)
    assert counts == {"to_host": 1, "to_device": 4}
    assert_same(got, per_example(rnn, ("h0", "xs", "n"), [W, U, h0, xs, n], 9))


def test_an_op_without_a_namespace_step_moves_its_operand_by_a_counted_transfer(strict):
    k = hydra.compile(sorted_top, varying="x", backend="cuda")
    counts, got = moved(strict, lambda: k(X))
    assert counts["to_host"] == 1  # np.sort's operand (the result comes from a kernel)
    assert_same(got, per_example(sorted_top, ("x",), [X], len(X)))
    with strict.budget(to_host=0), pytest.raises(an.UnexpectedTransfer):
        k(X)


def test_a_host_rules_write_lands_in_the_device_array_and_its_views(strict):
    i = np.arange(len(X)) % 3
    k = hydra.compile(write_through_view, varying=("x", "i"), backend="cuda")
    assert_same(k(X, i), per_example(write_through_view, ("x", "i"), [X, i], len(X)))


def dense(W, b, x):
    h = np.tanh(W @ x + b)
    return float(np.sum(h * h)) + h.mean()


def test_array_gradients_run_on_the_namespace_too(strict):
    k = hydra.compile(hydra.grad(dense, argnums=(0, 1, 2)), varying="x", backend="cuda")
    ref = hydra.compile(hydra.grad(dense, argnums=(0, 1, 2)), varying="x", backend="numpy")
    W, b = RNG.standard_normal((4, 3)), RNG.standard_normal(4)
    for g, w in zip(k(W, b, X), ref(W, b, X)):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_the_steps_dump_names_what_runs_on_the_namespace_and_what_by_host_rules():
    text = hydra.compile(sorted_top, varying="x", backend="cuda").dump_ir("steps", X)
    assert "namespace step: array tanh" in text and "host rule: array sort" in text
    assert "cuda kernel phase" in text  # s[-1] + h.sum(): a per-lane number's kernel


@pytest.mark.parametrize("c", heldback.CASES, ids=repr)
def test_the_held_back_cases_under_the_strict_namespace(c, strict):
    """Every held-back case (tests/test_arrays_heldback.py) at one lane count, its array
    steps on the CuPy stand-in: a hidden transfer anywhere is a TypeError."""
    heldback.run_case(c, "cuda", 5)


@pytest.mark.parametrize("fn, varying, make", [
    (views.default_orders_and_axes, ("x",), lambda n: (RNG.standard_normal((n, 2, 3)),)),
    (views.row_stored_in_a_uniform_loop, ("x",),
     lambda n: (RNG.standard_normal((n, 4, 4)), 3)),
    (views.computed_rows_written, ("x",),
     lambda n: (RNG.standard_normal((2, 3)), RNG.standard_normal((n, 3)))),
    (views.same_argument_twice, ("x", "y"), lambda n: (RNG.standard_normal((n, 4)),) * 2),
], ids=lambda v: getattr(v, "__name__", ""))
def test_views_and_writes_reach_the_arguments_under_the_strict_namespace(
        fn, varying, make, strict):
    """Writes through views of arguments, of a loop's carried row and of a host rule's
    array land where the reference puts them (tests/test_arrays_views.py's cases)."""
    check(fn, varying, list(make(5)), 5, "cuda")


# --- fused elementwise chains (``arraysteps.ChainStep``, ``chains``) --------------------

def chained(x, w, s, m, k):
    # a strided view, w a uniform row (broadcast), s a per-lane number
    y = np.maximum(x[:, ::-1] * w + s, 0.0)
    z = np.where(y > 0.5, y - 1.0, np.sqrt(y) * 2.0)
    u = z if m else -z  # a select of arrays by a per-lane condition
    f = (u.astype(np.float32) * np.float32(1.5) + k) / 3.0  # float32, int broadcast
    return f, np.minimum(u, x).sum() + f.sum()


def chain_args(n):
    x = RNG.standard_normal((n, 3, 4))
    x[0, 0, :2] = [np.nan, -0.0]  # NaN and a signed zero through max/min and sqrt
    return (x, RNG.standard_normal(4), RNG.standard_normal(n), np.arange(n) % 3 == 1,
            np.arange(4, dtype=np.int32))


def test_a_chain_is_one_step_in_the_steps_dump():
    text = hydra.compile(chained, varying=("x", "s", "m"), backend="cuda").dump_ir(
        "steps", *chain_args(3))
    assert "chain step (" in text and "mul, add, maximum" in text
    assert "namespace step: array maximum" not in text  # (inside the chain now)


def test_a_chain_gives_the_numpy_backends_bits_as_numpy_calls_and_as_one_kernel(
        monkeypatch):
    """Under the simulator a chain runs as the ops' NumPy calls; forced, as the one
    generated kernel a device namespace runs (a simulator thread per element: a few
    lanes only).  Both give the numpy backend's bits (+ - * / max/min/where/sqrt and
    the casts are exact on both)."""
    args = chain_args(4)
    k = hydra.compile(chained, varying=("x", "s", "m"), backend="cuda")
    want = hydra.compile(chained, varying=("x", "s", "m"), backend="numpy")(*args)
    launches = []
    for kernels in "01":
        monkeypatch.setenv("HYDRA_CUDA_CHAIN_KERNELS", kernels)
        got = k(*args)
        launches.append(k.last_run_stats["launches"])
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
    assert launches[1] == launches[0] + 1  # the chain: one kernel
    for g, w in zip(got, zip(*per_example(chained, ("x", "s", "m"), list(args), 4))):
        assert_same(g, list(w))


@pytest.mark.parametrize("kernels", ["0", "1"])
def test_a_chain_makes_no_hidden_transfer_under_the_strict_namespace(kernels, strict,
                                                                     monkeypatch):
    monkeypatch.setenv("HYDRA_CUDA_CHAIN_KERNELS", kernels)
    args = chain_args(3)
    k = hydra.compile(chained, varying=("x", "s", "m"), backend="cuda")
    want = hydra.compile(chained, varying=("x", "s", "m"), backend="numpy")(*args)
    with strict.budget(to_host=1):  # f (the sum comes from a kernel), nothing else
        counts, got = moved(strict, lambda: k(*args))
    assert counts["to_host"] == 1
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_a_chain_kernel_rounds_each_float_operation_on_its_own(monkeypatch):
    """NVVM contracts a product and a sum into one FMA by default (fastmath or not),
    which the simulator cannot show: the generated source spells float + - * as the
    separately rounded device functions (float64 and float32 alike)."""
    from hydra.backends.cuda import chains
    monkeypatch.setattr(chains, "_KERNELS", {})
    monkeypatch.setenv("HYDRA_CUDA_CHAIN_KERNELS", "1")
    hydra.compile(chained, varying=("x", "s", "m"), backend="cuda")(*chain_args(2))
    [src] = chains._KERNELS
    body = src[src.index("def chain("):]
    for spelled in ("dev.mul_rn64(", "dev.add_rn64(", "dev.sub_rn64(", "dev.mul_rn32(",
                    "dev.sqrt(", "_max(", "_min(", "_sel("):
        assert spelled in body, spelled
    assert not any(f" {op} " in body for op in "+-*")  # (only the index arithmetic: %, //)
