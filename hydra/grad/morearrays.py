"""The adjoint rules of the NumPy-coverage operations (``hydra.arraylib``) and of the
other array operations whose rules ``hydra.grad.arrays`` does not hold; same signature
as ``hydra.grad.rules``.  Every rule is written with existing array operations through
the ``Emitter``, so every backend that runs the forward operations runs the adjoints.

JAX's transpose rules are the model: a linear operation's adjoint is its transpose
(``cumsum``'s a reversed cumsum, ``roll``'s a roll back, ``tile``'s and ``repeat``'s a
sum over the copies, ``diff``'s a difference of shifted copies, a gather's (``take``,
``pad`` with reflect, ``diag`` of a matrix, ``interp``'s table) a scatter-add
(``scatter_add``, as ``np.add.at``: linear in the size), a scatter-add's a gather; the
layers' adjoints are bilinear and transposed the same way, so a gradient of a gradient
runs through ``conv2d`` and ``max_pool2d``).  Kinks, as SPEC section 11: a norm at 0 (and
``std`` of equal elements) has gradient 0; ``prod`` and ``cumprod`` are exact where
elements are 0 (no division by them).
"""

from __future__ import annotations

import math

import numpy as np

from ..types import BOOL, INT64, ArrayType
from . import contractions, emitted, rules
from .arrays import index_int, matmul, shape_of, spread_back
from .emit import is_array

_ALL = ("slice", None, None, None)


def _iota(e, n: int, shape=None):
    """0 .. n-1 (int64), reshaped to ``shape`` if given."""
    t = e.arr("arange", [], {"start": 0, "stop": n, "step": 1, "dtype": "int64"})
    return t if shape is None else e.arr("reshape", [t], {"shape": shape})


def _as(e, b, like):
    """A bool array as a float array of ``like``'s dtype."""
    dt = like.type.dtype if isinstance(like.type, ArrayType) else like.type
    return e.arr("astype", [b], {"dtype": dt.name})


def _flip(e, t, axis: int):
    index = (_ALL,) * axis + (("slice", None, None, -1),)
    return e.arr("getitem", [t], {"index": index})


def _slice(e, t, axis: int, lo, hi):
    return e.arr("getitem", [t], {"index": (_ALL,) * axis + (("slice", lo, hi, None),)})


def _pad(e, t, axis: int, lo: int, hi: int, value=0):
    widths = [(0, 0)] * len(shape_of(t))
    widths[axis] = (lo, hi)
    return e.arr("pad", [t], {"pad_width": tuple(widths), "mode": "constant",
                              "constant_values": value})


def _logic(e, fn: str, *xs):
    """logical_and/or/not of bool arrays or numbers."""
    if any(is_array(x) for x in xs):
        return e.arr(fn, list(xs))
    opcode = {"logical_and": "bitand", "logical_or": "bitor", "logical_not": "not"}[fn]
    return e.v(opcode, list(xs), BOOL)


def _scatter(e, g, idx, n: int, axis: int):
    """The adjoint of a gather along ``axis`` at the int indices ``idx`` (each in
    0..n-1; the gather replaced that axis by ``idx``'s axes): ``g`` added into n places
    (``scatter_add``, as ``np.add.at``: linear in the size, repeated indices add up)."""
    return e.arr("scatter_add", [g, idx], {"n": n, "axis": axis})


def dot(e, op, args, out, g):
    """np.dot: of 1-d and 2-d operands as ``@``; of stacks, a tensordot of a's last
    axis with b's second to last (its last where b is 1-d)."""
    na, nb = (len(shape_of(v)) for v in args)
    if max(na, nb) <= 2:
        return matmul(e, op, args, out, g)
    return contractions.tensordot_adjoints(e, op, args, g, ((na - 1,), (max(nb - 2, 0),)))


# --- reductions and statistics -------------------------------------------------------

def _count(x, axes) -> int:
    return int(np.prod([shape_of(x)[a] for a in axes]))


def var(e, op, args, out, g):
    """d var = 2 (x - mean) / (N - ddof); d std = (x - mean) / ((N - ddof) std), 0 where
    std is 0 (all elements equal: the norm of the deviations at 0, SPEC section 11)."""
    x, p = args[0], op.attrs["params"]
    gs, axes = spread_back(e, x, g, p)
    dev = e.sub(x, e.arr("mean", [x], {"axis": p.get("axis"), "keepdims": True}))
    dof = float(_count(x, axes) - p.get("ddof", 0))
    if op.attrs["fn"] == "var":
        return [e.mul(gs, e.div(e.mul(dev, 2.0), dof))]  # dof 0: inf or NaN, as NumPy
    s, _ = spread_back(e, x, out, p)
    at0 = e.cmp("eq", s, 0.0)
    return [e.where_zero(at0, e.div(e.div(e.mul(gs, dev), dof), e.select(at0, 1.0, s)))]


def norm(e, op, args, out, g):
    """The vector p-norms (2, 1, inf, -inf and any p > 0) and the Frobenius norm: their
    gradient is 0 where the norm is 0; ``max``/``min`` of ``|x|`` (inf, -inf) split it
    among tied elements.  The matrix norms 1, -1, inf, -inf too, and 2, -2 and 'nuc'
    (of the singular values) by an SVD."""
    x, p = args[0], op.attrs["params"]
    nd, o, axis = len(shape_of(x)), p.get("ord"), p.get("axis")
    matrix = isinstance(axis, tuple) and len(axis) == 2 or axis is None and nd == 2
    params = {"axis": axis, "keepdims": p.get("keepdims", False)}
    if matrix and o in (1, -1, math.inf, -math.inf):
        return [_matrix_norm(e, x, o, params, out, g)]
    if matrix and o in (2, -2, "nuc"):
        return [_svd_norm(e, x, o, params, out, g)]
    if matrix and o in (None, "fro") or o is None:
        o = 2
    gs, axes = spread_back(e, x, g, params)
    n, _ = spread_back(e, x, out, params)
    if o == 0:  # the count of nonzero elements: piecewise constant
        return [None]
    if o in (math.inf, -math.inf):
        mag = e.arr("abs", [x])
        hit = _as(e, e.cmp("eq", mag, n), x)
        count, _ = spread_back(e, x, e.arr("sum", [hit], {"axis": axes, "keepdims": True}),
                           {**params, "keepdims": True})
        return [e.div(e.mul(gs, rules.sign_times(e, x, hit)), count)]
    at0 = e.cmp("eq", n, 0.0)
    safe = e.select(at0, 1.0, n)
    if o == 2:
        d = e.div(x, safe)
    elif o == 1:
        d = rules.sign_times(e, x, e.arr("ones_like", [x], {"dtype": None}))
    else:
        base = e.div(e.arr("abs", [x]), safe)
        ratio = e.math("pow", base, e.const(float(o) - 1.0, base.type.dtype))
        d = rules.sign_times(e, x, ratio)
    return [e.where_zero(at0, e.mul(gs, d))]


def _matrix_norm(e, x, o, params, out, g):
    """ord 1 (-1): the largest (smallest) column sum of |x|; inf (-inf): row sum.  The
    gradient is sign(x) on the extreme columns (rows), split among tied ones."""
    rows, cols = (0, 1) if params["axis"] is None else tuple(
        a % len(shape_of(x)) for a in params["axis"])
    summed = rows if o in (1, -1) else cols
    sums = e.arr("sum", [e.arr("abs", [x])], {"axis": summed, "keepdims": True})
    kept = {**params, "keepdims": True}
    top = out
    if is_array(out) and not params["keepdims"]:
        top = e.arr("reshape", [out], {"shape": tuple(
            1 if i in (rows, cols) else n for i, n in enumerate(shape_of(x)))})
    hit = _as(e, e.cmp("eq", sums, top), x)
    count = e.arr("sum", [hit], {"axis": cols if summed == rows else rows, "keepdims": True})
    gs, _ = spread_back(e, x, g, params)
    share, _ = spread_back(e, x, e.div(hit, count), {**kept, "axis": summed})
    return e.mul(gs, rules.sign_times(e, x, share))


def _svd_norm(e, x, o, params, out, g):
    """ord 2 (-2): the largest (smallest) singular value s = u^T x v, whose gradient is
    u v^T; 'nuc', their sum: U V^T of the reduced SVD (JAX's rule: where singular values
    are 0 or tied, one of the subgradients); 0 where the norm is 0."""
    nd = len(shape_of(x))
    axis = params["axis"]
    rows, cols = (nd - 2, nd - 1) if axis is None else tuple(a % nd for a in axis)
    gs, _ = spread_back(e, x, g, params)
    n, _ = spread_back(e, x, out, params)
    d = e.arr("svd_norm_grad", [x], {"ord": o, "axis": (rows, cols)})
    return e.where_zero(e.cmp("eq", n, 0.0), e.mul(gs, d))


def prod(e, op, args, out, g):
    """d prod / d x_i = the product of the others: out / x_i where no element is 0; where
    one is, the product of the others at it and 0 elsewhere; 0 where two or more are."""
    x, p = args[0], op.attrs["params"]
    gs, axes = spread_back(e, x, g, p)
    zero = e.cmp("eq", x, 0.0)
    red = {"axis": axes, "keepdims": True}
    nz, _ = spread_back(e, x, e.arr("sum", [_as(e, zero, x)], red), {**p, "keepdims": True})
    others, _ = spread_back(e, x, e.arr("prod", [e.select(zero, 1.0, x)], red),
                        {**p, "keepdims": True})
    total, _ = spread_back(e, x, out, p)
    clean = e.div(total, e.select(zero, 1.0, x))
    one = e.select(zero, others, 0.0)
    d = e.select(e.cmp("eq", nz, 0.0), clean, e.select(e.cmp("eq", nz, 1.0), one, 0.0))
    return [e.mul(gs, d)]


# --- scans ---------------------------------------------------------------------------

def _rcumsum(e, t, axis: int):
    """Sums from each place to the end along ``axis`` (the transpose of cumsum)."""
    return _flip(e, e.arr("cumsum", [_flip(e, t, axis)], {"axis": axis}), axis)


def cumsum(e, op, args, out, g):
    x, axis = args[0], op.attrs["params"].get("axis")
    if axis is None:  # of the flattened array
        return [e.arr("reshape", [_rcumsum(e, g, 0)], {"shape": shape_of(x)})]
    return [_rcumsum(e, g, axis % len(shape_of(x)))]


def cumprod(e, op, args, out, g):
    """d out_j / d x_i = prod_{k <= j, k != i} x_k (j >= i), exact where elements are 0:
    before the first 0 (z) it is out_j / x_i; at z, the product before z times the
    products after z up to j; after z, 0."""
    x, axis = args[0], op.attrs["params"].get("axis")
    shape = shape_of(x)
    if axis is None:
        x = e.arr("reshape", [x], {"shape": (int(np.prod(shape)),)})
        out = e.arr("reshape", [out], {"shape": shape_of(x)})
        axis = 0
    axis %= len(shape_of(x))
    zero = e.cmp("eq", x, 0.0)
    zf = _as(e, zero, x)
    clean = e.cmp("eq", e.sub(e.arr("cumsum", [zf], {"axis": axis}), zf), 0.0)  # no 0 before
    first = _logic(e, "logical_and", clean, zero)
    before = _logic(e, "logical_and", clean, _logic(e, "logical_not", zero))
    a = e.div(_rcumsum(e, e.mul(g, out), axis), e.select(before, x, 1.0))
    n = shape_of(x)[axis]
    excl = _pad(e, _slice(e, out, axis, 0, n - 1), axis, 1, 0, 1)  # the product before
    after = e.arr("cumprod", [e.select(clean, 1.0, x)], {"axis": axis})
    tail = e.arr("sum", [e.select(before, 0.0, e.mul(g, after))], {"axis": axis,
                                                                     "keepdims": True})
    d = e.select(before, a, e.select(first, e.mul(excl, tail), 0.0))
    return [e.arr("reshape", [d], {"shape": shape}) if shape_of(d) != shape else d]


# --- rearrangements ------------------------------------------------------------------

def roll(e, op, args, out, g):
    p = op.attrs["params"]
    s = p["shift"]
    back = tuple(-k for k in s) if isinstance(s, tuple) else -s
    return [e.arr("roll", [g], {"shift": back, "axis": p.get("axis")})]


def diff(e, op, args, out, g):
    """Each difference ``a[i+1] - a[i]`` transposed: g shifted right minus g."""
    p = op.attrs["params"]
    axis = p.get("axis", -1) % len(shape_of(args[0]))
    t = g
    for _ in range(p.get("n", 1)):
        t = e.sub(_pad(e, t, axis, 1, 0), _pad(e, t, axis, 0, 1))
    return [t]


def tile(e, op, args, out, g):
    """The sum over the tiles: ``g`` as (reps, size) pairs of axes, the reps summed."""
    s, reps = shape_of(args[0]), op.attrs["params"]["reps"]
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    d = max(len(s), len(reps))
    s2, r2 = (1,) * (d - len(s)) + s, (1,) * (d - len(reps)) + reps
    pairs = tuple(x for r, n in zip(r2, s2) for x in (r, n))
    t = e.arr("reshape", [g], {"shape": pairs})
    t = e.arr("sum", [t], {"axis": tuple(range(0, 2 * d, 2)), "keepdims": False})
    return [e.arr("reshape", [t], {"shape": s})]


def repeat(e, op, args, out, g):
    """The sum over each element's copies: a reshape and a sum for a count, a
    scatter-add for counts per element."""
    x, p = args[0], op.attrs["params"]
    reps, axis = p["repeats"], p.get("axis")
    s = shape_of(x)
    if axis is None:
        s1, axis = (int(np.prod(s)),), 0
    else:
        axis %= len(s)
        s1 = s
    if isinstance(reps, tuple) and len(reps) == 1:
        reps = reps[0]
    n = s1[axis]
    if isinstance(reps, int):
        t = e.arr("reshape", [g], {"shape": s1[:axis] + (n, reps) + s1[axis + 1:]})
        t = e.arr("sum", [t], {"axis": axis + 1, "keepdims": False})
    else:
        ids = e.arr("repeat", [_iota(e, n)], {"repeats": tuple(reps), "axis": None})
        t = _scatter(e, g, ids, n, axis)
    return [e.arr("reshape", [t], {"shape": s}) if s1 != s else t]


def take(e, op, args, out, g):
    """A gather: its adjoint scatter-adds ``g`` to the indices (duplicates add up)."""
    a, idx = args
    axis, s = op.attrs["params"].get("axis"), shape_of(a)
    n = int(np.prod(s)) if axis is None else s[axis % len(s)]
    if is_array(idx):  # negative indices count from the end
        lo = e.cmp("lt", idx, e.const(0, INT64))
        idx = e.select(lo, e.add(idx, e.const(n, INT64)), idx)
    else:
        idx = index_int(e, idx, n)
    t = _scatter(e, g, idx, n, 0 if axis is None else axis % len(s))
    return [e.arr("reshape", [t], {"shape": s}) if axis is None else t, None]


def sort(e, op, args, out, g):
    """The sorted elements' adjoints go back where they came from: ``g`` gathered
    through the inverse of the (stable) argsort permutation (its argsort), along the
    axis as one flat ``take`` (linear in the size)."""
    x, axis = args[0], op.attrs["params"].get("axis", -1)
    s = shape_of(x)
    perm = e.arr("argsort", [x], {"axis": axis})
    inv = e.arr("argsort", [perm], {"axis": -1 if axis is None else axis})
    if axis is None or len(s) == 1:
        t = e.arr("take", [g, inv], {"axis": None})
        return [e.arr("reshape", [t], {"shape": s}) if len(s) != 1 else t]
    axis %= len(s)
    n, stride = s[axis], int(np.prod(s[axis + 1:]))
    size = int(np.prod(s))
    # the flat index of each place with its coordinate along the axis replaced by inv's
    along = _iota(e, n, tuple(n if i == axis else 1 for i in range(len(s))))
    base = e.sub(_iota(e, size, s), e.mul(along, e.const(stride, INT64)))
    flat = e.add(base, e.mul(inv, e.const(stride, INT64)))
    return [e.arr("take", [g, flat], {"axis": None})]


def trace(e, op, args, out, g):
    """g on the diagonal (at the offset), 0 elsewhere."""
    s, k = shape_of(args[0]), op.attrs["params"].get("offset", 0)
    rows = e.add(_iota(e, s[0], (s[0], 1)), e.const(k, INT64))
    eye = _as(e, e.cmp("eq", rows, _iota(e, s[1], (1, s[1]))), args[0])
    if len(s) > 2:
        eye = e.arr("reshape", [eye], {"shape": s[:2] + (1,) * (len(s) - 2)})
    return [e.mul(eye, g)]


def diag(e, op, args, out, g):
    """A vector's diagonal matrix: the adjoint is ``g``'s diagonal; a matrix's diagonal:
    ``g`` scatter-added to its flat places."""
    v, k = args[0], op.attrs["params"].get("k", 0)
    if len(shape_of(v)) == 1:
        return [e.arr("diag", [g], {"k": k})]
    r, c = shape_of(v)
    m = shape_of(out)[0]
    if m == 0:
        return [None]
    places = e.add(_iota(e, m), e.const(max(-k, 0) * c + max(k, 0), INT64))
    flat = e.add(e.mul(_iota(e, m), e.const(c, INT64)), places)
    return [e.arr("reshape", [_scatter(e, g, flat, r * c, 0)], {"shape": (r, c)})]


def pad(e, op, args, out, g):
    """Constant padding: the inner part of ``g``.  Edge and reflect: each axis's padded
    places are copies of inner ones (NumPy pads the axes in order), added back axis by
    axis in reverse: an edge's to the first or last element, a reflection's by a
    scatter-add."""
    p = op.attrs["params"]
    s, widths, mode = shape_of(args[0]), p["pad_width"], p.get("mode", "constant")
    t = g
    for axis in reversed(range(len(s))):
        lo, hi = widths[axis]
        if not lo and not hi:
            continue
        n = s[axis]
        if mode == "constant":
            t = _slice(e, t, axis, lo, lo + n)
        elif mode == "edge":  # the copies of the first and last elements
            left = e.arr("sum", [_slice(e, t, axis, 0, lo)], {"axis": axis, "keepdims": True})
            right = e.arr("sum", [_slice(e, t, axis, lo + n, None)], {"axis": axis,
                                                                     "keepdims": True})
            t = e.add(_slice(e, t, axis, lo, lo + n), e.add(_pad(e, left, axis, 0, n - 1),
                                                            _pad(e, right, axis, n - 1, 0)))
        else:
            src = e.arr("pad", [_iota(e, n)], {"pad_width": ((lo, hi),), "mode": mode})
            t = _scatter(e, t, src, n, axis)
    return [t]


# --- elementwise, makers -------------------------------------------------------------

def logaddexp(e, op, args, out, g):
    a, b = args
    ex = "exp" if op.attrs["fn"] == "logaddexp" else "exp2"
    return [e.mul(g, e.math(ex, e.sub(a, out))), e.mul(g, e.math(ex, e.sub(b, out)))]


def _scale(c: float):
    def rule(e, op, args, out, g):
        return [e.mul(g, c)]
    return rule


def full(e, op, args, out, g):
    """np.full(shape, v): v's adjoint is the sum of g (the transformation sums ``g``
    over the axes it was broadcast along)."""
    return [g]


def full_like(e, op, args, out, g):
    return [None, g]


def linspace(e, op, args, out, g):
    """out_k = start (1 - w_k) + stop w_k with w_k = k / (num - 1) (k / num without the
    endpoint; w = 0 for one element)."""
    p = op.attrs["params"]
    num = p["num"]
    div = num - 1 if p.get("endpoint", True) else num
    w = e.arr("astype", [_iota(e, num)], {"dtype": g.type.dtype.name})
    w = e.div(w, float(max(div, 1)))
    stop = e.arr("sum", [e.mul(g, w)], {"axis": None, "keepdims": False})
    whole = e.arr("sum", [g], {"axis": None, "keepdims": False})
    return [e.sub(whole, stop), stop]


def interp(e, op, args, out, g):
    """Inside the table, out = fp_i (1 - t) + fp_{i+1} t with t = (x - xp_i) / (xp_{i+1}
    - xp_i): x gets the slope, fp_i and fp_{i+1} their weights, xp_i and xp_{i+1} theirs;
    outside it, x gets 0 and the end of fp that is taken (unless left/right is given)
    gets g."""
    x, xp, fp = args
    p = op.attrs["params"]
    m = shape_of(xp)[0]
    if m < 2:
        return [e.zero(x.type, x) if is_array(x) else e.const(0.0, g.type), None,
                e.arr("ones_like", [fp], {"dtype": None}) if p.get("left") is None
                else None]
    i = e.sub(e.arr("searchsorted", [xp, x], {"side": "right"}), e.const(1, INT64))
    i = e.select(e.cmp("lt", i, e.const(0, INT64)), e.const(0, INT64), i)
    i = e.select(e.cmp("gt", i, e.const(m - 2, INT64)), e.const(m - 2, INT64), i)
    j = e.add(i, e.const(1, INT64))
    x0, x1 = (e.arr("take", [xp, k], {"axis": None}) for k in (i, j))
    f0, f1 = (e.arr("take", [fp, k], {"axis": None}) for k in (i, j))
    width = e.sub(x1, x0)
    slope = e.div(e.sub(f1, f0), width)
    t = e.div(e.sub(x, x0), width)
    below, above = e.cmp("lt", x, x0), e.cmp("gt", x, x1)
    inside = _logic(e, "logical_not", _logic(e, "logical_or", below, above))
    gin = e.select(inside, g, 0.0)
    dx = e.mul(gin, slope)
    first, last = e.cmp("eq", i, e.const(0, INT64)), e.cmp("eq", j, e.const(m - 1, INT64))
    g_left = e.select(_logic(e, "logical_and", below, first), g, 0.0) \
        if p.get("left") is None else None
    g_right = e.select(_logic(e, "logical_and", above, last), g, 0.0) \
        if p.get("right") is None else None
    dfp = e.add(_scatter(e, e.mul(gin, e.sub(1.0, t)), i, m, 0),
                _scatter(e, e.mul(gin, t), j, m, 0))
    ends = []
    if g_left is not None:
        ends.append(_scatter(e, g_left, e.mul(i, e.const(0, INT64)), m, 0))
    if g_right is not None:
        ends.append(_scatter(e, g_right, e.add(e.mul(i, e.const(0, INT64)),
                                               e.const(m - 1, INT64)), m, 0))
    for end in ends:
        dfp = e.add(dfp, end)
    dxp = e.add(_scatter(e, e.mul(e.mul(gin, slope), e.sub(t, 1.0)), i, m, 0),
                _scatter(e, e.neg(e.mul(e.mul(gin, slope), t)), j, m, 0))
    return [dx, dxp, dfp]


#: array fn -> rule
MORE_ARRAY_RULES = {
    "var": var, "std": var, "norm": norm, "prod": prod, "cumsum": cumsum,
    "cumprod": cumprod, "roll": roll, "diff": diff, "tile": tile, "repeat": repeat,
    "take": take, "sort": sort, "trace": trace, "diag": diag, "pad": pad,
    "logaddexp": logaddexp, "logaddexp2": logaddexp, "float_power": rules.pow_,
    **{name: _scale(math.pi / 180.0) for name in ("deg2rad", "radians")},
    **{name: _scale(180.0 / math.pi) for name in ("rad2deg", "degrees")},
    "full": full, "full_like": full_like, "linspace": linspace, "interp": interp,
    "einsum": contractions.einsum, "tensordot": contractions.tensordot,
    "dot": dot, **emitted.EMITTED_RULES,
}


# --- gamma and lgamma of numbers -----------------------------------------------------

def _digamma(e, x):
    """psi(x): for x < 0 by reflection, psi(x) = psi(1 - x) - pi / tan(pi x); psi(y)
    of y >= 0 by the recurrence up to y + 6 and the asymptotic series there (its error
    below 1e-11)."""
    neg = e.cmp("lt", x, 0.0)
    y = e.select(neg, e.sub(1.0, x), x)
    acc = e.const(0.0, x.type)
    for k in range(6):
        acc = e.add(acc, e.div(1.0, e.add(y, float(k))))
    z = e.add(y, 6.0)
    r = e.div(1.0, e.mul(z, z))
    poly = e.const(0.0, x.type)  # - sum of B_2n / (2n z^2n), n = 1..6, in r = 1 / z^2
    for c in (691.0 / 32760.0, -1.0 / 132.0, 1.0 / 240.0, -1.0 / 252.0, 1.0 / 120.0,
              -1.0 / 12.0):
        poly = e.add(e.mul(poly, r), c)
    psi = e.sub(e.add(e.sub(e.math("log", z), e.div(0.5, z)), e.mul(poly, r)), acc)
    cot = e.div(math.pi, e.math("tan", e.mul(x, math.pi)))
    return e.select(neg, e.sub(psi, cot), psi)


def _lgamma(e, op, args, out, g):
    """d lgamma = digamma."""
    return [e.mul(g, _digamma(e, args[0]))]


def _gamma(e, op, args, out, g):
    """d gamma = gamma digamma."""
    return [e.mul(g, e.mul(out, _digamma(e, args[0])))]


MORE_MATH_RULES = {"lgamma": _lgamma, "gamma": _gamma}
