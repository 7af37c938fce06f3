"""A read-modify-write of a shared array that lanes may race on warns when the kernel
compiles (issue 22, item 7): ``counts[b] += 1`` from many lanes keeps one write per
element, as documented, and the warning names the line and suggests ``atomic_add``."""

import inspect
import warnings

import numpy as np
import pytest

import hydra
from hydra import atomic_add, lane, lanesum, nlanes


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, ln in enumerate(lines) if text in ln)


def compiled_warnings(fn, *args, backend="numpy", **options) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        hydra.compile(fn, backend=backend, **options)(*args)
    return [w for w in got if issubclass(w.category, hydra.HydraWarning)]


def histogram(x, counts):
    b = int(x * 4.0)
    counts[b] += 1


def reread(x, W):
    W[0, 1] = W[0, 1] + x


def row_update(x, W):
    W[0] += x


def test_hydra_warning_is_a_user_warning():
    assert issubclass(hydra.HydraWarning, UserWarning) and "HydraWarning" in hydra.__all__


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_histogram_warns_at_its_line_and_suggests_atomic_add(backend):
    counts = np.zeros(4, np.int64)
    (w,) = compiled_warnings(histogram, np.array([0.1, 0.2, 0.3, 0.6]), counts,
                             varying=("x",), backend=backend)
    assert (w.filename, w.lineno) == (__file__, line_of(histogram, "counts[b] += 1"))
    assert str(w.message) == (
        "counts[b] is read, changed and written back by many lanes at once, and lanes may "
        "reach the same element: only one lane's write lands there and the others' updates "
        "are lost (guide chapter 5, 'Lockstep memory and sync points'); use "
        "hydra.atomic_add(counts, b, value) to add every lane's value")
    np.testing.assert_array_equal(counts, [1, 1, 1, 0])  # lanes 0 and 1: one write


def wraps_around(x, a, i):
    a[(lane() + i) % 5] += 1


def test_an_index_modulo_a_size_other_than_nlanes_may_collide():
    (w,) = compiled_warnings(wraps_around, np.arange(8), np.zeros(5, np.int64), 1,
                             varying=("x",))
    assert str(w.message).startswith("a[index] is read")
    assert "hydra.atomic_add(a, index, value)" in str(w.message)


def test_spelled_out_and_row_updates_warn():
    (w,) = compiled_warnings(reread, np.arange(4.0), np.zeros((2, 2)), varying=("x",))
    assert w.lineno == line_of(reread, "W[0, 1] = W[0, 1] + x")
    assert str(w.message).startswith("W[0, 1] is read, changed and written back")
    assert str(w.message).endswith("use hydra.atomic_add on a 1-d shared array to add every "
                                   "lane's value, or sum the lanes' values first (lanesum) "
                                   "and update once")
    (w,) = compiled_warnings(row_update, np.ones((4, 3)), np.zeros((2, 3)), varying=("x",))
    assert w.lineno == line_of(row_update, "W[0] += x")
    assert str(w.message).startswith("W[0] is read, changed and written back")


def private(x, out, grid):
    out[lane()] += x
    grid[lane(), 1] += x


def private_rows(x, out):
    out[lane()] += x


def only_lane_zero(x, W):
    if lane() == 0:
        W[0] += x


def uniform_update(x, W):
    W[0] += lanesum(x)


def distinct_per_lane(x, out, grid):
    out[(lane() + 1) % nlanes()] += x
    grid[2, lane() * 2 - 1] += x


def own_array(x):
    tmp = np.zeros(4)
    b = int(x)
    tmp[b] += 1.0
    return tmp[b]


def plain_store(x, counts):
    counts[int(x)] = 1


def atomic(x, counts):
    atomic_add(counts, int(x), 1)


@pytest.mark.parametrize("fn, args, varying", [
    (private, (np.arange(4.0), np.zeros(4), np.zeros((4, 2))), ("x",)),
    (private_rows, (np.ones((4, 3)), np.zeros((4, 3))), ("x",)),
    (distinct_per_lane, (np.arange(4.0), np.zeros(4), np.zeros((3, 8))), ("x",)),
    (only_lane_zero, (np.arange(4.0), np.zeros(2)), ("x",)),
    (uniform_update, (np.arange(4.0), np.zeros(2)), ("x",)),
    (own_array, (np.arange(4.0) % 2,), ("x",)),
    (plain_store, (np.arange(4.0) % 2, np.zeros(4, np.int64)), ("x",)),
    (atomic, (np.arange(4.0) % 2, np.zeros(4, np.int64)), ("x",)),
])
def test_no_warning_where_lanes_cannot_lose_an_update(fn, args, varying):
    assert compiled_warnings(fn, *args, varying=varying) == []


def test_one_lane_races_with_no_one():
    assert compiled_warnings(histogram, np.array([0.1]), np.zeros(4, np.int64),
                             varying=("x",), lanes=1) == []
