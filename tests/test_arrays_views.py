"""Views, copies and aliasing of per-lane and uniform arrays (SPEC section 8: NumPy's
semantics, views included), each program checked against the per-example function on
the numpy and cpu backends at several lane counts (``be`` and ``n``); the oracle also
compares what a program writes into its array arguments.

Per example, NumPy decides whether an operation gives a view or a copy: basic slicing,
``.T`` and a reshape its strides allow are views (writes land in the base); a reshape
its strides do not allow, ``astype``, ``copy``, arithmetic and gathers are copies.
"""

import numpy as np
import pytest

from arrays_oracle import check

import hydra
from hydra.errors import CompileError, KernelValueError

F = np.float32


def _x(n, *shape, seed=0):
    return np.random.default_rng(seed).standard_normal((n,) + shape).astype(F)


def _w(*shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape).astype(F)


# --- reshapes of shared arrays: a view or a copy, as NumPy decides -------------------

def reshape_of_transpose(W, x):
    r = W.T.reshape(6)  # NumPy copies: each example its own r
    r[0] = x[0]
    return r


def reshape_view_of_shared(W, x):
    r = W.reshape(6)  # a view: the stores land in the shared W (the last lane's wins)
    r[0] = x[0]
    return r


def transpose_reshape_of_computed(W, x):
    t = W * 2
    r = t.T.reshape(6)
    r[0] = x[0]
    return t, r


def reshape_of_fortran_result(W, x):
    t = W.T * 2  # Fortran-ordered, as NumPy keeps W.T's layout: the reshape copies
    r = t.reshape(6)
    r[0] = x[0]
    return t


def zeros_like_shared_transposed(W, x):
    z = np.zeros_like(W.T)  # each lane's own, Fortran-ordered as W.T: the reshape copies
    r = z.reshape(6)
    r[0] = x[0]
    return z, r


SHARED_RESHAPES = [zeros_like_shared_transposed, reshape_of_transpose, reshape_view_of_shared,
                   transpose_reshape_of_computed, reshape_of_fortran_result]


@pytest.mark.parametrize("fn", SHARED_RESHAPES, ids=lambda f: f.__name__)
def test_reshapes_of_shared_arrays(fn, be, n):
    check(fn, ("x",), (_w(2, 3), _x(n, 3)), n, be)


def test_reshape_of_a_transposed_argument_layout_is_checked(be):
    """hydra decides a shared array's reshape for a C-contiguous array; an argument
    whose strides make NumPy decide otherwise is refused before anything runs."""
    W = np.asfortranarray(_w(2, 3))  # W.T is C-contiguous: NumPy's reshape is a view
    x = _x(4, 3)
    k = hydra.compile(reshape_of_transpose, varying=("x",), backend=be)
    before = W.copy()
    with pytest.raises(KernelValueError, match=r"argument 'W' has strides .* NumPy makes a "
                                               r"view in this reshape.*compiled a copy"):
        k(W, x)
    assert np.array_equal(W, before)  # refused before anything ran
    check(reshape_of_transpose, ("x",), (np.ascontiguousarray(W), x), 4, be)


def test_read_only_shared_array_is_not_written(be):
    """A copy of a read-only shared array may be written (as per example); a view of it
    may not."""
    W = _w(2, 3)
    W.flags.writeable = False
    x = _x(5, 3)

    def sum_written(W, x):
        s = W.sum(0)
        s[0] = x[0]
        return s

    for fn in (reshape_of_transpose, sum_written, transpose_reshape_of_computed):
        check(fn, ("x",), (W, x), 5, be)
    with pytest.raises(ValueError, match="read-only"):
        hydra.compile(reshape_view_of_shared, varying=("x",), backend=be)(W, x)


# --- layouts: whether a reshape is a view depends on NumPy's memory layout ------------

def transposed_copy_reshape(x):
    c = x.T.copy()  # C-ordered: its reshape is a view
    r = c.reshape(6)
    r[0] = 1.0
    return c


def transposed_product_reshape(x):
    t = x.T * 2  # Fortran-ordered per example: its reshape is a copy
    r = t.reshape(6)
    r[0] = 5.0
    return t


def zeros_like_transposed(x):
    z = np.zeros_like(x.T)  # Fortran-ordered, as x.T
    r = z.reshape(6)
    r[0] = x[0, 0]
    return z


@pytest.mark.parametrize("fn", [transposed_copy_reshape, transposed_product_reshape,
                                zeros_like_transposed], ids=lambda f: f.__name__)
def test_reshape_sees_numpy_layouts(fn, be, n):
    check(fn, ("x",), (_x(n, 2, 3),), n, be)


def gathered_row_written(W, x, i):
    r = W[i]  # per example a view of the shared W (basic indexing)
    r[0] = x[0]
    return r


def test_store_through_a_gathered_row_is_refused(be):
    """hydra gathers W[i] at a varying i as a per-lane copy (SPEC section 8), so a store
    through it would silently miss W, where it lands per example: refused."""
    with pytest.raises(CompileError, match=r"store into W\[\.\.\.\] at a varying index.*"
                                           r"view") as e:
        hydra.compile(gathered_row_written, varying=("x", "i"), backend=be)(
            _w(5, 3), _x(3, 3), np.array([0, 1, 1]))
    assert e.value.loc.line == gathered_row_written.__code__.co_firstlineno + 2
