"""hydra.grad on the cuda backend (the cuda-ready issue, item 4): a loop's tape in one
kernel (each lane's stack in device memory, grown by relaunching when full) and, where
sync points make phases, on the host between them; against the numpy backend (the
reference) and finite differences of the per-example function, on the simulator."""

import math

import numpy as np
import pytest

import hydra
from hydra.backends import available
from tests.gradcheck import check
from tests.test_grad_flow import exits, nested, newton_sqrt, trips

pytestmark = pytest.mark.skipif(not available("cuda"), reason="numba.cuda unusable here")


def _strategy(k, *args):
    return k.specialize(k.signature(args)[1])[1].strategy


def _same(got, want):
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)  # (a GPU may fuse FMAs)


def test_a_loop_tape_in_one_kernel_grows_when_full():
    from hydra.backends.cuda import backend
    k = hydra.compile(hydra.value_and_grad(trips), varying=("x", "n"), backend="cuda")
    x = np.array([0.3, -0.7, 0.9, 0.2, 1.3])
    n = np.array([0, 1, 40, 3, 7])  # 40 trips: past the first capacity (16), then 64
    assert _strategy(k, x, n) == "one kernel"
    got = k(x, n)
    assert k.last_run_stats["launches"] == 2 and backend.TAPE_CAPACITY == 16
    _same(got, hydra.compile(hydra.value_and_grad(trips), varying=("x", "n"),
                             backend="numpy")(x, n))
    check(trips, [got[1]], list(zip(x, n)), [0])
    k(x, n)
    assert k.last_run_stats["launches"] == 1, "the grown capacity is kept"


@pytest.mark.parametrize("lanes", [3, 17])
def test_break_continue_return_and_nested_loops(lanes):
    rng = np.random.default_rng(lanes)
    x, y = rng.uniform(-1.5, 1.5, lanes), rng.uniform(-1.0, 2.0, lanes)
    n = rng.integers(0, 9, lanes)
    for fn, args, varying, argnums in [(exits, (x, y, n), ("x", "y", "n"), (0, 1)),
                                       (nested, (x, n), ("x", "n"), 0)]:
        got = hydra.compile(hydra.grad(fn, argnums=argnums), varying=varying,
                            backend="cuda")(*args)
        want = hydra.compile(hydra.grad(fn, argnums=argnums), varying=varying,
                             backend="numpy")(*args)
        _same(got, want)
    check(nested, [got], list(zip(x, n)), [0])


def test_a_data_dependent_while_loop():
    a = np.linspace(0.5, 30.0, 9)
    got = hydra.compile(hydra.grad(newton_sqrt), varying="a", backend="cuda")(a)
    np.testing.assert_allclose(got, 0.5 / np.sqrt(a), rtol=1e-6)


def pooled(x, n):
    """A loop around an op the host computes (CPython's lgamma): the phases strategy;
    the host keeps the tape."""
    s = x
    i = 0
    while i < n:
        s = math.sin(s) + math.lgamma(s * s + 1.0) * 0.1
        i += 1
    return s * x


def test_a_tape_between_phases_is_kept_by_the_host():
    x = np.array([0.3, -0.7, 0.9, 0.2])
    k = hydra.compile(hydra.value_and_grad(pooled), varying="x", backend="cuda")
    assert _strategy(k, x, 5) == "phases"
    got = k(x, 5)
    _same(got, hydra.compile(hydra.value_and_grad(pooled), varying="x",
                                 backend="numpy")(x, 5))
    check(pooled, [got[1]], [(a, 5) for a in x], [0])


def test_the_tape_kernel_types_and_lowers_for_the_cuda_target(tmp_path):
    """The one kernel of a loop's gradient (tape stores, the depth in a register, the
    overflow word) compiled to LLVM IR for the CUDA target, without a GPU."""
    import test_cuda_typing as typing_test
    found = typing_test._kernels(hydra.value_and_grad(trips),
                                 (np.arange(3.0), np.arange(3)), ("x", "n"))
    assert len(found) == 1 and "tape0_0[sp0, lane]" in found[0][0]
    assert typing_test.typed_in_a_child(tmp_path, found) == []
