"""Every cross-lane intrinsic, with all lanes active and inside divergent control flow
(only the active lanes take part), compared with expectations computed here in NumPy;
reading an inactive lane is a ``HydraError`` (lowering coverage: test_capability.py)."""

import numpy as np
import pytest

import hydra
from conftest import LANE_COUNTS, check_against_oracle
from hydra import (atomic_add, broadcast, lane, laneall, laneany, lanemax, lanemin, laneprod,
                   lanesum, nlanes, prefixsum, rotate, shuffle)


def run(fn, lanes, backend, *args, varying=()):
    """Run on ``backend`` and check it: numpy against the lockstep oracle, the other
    backends against numpy."""
    return check_against_oracle(fn, list(args), lanes, varying, backend, oracle=False,
                                lockstep=True)


def reductions(x):
    return (lanesum(x), laneprod(x % 3 + 1), lanemin(x), lanemax(x), laneany(x > 5),
            laneall(x > -100), lane(), nlanes())


def reductions_odd_lanes(x):
    s, p, lo, hi, an, al = 0, 0, 0, 0, False, False
    if lane() % 2 == 1:
        s = lanesum(x)
        p = laneprod(x % 3 + 1)
        lo = lanemin(x)
        hi = lanemax(x)
        an = laneany(x > 5)
        al = laneall(x % 2 == 0)
    return s, p, lo, hi, an, al


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_reductions_all_lanes(backend, lanes):
    lanes = backend.lanes(lanes)
    x = (np.arange(lanes, dtype=np.int64) * 7919) % 23 - 11
    s, p, lo, hi, an, al, ln, nl = run(reductions, lanes, backend, x, varying="x")
    assert s == x.sum() and isinstance(s, int)
    assert p == np.prod(x % 3 + 1)
    assert (lo, hi) == (x.min(), x.max())
    assert an == bool(np.any(x > 5)) and al is True
    np.testing.assert_array_equal(ln, np.arange(lanes))
    assert nl == lanes


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_reductions_see_only_active_lanes(backend, lanes):
    lanes = backend.lanes(lanes)
    x = (np.arange(lanes, dtype=np.int64) * 37) % 19 - 4
    s, p, lo, hi, an, al = run(reductions_odd_lanes, lanes, backend, x, varying="x")
    odd = np.arange(lanes) % 2 == 1
    xo = x[odd]
    if not odd.any():  # one lane: the branch never runs, the defaults come back
        assert list(s) == [0] and list(p) == [0]
        return
    np.testing.assert_array_equal(s, np.where(odd, xo.sum(), 0))
    np.testing.assert_array_equal(p, np.where(odd, np.prod(xo % 3 + 1), 0))
    np.testing.assert_array_equal(lo, np.where(odd, xo.min(), 0))
    np.testing.assert_array_equal(hi, np.where(odd, xo.max(), 0))
    np.testing.assert_array_equal(an, odd & bool(np.any(xo > 5)))
    np.testing.assert_array_equal(al, odd & bool(np.all(xo % 2 == 0)))


def sum_outside_and_inside(x, out):
    out[lane(), 0] = lanesum(x)
    if x > 0.0:
        out[lane(), 1] = lanesum(x)  # the same expression, over fewer lanes


def prod_outside_and_inside(out):
    out[lane(), 0] = laneprod(lane() + 1)
    if lane() < 5:
        out[lane(), 1] = laneprod(lane() + 1)


def test_same_reduction_under_another_mask_is_not_reused(backend):
    """The cuda backend's structured form once merged the inner call into the outer one
    (common subexpressions across regions) and returned the sum over all lanes."""
    x = np.array([1.0, -2.0, 3.0, -4.0, 5.0, 6.0, -7.0, 8.0])
    out = np.zeros((8, 2))
    hydra.compile(sum_outside_and_inside, varying="x", backend=backend)(x, out)
    np.testing.assert_array_equal(out[:, 0], np.full(8, x.sum()))
    np.testing.assert_array_equal(out[:, 1], np.where(x > 0, x[x > 0].sum(), 0.0))
    out = np.zeros((8, 2), np.int64)
    hydra.compile(prod_outside_and_inside, lanes=8, backend=backend)(out)
    np.testing.assert_array_equal(out[:, 0], np.full(8, 40320))
    np.testing.assert_array_equal(out[:, 1], np.where(np.arange(8) < 5, 120, 0))


def float_reductions(x):
    return lanesum(x), lanemin(x), lanemax(x), laneprod(x * 0.0 + 1.0)


def test_float32_reductions_keep_dtype(backend):
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    s, lo, hi, p = run(float_reductions, 8, backend, x, varying="x")
    assert isinstance(s, np.float32) and isinstance(lo, np.float32)
    assert lo == x.min() and hi == x.max() and p == 1.0
    assert abs(s - x.sum()) < 1e-6


def moves(x, k):
    b = broadcast(x, k)
    s = shuffle(x, nlanes() - 1 - lane())
    r = rotate(x, 1)
    r2 = rotate(x, -2)
    ps = prefixsum(x)
    return b, s, r, r2, ps


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_broadcast_shuffle_rotate_prefixsum(backend, lanes):
    lanes = backend.lanes(lanes)
    x = np.arange(lanes, dtype=np.int64) * 3 + 1
    k = lanes // 2
    b, s, r, r2, ps = run(moves, lanes, backend, x, k, varying="x")
    assert b == x[k] and isinstance(b, int)
    np.testing.assert_array_equal(s, x[::-1])
    np.testing.assert_array_equal(r, np.roll(x, -1))
    np.testing.assert_array_equal(r2, np.roll(x, 2))
    np.testing.assert_array_equal(ps, np.cumsum(x) - x)


def prefix_even(x):
    r = -1
    if lane() % 2 == 0:
        r = prefixsum(x)
    return r


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_prefixsum_over_active_lanes(backend, lanes):
    lanes = backend.lanes(lanes)
    x = np.arange(1, lanes + 1, dtype=np.int64)
    got = run(prefix_even, lanes, backend, x, varying="x")
    even = np.arange(lanes) % 2 == 0
    vals = np.where(even, x, 0)
    np.testing.assert_array_equal(got, np.where(even, np.cumsum(vals) - vals, -1))


def shuffle_in_pairs(x):
    r = x
    if lane() < nlanes() - nlanes() % 2:
        r = shuffle(x, lane() ^ 1)
    return r


def test_shuffle_among_active_lanes(backend):
    x = np.arange(7, dtype=np.int64) * 10
    got = run(shuffle_in_pairs, 7, backend, x, varying="x")
    np.testing.assert_array_equal(got, [10, 0, 30, 20, 50, 40, 60])


def histogram(hist, x):
    atomic_add(hist, x % len(hist), 1)
    if x % 2 == 0:
        atomic_add(hist, 0, 10)


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_atomic_add_counts_every_lane(backend, lanes):
    lanes = backend.lanes(lanes)
    x = (np.arange(lanes, dtype=np.int64) * 5) % 11
    hist = np.zeros(4, np.int64)
    assert hydra.compile(histogram, varying="x", backend=backend)(hist, x) is None
    want = np.bincount(x % 4, minlength=4)
    want[0] += 10 * np.count_nonzero(x % 2 == 0)
    np.testing.assert_array_equal(hist, want)


def atomic_add_float(acc, x):
    if x > 0.0:
        atomic_add(acc, 1, x)


def test_atomic_add_float_in_branch(backend):
    x = np.array([0.5, -1.0, 0.25, 2.0], dtype=np.float64)
    acc = np.zeros(2)
    hydra.compile(atomic_add_float, varying="x", backend=backend)(acc, x)
    np.testing.assert_array_equal(acc, [0.0, 2.75])


# --- reading an inactive lane ----------------------------------------------------------

def shuffle_inactive(x):
    r = x
    if lane() % 2 == 1:
        r = shuffle(x, lane() - 1)  # lane() - 1 is even: not active
    return r


def broadcast_inactive(x):
    r = x
    if lane() > 0:
        r = broadcast(x, 0)
    return r


def rotate_inactive(x):
    r = x
    if lane() < 2:
        r = rotate(x, 1)  # lane 1 reads lane 2, which is not active
    return r


@pytest.mark.parametrize("fn", [shuffle_inactive, broadcast_inactive, rotate_inactive])
def test_reading_an_inactive_lane_is_an_error(backend, fn):
    k = hydra.compile(fn, varying="x", backend=backend)
    with pytest.raises(hydra.HydraError, match="not active"):
        k(np.arange(4, dtype=np.int64))


def test_shuffle_out_of_range_is_an_error(backend):
    k = hydra.compile(lambda x: shuffle(x, lane() + 1), varying="x", backend=backend)
    with pytest.raises(hydra.HydraError, match="out of range"):
        k(np.arange(4, dtype=np.int64))


def test_intrinsics_outside_a_kernel_explain_themselves():
    with pytest.raises(RuntimeError, match="only has a meaning inside a kernel"):
        lane()


# --- intrinsics inside loops -----------------------------------------------------------

def active_counts(x):
    i = 0
    acc = 0
    while i < x:
        acc += lanesum(1) * 10 + prefixsum(1)
        i += 1
    return acc


def uniform_loop(x):
    i = 0
    while laneany(x > i):
        i += 1
    return i, lanemax(x), laneall(x >= 0), lanesum(x > 2)


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_intrinsics_in_divergent_and_uniform_loops(backend, lanes):
    lanes = backend.lanes(lanes)
    x = (np.arange(lanes, dtype=np.int64) * 7) % 6
    want = np.zeros(lanes, np.int64)
    for i in range(int(x.max()) + 1):
        active = x > i
        want += np.where(active, active.sum() * 10 + np.cumsum(active) - active, 0)
    np.testing.assert_array_equal(run(active_counts, lanes, backend, x, varying="x"), want)
    got = run(uniform_loop, lanes, backend, x, varying="x")
    assert got == (x.max(), x.max(), True, np.count_nonzero(x > 2))
    assert isinstance(got[3], int)


def moves_in_branch(x):
    r, b, s = -1, -1, -1
    if lane() % 2 == 0:
        r = rotate(x, 2)  # with an even lane count, lane i + 2 is even: active
        b = broadcast(x, 0)
        s = shuffle(x, (lane() + 4) % nlanes())
    return r, b, s


@pytest.mark.parametrize("lanes", [2, 8, 16, 1000])
def test_moves_among_active_lanes(backend, lanes):
    lanes = backend.lanes(lanes)
    x = np.arange(lanes, dtype=np.int64) * 5 + 3
    r, b, s = run(moves_in_branch, lanes, backend, x, varying="x")
    even = np.arange(lanes) % 2 == 0
    np.testing.assert_array_equal(r, np.where(even, np.roll(x, -2), -1))
    np.testing.assert_array_equal(b, np.where(even, x[0], -1))
    np.testing.assert_array_equal(s, np.where(even, np.roll(x, -4), -1))
