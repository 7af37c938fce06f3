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


G = np.arange(6, dtype=F).reshape(2, 3)


def captured_reshape(W, x):
    r = G.T.reshape(6)  # a captured array: as an argument
    r[0] = x[0]
    return r


def _flat(a):
    return a.T.reshape(-1)


def reshape_in_helper(W, x):
    r = _flat(W)
    r[1] = x[1]
    return r, W


def reshape_in_branches(W, x):
    if x[2] > 0:
        r = W.T.reshape(6)
    else:
        r = W.reshape(6) * 1
    r[0] = x[0]
    return r, W


def reshape_copy_viewed(W, x):
    r = W.T.reshape(6)[1:]
    r[0] = x[0]
    q = W.T.reshape(3, 2).T
    q[0, 0] = x[1]
    return r, q, W


def computed_rows_written(W, x):
    t = W * 1
    for row in t:
        row[0] = x[0]
    return t


SHARED_RESHAPES = [captured_reshape, reshape_in_helper, reshape_in_branches,
                   reshape_copy_viewed, computed_rows_written, zeros_like_shared_transposed,
                   reshape_of_transpose, reshape_view_of_shared,
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


def where_of_transposed(x):
    w = np.where(x.T > 0, x.T, 0.0)  # Fortran-ordered: its operands are
    r = w.reshape(6)
    r[0] = 5.0
    return w


def exp_of_transposed(x):
    w = np.exp(x.T) + x.T
    r = w.reshape(6)
    r[0] = 5.0
    return w


def base_written_after_reshape(x):
    t = x.T * 2
    r = t.reshape(6)  # a copy: the store into t does not reach r
    t[0, 0] = 5.0
    return r, t


@pytest.mark.parametrize("fn", [transposed_copy_reshape, transposed_product_reshape,
                                zeros_like_transposed, where_of_transposed,
                                exp_of_transposed, base_written_after_reshape],
                         ids=lambda f: f.__name__)
def test_reshape_sees_numpy_layouts(fn, be, n):
    check(fn, ("x",), (_x(n, 2, 3),), n, be)


# --- writes through views of a lane's own arrays --------------------------------------

def slices_of_slices(x):
    a = x[1:7]
    b = a[::2]
    b[1] = -1.0
    return x


def negative_steps(x):
    a = x[::-1]
    a[0] = 9.0
    b = a[1:5][::-2]
    b[0] = 7.0
    return x


def transpose_store(x):
    x.T[0] = 1.0
    x.T[1, 1] = 3.0
    return x


def reshape_views(x):
    r = x.reshape(6)
    r[0] = 5.0
    t = x.T.reshape(6)  # a copy: x keeps its values
    t[1] = 6.0
    return x, t


def reshape_then_transpose(x):
    r = x.reshape(3, 2).T
    r[0, 1] = -4.0
    return x


def reshape_of_reversed(x):
    r = x[::-1].reshape(2, 3)
    r[0, 0] = 8.0
    return x


def rows_written(x):
    for row in x:
        row[0] = row[1] * 2
    return x


def rows_added_in_place(x):
    for row in x:
        row += 1.0
    return x.sum()


LANE_VIEWS = [(slices_of_slices, (8,)), (negative_steps, (8,)), (transpose_store, (2, 3)),
              (reshape_views, (2, 3)), (reshape_then_transpose, (2, 3)),
              (reshape_of_reversed, (6,)), (rows_written, (3, 4)),
              (rows_added_in_place, (3, 4))]


@pytest.mark.parametrize("fn,shape", LANE_VIEWS, ids=lambda p: getattr(p, "__name__", ""))


def test_writes_through_views_of_lane_arrays(fn, shape, be, n):
    check(fn, ("x",), (_x(n, *shape),), n, be)


# --- masks, helpers, aliasing ---------------------------------------------------------

def masked_if(x, c):
    y = x.copy()
    if c > 0:
        y[0] = 100.0
        x[1] = 50.0
    return y


def masked_while(x, k):
    i = 0
    while i < k:
        x[i] = i
        i += 1
    return x


def _helper(a):
    a[0] = 3.0
    return a


def through_helper(x):
    y = _helper(x[1:])
    return y, x


def same_array_twice(x):
    y = x * 2
    return y, y


def view_of_argument(x):
    return x[1:], x


def copies_are_copies(x):
    a = x.astype(np.float32)
    a[0] = 0.0
    b = x.copy()
    b[1] = 0.0
    return x, a, b


def alias_then_add(x, y):
    z = x
    z += y
    return x


def local_alias(x):
    a = np.zeros(4, np.float32)
    b = a
    b[1] = x[0]
    return a


def test_masks_helpers_and_aliases(be, n):
    rng = np.random.default_rng(3)
    x, c, k = _x(n, 4), _x(n, seed=4), rng.integers(0, 4, n)
    check(masked_if, ("x", "c"), (x, c), n, be)
    check(masked_while, ("x", "k"), (_x(n, 4), k), n, be)
    for fn in (through_helper, same_array_twice, view_of_argument, copies_are_copies,
               local_alias):
        check(fn, ("x",), (_x(n, 4),), n, be)
    check(alias_then_add, ("x", "y"), (_x(n, 4), _x(n, 4, seed=5)), n, be)


# --- uniform arrays written ------------------------------------------------------------

def shared_row_written(W, x):
    r = W[1]  # a view of the shared W: the last lane's store wins, as per example
    r[0] = x[0]
    return W


def shared_copies_written(W, x):
    a = W.astype(np.float32)
    a[0] = x[0]
    b = W.copy()
    b[1] = x[1]
    c = W + 0
    c[2] = x[2]
    return a, b, c, W


def lane_private_places(W, x):
    W[hydra.lane()] = x  # lane-private rows of a shared array
    return W.sum()


@pytest.mark.parametrize("fn", [shared_row_written, shared_copies_written],
                         ids=lambda f: f.__name__)
def test_uniform_arrays_written(fn, be, n):
    check(fn, ("x",), (_w(3, 4), _x(n, 4)), n, be)


def test_uniform_array_lane_private_rows(be, n):
    W = np.zeros((n, 4), F)
    k = hydra.compile(lane_private_places, varying=("x",), backend=be)
    x = _x(n, 4)
    k(W, x)
    assert np.array_equal(W, x)


def _ident(a):
    return a


def _write_first(W, v):
    W[0] = v


def row_swap(x):
    x[0], x[1] = x[1], x[0]
    return x


def overlap_assign(x):
    x[1:] = x[:-1]
    return x


def reverse_assign(x):
    x[::-1] = x
    return x


def overlap_iadd(x):
    y = x[::-1]
    y += x
    return x


def helper_ident(x):
    y = _ident(x)
    y[0] = 1.0
    return x


def masked_view(x, c):
    v = x[1:]
    if c > 0:
        v[0] = 5.0
    return x


def while_break_view(x, k):
    v = x[::-1]
    i = 0
    while True:
        if i >= k:
            break
        v[i] = -1.0
        i += 1
    return x


def copy_then_write(x):
    c = x.copy()
    x[0] = 1.0
    return c, x


def TT_ellipsis_none(x):
    x.T.T[0, 0] = 1.0
    x[...][1, 1] = 2.0
    x[None][0, 0, 2] = 3.0
    x[:, None][1, 0, 0] = 4.0
    return x


def fn_forms(x):
    r = np.reshape(x, (6,))
    r[0] = 1.0
    t = np.transpose(x)
    t[2, 1] = 2.0
    m = x.reshape(-1)
    m[3] = 3.0
    return x


def concat_copy(x):
    c = np.concatenate((x, x))
    c[0] = 9.0
    s = np.stack((x, x))
    s[1, 1] = 8.0
    w = np.where(x > 0, x, 0.0)
    w[2] = 7.0
    return x, c, s, w


def astype_other(x):
    a = x.astype(np.float64)
    a[0] = 1.0
    return x, a


def return_twice_modify(x):
    y = x[1:]
    y[0] = 3.0
    return y, x, y


def rows_of_T(x):
    for col in x.T:
        col[1] = 0.0
    return x


def rows_reassign(x):
    out = np.zeros(4, np.float32)
    for row in x:
        out += row
        row[0] = out[0]
    return x, out


def view_read_after_write(x):
    r = x[1:]
    x[2] = 7.0
    return r * 1


def written_sum_view(x):
    t = x.sum(0)
    u = t[::-1]
    u[0] = 0.0
    return t


def helper_shared(W, x):
    _write_first(W, x[0])
    return W


def rows_shared(W, x):
    for row in W:
        row[0] = x[0]
    return W


def masked_shared(W, x, c):
    if c > 0:
        W[0] = x[0]
    return W


def uniform_view_read_after_write(W, x):
    r = W[0]
    W[0, 1] = 7.0
    return r + x


MORE_LANE = [row_swap, overlap_assign, reverse_assign, overlap_iadd, helper_ident,
             copy_then_write, TT_ellipsis_none, fn_forms, concat_copy, astype_other,
             return_twice_modify, view_read_after_write]


@pytest.mark.parametrize("fn", MORE_LANE, ids=lambda f: f.__name__)


def test_more_views_of_lane_arrays(fn, be, n):
    shape = (2, 3) if fn in (row_swap, TT_ellipsis_none, fn_forms) else (6,) \
        if fn in (overlap_assign, reverse_assign, overlap_iadd) else (4,)
    check(fn, ("x",), (_x(n, *shape),), n, be)


def test_views_under_masks_and_loops(be, n):
    rng = np.random.default_rng(7)
    check(masked_view, ("x", "c"), (_x(n, 4), _x(n, seed=8)), n, be)
    check(while_break_view, ("x", "k"), (_x(n, 5), rng.integers(0, 5, n)), n, be)
    for fn in (rows_of_T, rows_reassign, written_sum_view):
        check(fn, ("x",), (_x(n, *((2, 3) if fn is written_sum_view else (3, 4))),), n, be)


def test_shared_arrays_through_helpers_rows_and_masks(be, n):
    check(helper_shared, ("x",), (_w(3), _x(n, 3)), n, be)
    check(rows_shared, ("x",), (_w(3, 4), _x(n, 4)), n, be)
    check(masked_shared, ("x", "c"), (_w(3), _x(n, 3), _x(n, seed=9)), n, be)
    check(uniform_view_read_after_write, ("x",), (_w(3, 4), _x(n, 4)), n, be)


def chosen_argument_written(x, c):
    y = np.zeros(4, np.float32)
    z = y
    if c > 0:
        z = x
    z[0] = 1.0  # per example: into the caller's x on the lanes with c > 0
    return x, y


def rebound_argument_written(x, c):
    if c > 0:
        x = x * 2
    x[1] = 0.0  # per example: into the caller's x on the lanes with c <= 0
    return x


def chosen_own_array_read_after(x, c):
    y = np.zeros(4, np.float32)
    z = y
    if c > 0:
        z = x * 1
    z[0] = 1.0  # per example: into y on the lanes with c <= 0, and y is returned
    return y


def rebound_in_branch(x, c):
    h = np.zeros(4, np.float32)
    if c > 0:
        h = h + x  # the old h is never read again: the store may go into the join
    h[0] = 5.0
    return h


def chosen_in_loop(x, c):
    acc = np.zeros(4, np.float32)
    for t in range(3):
        s = acc.sum()
        if c[t] > 0:
            acc = acc + x[t]
        acc[0] += s
    return acc


def chosen_array_joined_then_read(x, c, d):
    y = x * 1
    z = y
    w = x * 3
    if c > 0:
        z = x * 2
    if d > 0:
        w = y  # w is y on these lanes: reading w after the store reads y
    z[0] = 5.0
    return w


def chosen_array_read_before_the_store(x, c):
    y = x * 1
    z = y
    if c > 0:
        z = x * 2
    s = y.sum()  # before the store: cannot see it
    z[0] = 5.0
    return z, s


def chosen_array_read_in_the_other_arm(x, c, d):
    y = x * 1
    if d > 0:
        z = y
        if c > 0:
            z = x * 2
        z[0] = 5.0
        r = z.sum()
    else:
        r = y.sum()  # a lane here never ran the store
    return r


def chosen_array_in_an_arm_of_a_loop(x, c, k):
    a = x * 1
    t = 0
    while t < k:
        t += 1
        if c > t:
            if c > 0:
                a = np.clip(x * 2, -1, 1)
            a -= 0.5  # the old a flows on only through the other arm's join
        else:
            a = a + 1
    return a


def chosen_array_returned_before_the_store(x, c, d):
    h = x * 1
    for t in range(2):
        if c > t:
            h = np.clip(h * 2, -4, 4)
        elif d > 0:
            return h  # a lane that returns h here runs no later store
        h[1] += 1.0
    return h


def chosen_array_passed_on_by_the_other_arm(x, c, d):
    a = x * 1
    if c > 0:
        s = a.sum()  # these lanes pass the old a on, and never store
    else:
        if d > 0:
            a = x * 2
        a[0] = 7.0
        s = a.sum()
    return a, s


def chosen_array_carried_by_a_loop(x, c, d):
    y = x * 1
    z = y
    w = y
    for t in range(2):
        if d > t:
            w = x * 3  # lanes with d <= 0 keep w = y through the loop
    if c > 0:
        z = x * 2
    z[0] = 5.0
    return w


def chosen_array_after_a_loop_of_other_names(x, c, d):
    y = x * 1
    s = np.float32(0)
    for t in range(3):
        if d > t:
            s += y[1]
    z = y
    if c > 0:
        z = x * 2
    z[0] = 5.0
    return z, s


@pytest.mark.parametrize("fn", [chosen_argument_written, rebound_argument_written,
                                chosen_own_array_read_after, chosen_array_joined_then_read,
                                chosen_array_carried_by_a_loop],
                         ids=lambda f: f.__name__)
def test_store_into_an_array_a_varying_if_chose_is_refused(fn, be):
    with pytest.raises(CompileError, match=r"store into an array that a varying if chose: "
                                           r"per example it lands in [xy], ") as e:
        count = fn.__code__.co_argcount
        hydra.compile(fn, varying=("x", "c", "d")[:count], backend=be)(
            *(_x(3, 4), _x(3, seed=2), _x(3, seed=3))[:count])
    assert "z[0]" in e.value.loc.source_line() or "x[1]" in e.value.loc.source_line()


def test_stores_into_a_join_nothing_else_reads(be, n):
    check(rebound_in_branch, ("x", "c"), (_x(n, 4), _x(n, seed=2)), n, be)
    check(chosen_in_loop, ("x", "c"), (_x(n, 3, 4), _x(n, 3, seed=2)), n, be)
    check(chosen_array_read_before_the_store, ("x", "c"), (_x(n, 4), _x(n, seed=2)), n, be)
    check(chosen_array_read_in_the_other_arm, ("x", "c", "d"),
          (_x(n, 4), _x(n, seed=2), _x(n, seed=3)), n, be)
    check(chosen_array_returned_before_the_store, ("x", "c", "d"),
          (_x(n, 4), _x(n, seed=2) * 2, _x(n, seed=3)), n, be)
    check(chosen_array_after_a_loop_of_other_names, ("x", "c", "d"),
          (_x(n, 4), _x(n, seed=2), _x(n, seed=3) * 2), n, be)
    check(chosen_array_passed_on_by_the_other_arm, ("x", "c", "d"),
          (_x(n, 4), _x(n, seed=2), _x(n, seed=3)), n, be)
    check(chosen_array_in_an_arm_of_a_loop, ("x", "c", "k"),
          (_x(n, 4), _x(n, seed=2) * 3, np.arange(n) % 4), n, be)



# --- views of one array that a varying if or a loop chose -------------------------------
# Per example ``t`` is a view of the row the lane chose, and the store lands in ``x``;
# hydra joins the views into per-lane rows (a copy), so it is refused.

def row_chosen_by_an_expression(x, c):
    t = x[0] if c > 0 else x[1]
    t[2] = 7.0
    return x


def row_chosen_by_a_statement(x, c):
    if c > 0:
        t = x[0]
    else:
        t = x[1]
    t[2] = 7.0
    return c


def slice_chosen(x, c):
    t = x[0:2] if c > 0 else x[1:3]
    t[0, 2] = 7.0
    return x


def row_of_own_array_chosen(x, c):
    y = x * 1
    t = y[0] if c > 0 else y[1]
    t[2] = 7.0  # y is returned: the store must land in it
    return y


def row_chosen_in_a_loop(x, c):
    t = x[0]
    for k in range(3):
        if c > k:
            t = x[k + 1]
    t[2] = 7.0
    return x


def row_chosen_by_a_varying_loop(x, m):
    t = x[0]
    k = 0
    while k < m:
        k += 1
        t = x[k]
    t[2] = 7.0
    return x


def row_chosen_in_a_loop_stored_in_it(x, c):
    t = x[0]
    for k in range(3):
        t[1] += 1.0  # the second trip's t is the join
        if c > k:
            t = x[k + 1]
    return x


def own_array_chosen_in_a_loop(x, c):
    y = x * 1
    z = x * 2
    t = y
    for k in range(2):
        if c > k:
            t = z
    t[0] = 5.0
    return y, z


def row_chosen_in_a_loop_then_by_a_uniform_if(x, c, u):
    t = x[0]
    for k in range(3):
        if c > k:
            t = x[k + 1]
    s = t if u > 0 else x[3]  # u uniform: s is t, a join of rows already
    s[2] = 7.0
    return x


def row_chosen_in_a_loop_then_by_a_varying_if(x, c, d):
    t = x[0]
    for k in range(3):
        if c > k:
            t = x[k + 1]
    s = t if d[0] > 0 else x[3] * 1  # the store's own join is of x and a new array
    s[2] = 7.0
    return x


VIEWS_CHOSEN = [row_chosen_by_an_expression, row_chosen_by_a_statement, slice_chosen,
                row_of_own_array_chosen, row_chosen_in_a_loop, row_chosen_by_a_varying_loop,
                row_chosen_in_a_loop_stored_in_it, own_array_chosen_in_a_loop,
                row_chosen_in_a_loop_then_by_a_uniform_if,
                row_chosen_in_a_loop_then_by_a_varying_if]


@pytest.mark.parametrize("fn", VIEWS_CHOSEN, ids=lambda f: f.__name__)
def test_store_into_views_a_varying_if_or_loop_chose_is_refused(fn, be):
    args = (_x(3, 4, 4), np.arange(3) % 4 if fn is row_chosen_by_a_varying_loop
            else _x(3, seed=2) * 3, F(1) if "_uniform_" in fn.__name__ else _x(3, 2, seed=3))
    with pytest.raises(CompileError, match=r"store into an array that a (varying if "
                                           r"chose|loop carried): per example it lands in "
                                           r"[xyz], ") as e:
        count = fn.__code__.co_argcount
        varying = fn.__code__.co_varnames[:2 if "_uniform_" in fn.__name__ else count]
        hydra.compile(fn, varying=varying, backend=be)(*args[:count])
    assert "= " in e.value.loc.source_line() or "+=" in e.value.loc.source_line()


def test_store_into_a_chosen_row_message(be):
    x, c = _x(3, 3, 4), _x(3, seed=2)
    before = x.copy()
    with pytest.raises(CompileError) as e:
        hydra.compile(row_chosen_by_an_expression, varying=("x", "c"), backend=be)(x, c)
    assert np.array_equal(x, before)
    assert str(e.value).splitlines()[0].endswith(
        "a store into an array that a varying if chose: per example it lands in x, the "
        "caller's array, through the view of it each lane chose, where hydra joins the "
        "views into per-lane rows (a copy)")
    assert e.value.loc.source_line().strip() == "t[2] = 7.0"
    assert e.value.hint == ("store into x itself, at an index each lane computes as it "
                            "chose the view (x[i, j] = ... with i = 0 if c > 0 else 1, for "
                            "x[0] or x[1]), or under the condition that chose it")


def row_at_a_chosen_index(x, c):
    i = 0 if c > 0 else 1  # what the hint says to write
    x[i, 2] = 7.0
    return x


def row_chosen_uniformly(x, c):
    t = x[0] if c > 0 else x[1]
    t[2] = 7.0
    return x


def row_chosen_then_returned(x, c):
    y = x * 1
    t = y[0] if c > 0 else y[1]
    t[2] = 7.0  # nothing else sees y
    return t


def rows_chosen_in_a_loop_not_read_after(x, c):
    y = x * 1
    t = y[0]
    for k in range(1, 4):
        t = y[k] if c > k else t  # a copy of y's rows that only t sees
    t[2] = 7.0
    return t


def row_stored_in_a_uniform_loop(x, m):
    t = x[0]
    for k in range(m):
        t[1] += 1.0  # no join: t stays x's row on every lane
        if k > 0:
            t = x[k]
    return x


def row_stored_in_a_varying_loop(x, m):
    t = x[0]
    for _ in range(m):
        t[1] += 1.0  # t passed on unchanged: no select, x's row on every lane
    return x


def test_stores_into_views_that_stay_views_or_nothing_else_sees(be, n):
    check(row_at_a_chosen_index, ("x", "c"), (_x(n, 3, 4), _x(n, seed=2)), n, be)
    for c in (F(1), F(-1)):
        check(row_chosen_uniformly, ("x",), (_x(n, 3, 4), c), n, be)
    check(row_chosen_then_returned, ("x", "c"), (_x(n, 3, 4), _x(n, seed=2)), n, be)
    check(rows_chosen_in_a_loop_not_read_after, ("x", "c"),
          (_x(n, 4, 4), _x(n, seed=2) * 3), n, be)
    check(row_stored_in_a_uniform_loop, ("x",), (_x(n, 4, 4), 3), n, be)
    check(row_stored_in_a_varying_loop, ("x", "m"), (_x(n, 4, 4), np.arange(n) % 4), n, be)

def rows_at_private_places(W, x, i):
    W[i] = x  # i: a permutation of the lanes, so every place is one lane's
    return W


def columns_at_private_places(W, x, i):
    W.T[i] = x
    return W


def view_rows_at_private_places(W, x, i):
    v = W[1:]
    v[i, ::-1] = x
    return W


def reshape_rows_at_private_places(W, x, i):
    v = W.reshape(-1, 3)
    v[i] = x
    return W


@pytest.mark.parametrize("fn,shape", [
    (rows_at_private_places, lambda n: (n, 3)), (columns_at_private_places, lambda n: (3, n)),
    (view_rows_at_private_places, lambda n: (n + 1, 3)),
    (reshape_rows_at_private_places, lambda n: (3 * n,))], ids=lambda p: getattr(
        p, "__name__", ""))
def test_shared_arrays_written_at_lane_private_places(fn, shape, be, n):
    i = np.random.default_rng(10).permutation(n)
    check(fn, ("x", "i"), (np.zeros(shape(n), F), _x(n, 3), i), n, be)


def gathered_row_written(W, x, i):
    r = W[i]  # per example a view of the shared W (basic indexing)
    r[0] = x[0]
    return r


def lane_row_written(x, i):
    r = x[i]  # a view of the lane's x per example
    r[:] = x[i] * 3
    return x


def lane_row_chained(x, i):
    x[i][:] = x[i] * 3  # x[i, :] = ...: a store into x itself
    x[i][1] += 1.0
    return x


def shared_elements_chained(W, x, i):
    W[i][2] = x[2]  # W[i, 2] = ...
    W[i][::2] = x[:2]
    return W


def lane_row_updated(x, i):
    x[i] += 1.0  # a store into x itself: fine
    x[i, 0] *= 2.0
    return x


def test_store_through_a_gathered_row_is_refused(be):
    """hydra gathers W[i] at a varying i as a per-lane copy (SPEC section 8), so a store
    through it would silently miss W, where it lands per example: refused."""
    with pytest.raises(CompileError, match=r"store into W\[\.\.\.\] at a varying index.*"
                                           r"view.*shared array") as e:
        hydra.compile(gathered_row_written, varying=("x", "i"), backend=be)(
            _w(5, 3), _x(3, 3), np.array([0, 1, 1]))
    assert e.value.loc.line == gathered_row_written.__code__.co_firstlineno + 2
    with pytest.raises(CompileError, match=r"store into x\[\.\.\.\] at a varying index.*"
                                           r"the lane's array"):
        hydra.compile(lane_row_written, varying=("x", "i"), backend=be)(
            _x(3, 3, 2), np.array([0, 1, 1]))


def test_stores_at_a_varying_index_into_the_array_itself(be, n):
    rng = np.random.default_rng(6)
    for fn in (lane_row_updated, lane_row_chained):
        check(fn, ("x", "i"), (_x(n, 3, 2), rng.integers(0, 3, n)), n, be)
    W = np.zeros((n, 4), F)
    check(shared_elements_chained, ("x", "i"), (W, _x(n, 3), rng.permutation(n)), n, be)


def same_argument_twice(x, y):
    x[0] = y[1] + 1.0  # x and y are one array: y sees the store
    y[2] = x[0] * 2
    return y


def test_one_array_passed_twice(be, n):
    a = _x(n, 4)
    check(same_argument_twice, ("x", "y"), (a, a), n, be)


def shared_twice(W, V, x):
    W[0] = x[0]
    return V.sum()


def test_one_array_passed_as_two_written_shared_arguments_is_refused(be):
    W = _w(4)
    with pytest.raises(ValueError, match="'W' and 'V' share memory"):
        hydra.compile(shared_twice, varying=("x",), backend=be)(W, W[::-1], _x(3, 4))


# --- keywords that decide copies and layouts -------------------------------------------

def astype_copy_keyword(x):
    r = x.astype(np.float32, copy=False)  # x itself: the store lands in x
    r[0, 0] = 5.0
    q = x.astype(np.float64, copy=False)  # another dtype: a copy all the same
    q[0, 1] = 6.0
    s = x.astype(np.float32, copy=True)
    s[1, 1] = 7.0
    return x, q, s


def default_orders_and_axes(x):
    r = x.reshape(6, order="C")
    r[0] = 5.0
    c = x.copy(order="C")
    c[0, 0] = 1.0
    t = x.transpose(1, 0)
    t[0, 1] = 2.0
    u = np.transpose(x, (1, 0))
    u[2, 0] = 3.0
    v = np.reshape(x, (3, 2), order="C")
    v[2, 1] = 4.0
    return x, c


@pytest.mark.parametrize("fn", [astype_copy_keyword, default_orders_and_axes],
                         ids=lambda f: f.__name__)
def test_copy_and_order_keywords(fn, be, n):
    check(fn, ("x",), (_x(n, 2, 3),), n, be)


def fortran_reshape(x):
    return x.reshape(24, order="F")


def fortran_copy(x):
    return x.copy(order="F")


def transpose_some_axes(x):
    return x.transpose(0, 2, 1)


def np_transpose_some_axes(x):
    return np.transpose(x, axes=(1, 0, 2))


@pytest.mark.parametrize("fn,message", [
    (fortran_reshape, r"\.reshape\(\): only order='C' is supported here \(got 'F'\)"),
    (fortran_copy, r"\.copy\(\): only order='C' is supported here \(got 'F'\)"),
    (transpose_some_axes, r"transpose with axes \(0, 2, 1\) is not supported"),
    (np_transpose_some_axes, r"transpose with axes \(1, 0, 2\) is not supported")],
    ids=lambda p: getattr(p, "__name__", ""))
def test_orders_and_axes_hydra_does_not_follow_are_refused(fn, message):
    """They were ignored: x.transpose(0, 2, 1) reversed all axes, order='F' was C."""
    with pytest.raises(CompileError, match=message) as e:
        hydra.compile(fn, varying=("x",), backend="numpy")(_x(2, 2, 3, 4))
    assert e.value.loc.line == fn.__code__.co_firstlineno + 1
