"""Precomputed host steps of scalar lane reductions and one-GEMM products
(hydra/executor/reductions.py, hydra/executor/products.py): the step is in the plan, its values
have the numpy
backend's bits (the same NumPy calls on the same arrays), masks and odd operands go
to the host rule with its results and errors."""

import numpy as np
import pytest

import hydra
from hydra import lanemax, lanemin, lanesum
from hydra.executor.host import Host
from hydra.executor.reductions import reduction_step
from hydra.executor.steps import Quick
from hydra.errors import InactiveLaneError


def plan_of(kern, args):
    kern(*args)
    return kern.specialize(kern.signature(list(args))[1])[1].__self__


def lane_steps(plan) -> list:
    """The plan's steps of scalar lane reductions and one-GEMM products."""
    return [s.op for s in plan.steps if isinstance(s, Quick)
            and s.fn.__qualname__.split(".")[0] in ("_lane_reduction", "_gemm")]


def same(fn, varying, args, exact=True):
    """cpu and numpy backends give the same bits (``exact=False``: within the
    summation-order tolerance, where a product compacts on cpu, which the numpy
    reference never does); (cpu kernel, results)."""
    kern = hydra.compile(fn, varying=varying, backend="cpu")
    got = kern(*args)
    ref = hydra.compile(fn, varying=varying, backend="numpy")(*args)
    for g, r in zip(got, ref):
        assert np.asarray(g).dtype == np.asarray(r).dtype
        if exact:
            assert np.asarray(g).tobytes() == np.asarray(r).tobytes()
        else:
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)
    return kern, got


def reductions_one(x, k):
    return lanesum(x * 1.5), lanemin(x), lanemax(k), lanesum(k)


@pytest.mark.parametrize("n", [1, 3, 64, 257])
def test_scalar_lane_reductions(n):
    r = np.random.default_rng(n)
    x = r.standard_normal(n).astype(np.float32)
    k = r.integers(-2**31, 2**31 - 1, n).astype(np.int32)  # int32 sums wrap as NumPy's
    kern, got = same(reductions_one, ("x", "k"), [x, k])
    assert np.float32(got[0]) == np.add.reduce(x * np.float32(1.5))
    ops = lane_steps(plan_of(kern, [x, k]))
    assert sorted(o.attrs["name"] for o in ops) == ["lanemax", "lanemin", "lanesum",
                                                    "lanesum"]


def masked_one(x):
    s = 0.0
    if x > 0.0:
        s = lanesum(x) + lanemin(x)
    return s


def test_reductions_under_a_mask_and_over_no_lane():
    """Some lanes active: the reference on the mask; none (a state the plans never
    reach: a branch no lane takes is skipped): the host rule, which raises its error."""
    x = np.array([1.0, -2.0, 3.0, -4.0, 5.0], np.float64)
    kern, got = same(masked_one, ("x",), [x])
    assert list(got) == [10.0, 0.0, 10.0, 0.0, 10.0]
    plan = plan_of(kern, [x])
    ops = {o.attrs["name"]: o for o in plan.fn.walk() if o.opcode == "intrinsic"}
    assert sorted(ops) == ["lanemin", "lanesum"]
    for name, want, none in (("lanesum", 9.0, 0.0), ("lanemin", 1.0, None)):
        op = ops[name]
        assert op.mask is not None
        step = reduction_step(op)
        host = Host(plan.fn, 5)
        env = {op.operands[0].id: x, op.mask.id: x > 0.0}
        step.run(host, env)
        assert env[op.result.id] == want and type(env[op.result.id]) is np.float64
        env[op.mask.id] = np.zeros(5, bool)
        if none is None:
            with pytest.raises(InactiveLaneError, match="lanemin over no active lanes"):
                step.run(host, env)
        else:
            step.run(host, env)
            assert env[op.result.id] == none
        env[op.operands[0].id] = np.float64(2.0)  # not a per-lane array: the host rule
        env[op.mask.id] = x > 0.0
        step.run(host, env)
        assert env[op.result.id] == (6.0 if name == "lanesum" else 2.0)


def gemm_one(x, V, U):
    h = V @ x                 # uniform [10, 16] @ per-lane [16]: one GEMM
    g = h @ U                 # per-lane [10] @ uniform [10, 8]: lanes as rows
    return h, g, np.dot(U, g), x @ V.T


@pytest.mark.parametrize("n", [1, 5, 256])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_one_gemm_products(n, dt):
    r = np.random.default_rng(n)
    x = r.standard_normal((n, 16)).astype(dt)
    V, U = r.standard_normal((10, 16)).astype(dt), r.standard_normal((10, 8)).astype(dt)
    kern, got = same(gemm_one, ("x",), [x, V, U])
    np.testing.assert_allclose(got[0], x @ V.T, rtol=1e-5)
    assert len(lane_steps(plan_of(kern, [x, V, U]))) == 4


def gemm_masked_one(x, V, k):
    y = np.zeros(10, np.float32)
    if k > 0:
        y = V @ x
    return y


@pytest.mark.parametrize("active", [1, 15, 16])
def test_one_gemm_under_a_mask(active):
    """Few active lanes: the host rule's compacted rows; most: one GEMM over all rows."""
    n = 16
    r = np.random.default_rng(active)
    x, V = r.standard_normal((n, 16)).astype(np.float32), \
        r.standard_normal((10, 16)).astype(np.float32)
    k = np.zeros(n, np.int64)
    k[r.permutation(n)[:active]] = 1
    compacted = active < 0.9 * n  # the policy's op_below: the rows of the active lanes
    kern, got = same(gemm_masked_one, ("x", "k"), [x, V, k], exact=not compacted)
    want = np.where(k[:, None] > 0, x @ V.T, 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
