"""Per-lane array programs that tests/test_random_array_programs.py found hydra getting
wrong, each reduced to its core and checked against the per-example function on both
backends, with compaction forced on and off where a loop or a product is involved."""

import numpy as np
import pytest
from arrays_oracle import check

from hydra.executor.policy import OFF, Policy


@pytest.fixture(params=[OFF, Policy(op_below=1.01, loop_below=1.01)],
                ids=["masked", "compacted"])
def compaction(request):
    """Never compact (per op and per loop), or always (the numpy reference never does)."""
    return request.param


def args_xkWb(n, b, seed=0):
    r = np.random.default_rng(seed)
    return [r.integers(-4, 5, (n, 4)).astype(float), r.integers(0, 4, n),
            r.integers(-2, 3, (3, 4)).astype(float), np.array(b)]


# --- a uniform array passed on where the program's value is per lane -----------------

def uniform_if_arm(x, k, W, b):
    if b[0] > 0:             # uniform: one arm yields a lane's own array, the other not
        h = np.zeros(3)
    else:
        h = b * 1.0
    return h + x[:3]


def uniform_loop_entry(x, k, W, b):
    h = b * 1.0              # uniform on entry, each lane's own after the first trip
    w = 0
    while w < k and (x[:3] >= np.where(b > 0, h, h)).any():
        w += 1
        h = np.zeros(3)
    return h


def uniform_loop_entry_heavy(x, k, W, b):
    h = b * 1.0              # the same in a loop that compacts (a product in its body)
    w = 0
    while w < k and (x[:3] >= h).any():
        w += 1
        h = np.zeros(3) + W @ x
    return h


@pytest.mark.parametrize("fn", [uniform_if_arm, uniform_loop_entry, uniform_loop_entry_heavy])
@pytest.mark.parametrize("b", [[1.0, -1.0, 2.0], [-1.0, 1.0, 2.0]])
def test_uniform_array_into_a_per_lane_slot_gets_one_row_per_lane(fn, b, be, compaction):
    """A uniform array yielded by an if under a uniform condition, or carried into a
    loop, where the result is per lane: was passed on without its lane axis ('cannot
    reshape array of size 3 into shape (17,1)' in the next operation)."""
    check(fn, ("x", "k"), args_xkWb(17, b), 17, be, exact=True, compaction=compaction)


# --- a per-lane number from a product under a mask with few lanes --------------------

def dot_under_mask(x, k, W, b):
    s = 0.0
    if k > 2:                # few lanes active: the product runs on their rows only
        s = x @ W[1]
    return s


def test_product_giving_a_number_runs_on_the_active_rows(be, compaction):
    """x @ y is a number per lane: the compacted product made its zeros with the dtype
    of an array type ('Float64DType' object has no attribute 'dtype')."""
    check(dot_under_mask, ("x", "k"), args_xkWb(17, [1.0, 1.0, 1.0]), 17, be, exact=True,
          compaction=compaction)


# --- an early return no lane takes -----------------------------------------------------

def return_no_lane_takes(x, v, k, W, b):
    a = x.copy()
    if v < 0.5:              # no lane enters: a's value for "returned here" is undefined
        if b.sum() > 0:
            return a, v
    w = 0
    while w < 3 and v > 0:
        w += 1
        a = np.clip(a, -16.0, 16.0)
    return a, v


@pytest.mark.parametrize("n", [1, 3])
def test_early_return_that_no_lane_takes_keeps_the_arrays_dtype(be, n):
    """The select joining 'returned early' with the rest read two undefined arrays (an
    if no lane entered) and made an object array of Nones: the numpy backend returned
    dtype object, the cpu backend's fused chain failed to compile."""
    args = [np.arange(4.0 * n).reshape(n, 4), np.full(n, 3.0), np.ones(n, np.int64),
            np.ones((3, 4)), -np.ones(3)]
    check(return_no_lane_takes, ("x", "v", "k"), args, n, be, exact=True)


# --- an array made from constants inside a compacted loop ----------------------------

def arange_in_compacted_loop(x, k, W, b):
    h = x * 1.0
    for _ in range(k):       # a product in the body: the loop compacts
        h = W.T @ (W @ h) + np.arange(4.0)
    return h


def test_array_op_without_operands_in_a_compacted_loop(be, compaction):
    """np.arange(4.0) in a compacted loop: the check for an `xs[t]` gather read the
    op's first operand before asking whether it was a getitem (IndexError)."""
    check(arange_in_compacted_loop, ("x", "k"), args_xkWb(17, [1.0, 1.0, 1.0]), 17, be,
          exact=True, compaction=compaction)


# --- a uniform number passed on where the program's number is per lane ---------------

def number_carried_into_array_op(x, v, W):
    s = v * 1.0              # per lane on entry
    a = x.copy()
    for _ in range(2):
        a -= np.clip(s, -2.0, 2.0)
        for _ in range(3):
            s = np.clip(abs(-2.0), -3.0, 3.0)   # uniform after the first trip
    return a, s


def number_from_a_uniform_if(x, v, W):
    s = v * 1.0
    if W[0, 0] > 0:
        s = 2.0
    return np.clip(s, -1.0, 1.0) + x


@pytest.mark.parametrize("fn", [number_carried_into_array_op, number_from_a_uniform_if])
@pytest.mark.parametrize("w", [1.0, -1.0])
def test_uniform_number_into_a_per_lane_slot_feeds_array_ops(fn, w, be):
    """A uniform number carried by a loop or yielded by an if under a uniform condition
    into a per-lane slot reached an array operation without its lane axis ('cannot
    reshape array of size 1 into shape (5,1)')."""
    r = np.random.default_rng(7)
    args = [r.integers(-4, 5, (5, 4)).astype(float), r.integers(-3, 4, 5).astype(float),
            np.full((3, 4), w)]
    check(fn, ("x", "v"), args, 5, be, exact=True)
