"""SPEC sections 8 and 10: per-lane array code that reads captured arrays (module-level
and closure-captured weights) or shapes from uniform ints, called with Dask arrays of
several chunks: the same result as a local call on NumPy inputs (bit for bit where the
kernel is elementwise) and as the undecorated function run example by example; and a
shape that cannot be known is a plain ``CompileError`` at the user's line, never the
compiler's internal signal."""

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="the dask extra is not installed")

import dask  # noqa: E402
import hydra  # noqa: E402
from hydra import lane  # noqa: E402
from arrays_oracle import (ARRAY_BACKENDS, ATOL, RTOL, assert_same,  # noqa: E402
                           per_example)

RNG = np.random.default_rng(22)
W = RNG.standard_normal((4, 3)).astype(np.float32)
B = RNG.standard_normal(4).astype(np.float32)
X = RNG.standard_normal((13, 3)).astype(np.float32)
CHUNKS = (4, 5, 1, 3)  # several chunks, one of a single lane
SCALE = 0.5
PAIR = (W, B)


def matvec(x):
    return W @ x


def row_times(x):
    return x * W[0]


def layer(x):
    return np.tanh(W @ x + B)


def closure():
    V, c = W * 2, B + 1  # captured by the closure, not module globals

    def captured(x):
        return V @ x, x * V[0], np.tanh(V @ x + c)
    return captured


def tuple_and_scalar(x):
    w, b = PAIR
    return (w @ x + b) * SCALE


def varying_loop(x):
    acc = np.zeros(4, np.float32)
    i = 0
    while i < 1 + int(x[0] > 0) + int(x[1] > 0):  # a trip count per lane
        acc = np.tanh(acc + W @ x)
        i += 1
    return acc


def unrolled_rows(x):
    acc = x * 0
    for i in range(W.shape[0]):  # W's shape bounds the loop
        acc = acc + W[i] * x[i % 3]
    return acc


def uniform_results(x):
    return x * W[0], W[1] * 2, np.tanh(W.T @ B)  # the last two: one array for all lanes


#: the kernels whose chunked run equals a local call bit for bit (no products)
ELEMENTWISE = {"row_times", "zeros_of"}
KERNELS = [matvec, row_times, layer, closure(), tuple_and_scalar, varying_loop,
           unrolled_rows, uniform_results]


def check_dask(fn, args, varying="x", backend="cpu", scheduler="sync"):
    """fn with Dask arrays against the same kernel on NumPy inputs and the undecorated
    function run example by example.  Against the local call: bit for bit where the
    kernel is elementwise; a product (``W @ x``) is one GEMM per chunk instead of one
    over all lanes, whose rounding may differ with the number of rows (a one-lane chunk
    differs in the last bit), so products compare within the per-lane array tolerance."""
    k = hydra.compile(fn, varying=varying, backend=backend)
    lazy = [da.from_array(a, chunks=(CHUNKS, *a.shape[1:])) if name in varying else a
            for name, a in zip(fn.__code__.co_varnames, args)]
    got, local = k(*lazy), k(*args)
    want = per_example(fn, varying, args, len(X))
    if not isinstance(local, tuple):
        got, local, want = (got,), (local,), [(w,) for w in want]
    for g, loc in zip(got, local):  # a local call's shapes, before anything runs (but a
        # varying per-lane array's other axes: unknown until then)
        assert isinstance(g, da.Array) and len(g.shape) == np.ndim(loc)
        assert all(a == b or np.isnan(a) for a, b in zip(g.shape, np.shape(loc)))
    got = dask.compute(*got, scheduler=scheduler)
    for j, (g, loc) in enumerate(zip(got, local)):
        if fn.__name__ in ELEMENTWISE:
            np.testing.assert_array_equal(g, loc)
        else:
            np.testing.assert_allclose(g, loc, rtol=RTOL, atol=ATOL)
        assert_same(g, [w[j] for w in want])


@pytest.mark.parametrize("backend", ARRAY_BACKENDS)
@pytest.mark.parametrize("fn", KERNELS, ids=lambda f: f.__qualname__.split(".")[0])
def test_captured_arrays_with_dask_arrays(fn, backend):
    check_dask(fn, [X], backend=backend,
               scheduler="threads" if fn is matvec else "sync")


def printing(x):
    print(x)
    return W[1] * 2


def test_a_uniform_array_result_of_a_call_that_prints(capsys):
    k = hydra.compile(printing, varying="x", backend="numpy")
    call = k(da.from_array(X[:, 0], chunks=CHUNKS))
    assert not capsys.readouterr().out  # nothing ran yet
    got = call.compute(scheduler="sync")
    printed = capsys.readouterr().out
    np.testing.assert_array_equal(got, k(X[:, 0]))
    assert printed == capsys.readouterr().out  # what the local call printed
    np.testing.assert_array_equal(got, [printing(v) for v in X[:, 0]][0])
    assert printed == capsys.readouterr().out


def zeros_of(x, k):
    a = np.zeros(k, np.float32)  # its shape: the uniform int k, a constant once known
    a[: x.shape[0]] = x
    return np.tanh(a + W[0, 0])


@pytest.mark.parametrize("backend", ARRAY_BACKENDS)
def test_shape_from_a_uniform_int_with_dask_arrays(backend):
    for k in (5, 7):  # each value its own compile, locally and on the workers
        check_dask(zeros_of, [X, k], backend=backend)


def scaled(x, n):
    return np.tanh(W @ x) * n  # n: a uniform int no shape depends on


def test_the_client_builds_once_per_value_of_an_int_a_shape_depends_on(monkeypatch):
    import importlib
    call = importlib.import_module("hydra.dask.call")  # the module, not hydra.dask.call()
    builds = []
    real = call.chunk_ir  # the client's build (the workers' is ship's own)
    monkeypatch.setattr(call, "chunk_ir",
                        lambda *a, **kw: builds.append(a[0]) or real(*a, **kw))
    lazy = da.from_array(X, chunks=(CHUNKS, 3))
    for fn, values in [(zeros_of, (5, 7, 5)), (scaled, (2, 3, 2))]:
        k = hydra.compile(fn, varying="x", backend="numpy")
        for n in values:
            k(lazy, n)
    assert builds == [zeros_of, zeros_of, scaled]


def lane_sized(x):
    a = np.zeros(lane() + 1)
    return a.sum() + x


@pytest.mark.parametrize("lazy", [False, True], ids=["numpy", "dask"])
def test_a_shape_never_known_is_a_plain_compile_error(lazy):
    k = hydra.compile(lane_sized, varying="x")
    x = np.arange(6.0)
    with pytest.raises(hydra.CompileError) as info:
        k(da.from_array(x, chunks=2) if lazy else x)  # at the call: nothing runs
    err = info.value
    assert type(err) is hydra.CompileError  # not the builder's retry signal
    assert err.__suppress_context__ and err.line == lane_sized.__code__.co_firstlineno + 1
    assert "the shape of 'a' depends on a value that is not known" in str(err)


def test_cuda_runs_per_lane_arrays_on_captured_weights_as_a_local_call_does():
    from hydra.backends import available
    if not available("cuda"):
        pytest.skip("the cuda backend is not available here")
    k = hydra.compile(layer, varying="x", backend="cuda")
    local = k(X)
    chunked = k(da.from_array(X, chunks=(CHUNKS, 3))).compute(scheduler="sync")
    np.testing.assert_allclose(chunked, local, rtol=RTOL, atol=ATOL)  # one GEMM a chunk
    assert_same(local, per_example(layer, ("x",), [X], len(X)))
