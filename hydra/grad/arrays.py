"""The adjoint rules of per-lane array operations (SPEC sections 8 and 11), for the
registry's ``array`` records; same signature as ``hydra.grad.rules``.

Elementwise operations reuse the scalar rules: the ``Emitter``'s helpers emit ``array``
ops when an operand is an array, and the transformation sums an adjoint over the axes
NumPy broadcast (``unbroadcast``), so ``x * 2.0`` or ``W @ x + b`` with a uniform ``b``
need no rule of their own.  The others follow JAX's transpose rules: a reduction's
adjoint is broadcast back, ``a @ b``'s is a product with the other operand transposed
(``np.outer(dz, x)`` for a matrix times a vector), a reshape or transpose is undone.
``max``/``min`` reductions split the gradient equally among tied elements (as JAX).
"""

from __future__ import annotations

import numpy as np

from ..errors import CompileError
from ..types import ArrayType
from . import rules
from .emit import is_array


def shape_of(v):
    return v.type.shape if isinstance(v.type, ArrayType) else ()


def _axes(params, ndim: int) -> tuple[int, ...]:
    axis = params.get("axis")
    if axis is None:
        return tuple(range(ndim))
    axis = axis if isinstance(axis, tuple) else (axis,)
    return tuple(a % ndim for a in axis)


def spread_back(e, x, g, params):
    """``g`` (a reduction of ``x`` over ``params['axis']``) broadcast back to ``x``'s
    shape, as ``ones_like(x) * g`` with the reduced axes kept."""
    shape = shape_of(x)
    axes = _axes(params, len(shape))
    if isinstance(g.type, ArrayType) and not params.get("keepdims"):
        kept = tuple(1 if i in axes else n for i, n in enumerate(shape))
        g = e.arr("reshape", [g], {"shape": kept})
    return e.mul(e.arr("ones_like", [x], {"dtype": None}), g), axes


def sum_(e, op, args, out, g):
    return [spread_back(e, args[0], g, op.attrs["params"])[0]]


def mean(e, op, args, out, g):
    spread, axes = spread_back(e, args[0], g, op.attrs["params"])
    count = int(np.prod([shape_of(args[0])[a] for a in axes]))
    return [e.div(spread, float(count))]


def extremum(e, op, args, out, g):
    """``max``/``min`` along axes: the gradient split equally among the tied elements."""
    x = args[0]
    params = op.attrs["params"]
    top, _ = spread_back(e, x, out, params)
    hit = e.arr("astype", [e.cmp("eq", x, top)], {"dtype": x.type.dtype.name})
    count, _ = spread_back(e, x, e.arr("sum", [hit], {"axis": params.get("axis"),
                                                  "keepdims": False}), params)
    share, _ = spread_back(e, x, g, params)
    return [e.div(e.mul(hit, share), count)]


def matmul(e, op, args, out, g):
    a, b = args
    na, nb = len(shape_of(a)), len(shape_of(b))
    t = (lambda v: e.arr("transpose", [v]))
    if na == 1 and nb == 1:
        return [e.mul(g, b), e.mul(g, a)]
    if na == 2 and nb == 1:
        return [e.arr("outer", [g, b]), e.arr("matmul", [t(a), g])]
    if na == 1 and nb == 2:
        return [e.arr("matmul", [b, g]), e.arr("outer", [a, g])]
    if na == 2 and nb == 2:
        return [e.arr("matmul", [g, t(b)]), e.arr("matmul", [t(a), g])]
    return _batched_matmul(e, a, b, g)  # (np.dot of stacks: hydra.grad.morearrays.dot)


def _batched_matmul(e, a, b, g):
    """Stacks of matrices (NumPy broadcasts the leading axes): a's adjoint is
    ``g @ b^T`` and b's ``a^T @ g``, each matrix by matrix (an einsum over ``...``; the
    transformation sums the axes that were broadcast); a 1-d operand is a row (a) or a
    column (b) that the product dropped."""
    na, nb = len(shape_of(a)), len(shape_of(b))
    gs = shape_of(g)
    if na == 1:
        g = e.arr("reshape", [g], {"shape": gs[:-1] + (1, gs[-1])})
    elif nb == 1:
        g = e.arr("reshape", [g], {"shape": gs + (1,)})
    a2 = e.arr("reshape", [a], {"shape": (1,) + shape_of(a)}) if na == 1 else a
    b2 = e.arr("reshape", [b], {"shape": shape_of(b) + (1,)}) if nb == 1 else b
    da = e.arr("einsum", [g, b2], {"subscripts": "...ij,...kj->...ik"})
    db = e.arr("einsum", [a2, g], {"subscripts": "...ki,...kj->...ij"})
    if na == 1:  # the row's gradients, summed over the stack by the transformation
        da = e.arr("reshape", [da], {"shape": shape_of(da)[:-2] + shape_of(da)[-1:]})
    if nb == 1:
        db = e.arr("reshape", [db], {"shape": shape_of(db)[:-1]})
    return [da, db]


def outer(e, op, args, out, g):
    a, b = args
    if len(shape_of(a)) != 1 or len(shape_of(b)) != 1:
        raise CompileError("hydra.grad: the adjoint of np.outer is written for 1-d "
                           "operands yet", op.loc)
    return [e.arr("matmul", [g, b]), e.arr("matmul", [e.arr("transpose", [g]), a])]


def reshape(e, op, args, out, g):
    return [e.arr("reshape", [g], {"shape": shape_of(args[0])})]


def transpose(e, op, args, out, g):
    axes = op.attrs["params"].get("axes")
    if axes is None:
        return [e.arr("transpose", [g])]
    return [e.arr("transpose", [g], {"axes": tuple(int(i) for i in np.argsort(axes))})]


def astype(e, op, args, out, g):
    src = op.operands[0].type
    return [e.cast(g, src) if src.dtype.kind == "f" else None]


def identity(e, op, args, out, g):
    return [g]


def square(e, op, args, out, g):
    return [e.mul(g, e.mul(args[0], 2.0))]


def reciprocal(e, op, args, out, g):
    return [e.neg(e.mul(g, e.mul(out, out)))]


def where(e, op, args, out, g):
    c = args[0]
    return [None, e.select(c, g, 0.0), e.select(c, 0.0, g)]


#: the array fns only the adjoint rules emit (the layers' adjoints, defined in
#: hydra.batching; a scatter-add, a singular-value norm's gradient, in hydra.arraylib)
EMITTED = frozenset({"conv2d_grad_input", "conv2d_grad_weight", "max_pool2d_grad",
                     "max_pool2d_pick", "avg_pool2d_grad", "scatter_add", "svd_norm_grad"})
#: what ``hydra.grad.functional`` makes of a store (differentiable: its rule is below)
FUNCTIONAL = frozenset({"setitem"})


def index_int(e, i, n: int):
    """An index operand as int64, a negative one counted from the end (as NumPy)."""
    from ..types import BOOL, INT64
    i = e.cast(i, INT64)
    neg = e.v("lt", [i, e.const(0, INT64)], BOOL)
    return e.v("select", [neg, e.v("add", [i, e.const(n, INT64)], INT64), i], INT64)


def getitem(e, op, args, out, g):
    """``a[index]`` (ints, slices of any step, ``np.newaxis``, ``...``): the adjoint of
    a gather is a scatter, here undone axis by axis: an int place puts ``g`` at its
    position by a ``where`` against ``arange``, a slice pads ``g`` with zeros (a strided
    one spreads it first), a new axis is dropped."""
    a, ints = args[0], iter(args[1:])
    shape = shape_of(a)
    t = g
    axis = -1  # of a, and of t where the items before have been undone
    for item in _spelled(op.attrs["params"]["index"], len(shape)):
        here = shape_of(t)
        if item[0] == "none":  # a new axis of length 1 at this place: dropped
            t = e.arr("reshape", [t], {"shape": here[:axis + 1] + here[axis + 2:]})
            continue
        axis += 1
        n = shape[axis]
        if item[0] == "int":
            if not is_array(t):  # a number: as an array of one element
                one = e.arr("arange", [], {"start": 0, "stop": 1, "step": 1,
                                           "dtype": "int64"})
                t = e.mul(e.arr("astype", [one], {"dtype": t.type.name}), t)
            t = e.arr("reshape", [t], {"shape": here[:axis] + (1,) + here[axis:]})
            iota = e.arr("arange", [], {"start": 0, "stop": n, "step": 1, "dtype": "int64"})
            iota = e.arr("reshape", [iota], {"shape": tuple(
                n if j == axis else 1 for j in range(len(here) + 1))})
            t = e.select(e.arr("eq", [iota, index_int(e, next(ints), n)]), t, 0.0)
        elif item[0] == "slice" and item[3] in (None, 1):
            lo, hi, _ = slice(item[1], item[2]).indices(n)
            widths = [(0, 0)] * len(here)
            widths[axis] = (lo, n - max(hi, lo))
            t = e.arr("pad", [t], {"pad_width": tuple(widths)})
        else:
            t = _strided(e, t, axis, n, range(*slice(*item[1:]).indices(n)))
    return [t] + [None] * (len(args) - 1)


def _spelled(index, ndim: int):
    """The index items with ``...`` spelled as the full slices it stands for."""
    named = sum(1 for item in index if item[0] in ("int", "slice"))
    out = []
    for item in index:
        if item[0] == "ellipsis":
            out.extend([("slice", None, None, None)] * (ndim - named))
        else:
            out.append(item)
    return out


def _strided(e, t, axis: int, n: int, places: range):
    """``t`` (along ``axis``, the elements at ``places`` of n, a strided slice) put back
    at its places, zeros between: reversed where the step is negative, each element
    followed by step - 1 zeros (a pad of a new axis), then padded to n."""
    here = shape_of(t)
    if places.step < 0:
        t = e.arr("getitem", [t], {"index": (("slice", None, None, None),) * axis
                                   + (("slice", None, None, -1),)})
        places = places[::-1]
    m, k = len(places), places.step
    if m == 0:
        widths = [(0, 0)] * len(here)
        widths[axis] = (0, n)
        return e.arr("pad", [t], {"pad_width": tuple(widths)})
    t = e.arr("reshape", [t], {"shape": here[:axis] + (m, 1) + here[axis + 1:]})
    widths = [(0, 0)] * (len(here) + 1)
    widths[axis + 1] = (0, k - 1)
    t = e.arr("pad", [t], {"pad_width": tuple(widths)})
    t = e.arr("reshape", [t], {"shape": here[:axis] + (m * k,) + here[axis + 1:]})
    end = places[0] + (m - 1) * k + 1
    t = e.arr("getitem", [t], {"index": (("slice", None, None, None),) * axis
                               + (("slice", 0, end - places[0], None),)})
    widths = [(0, 0)] * len(here)
    widths[axis] = (places[0], n - end)
    return e.arr("pad", [t], {"pad_width": tuple(widths)})


def setitem(e, op, args, out, g):
    """A store ``a[index] = value`` as a value (``hydra.grad.functional``): the old
    array's adjoint is ``g`` with the place zeroed (its elements were overwritten), the
    value's is ``g`` at the place."""
    a, value, *ints = args
    params = {"index": op.attrs["params"]["index"]}
    zero = e.const(0.0, g.type.dtype)
    return [e.arr("setitem", [g, zero, *ints], params),
            e.arr("getitem", [g, *ints], params)] + [None] * len(ints)


def clip(e, op, args, out, g):
    """np.clip(x, lo, hi): the gradient passes to x inside [lo, hi], inclusive (as
    jnp.clip), to the bound that is taken elsewhere."""
    x, lo, hi = args
    below, above = e.cmp("lt", x, lo), e.cmp("gt", x, hi)
    return [e.select(below, 0.0, e.select(above, 0.0, g)), e.select(below, g, 0.0),
            e.select(above, e.select(below, 0.0, g), 0.0)]


def concatenate(e, op, args, out, g):
    """Each operand's part of ``g`` along the axis (a slice)."""
    axis = op.attrs["params"].get("axis", 0) % len(shape_of(out))
    parts, start = [], 0
    for v in args:
        n = shape_of(v)[axis]
        index = tuple(("slice", None, None, None) for _ in range(axis)) + (
            ("slice", start, start + n, None),)
        parts.append(e.arr("getitem", [g], {"index": index}))
        start += n
    return parts


def stack(e, op, args, out, g):
    """Operand k's part of ``g`` is ``g[..., k, ...]`` along the new axis."""
    axis = op.attrs["params"].get("axis", 0) % len(shape_of(out))
    parts = []
    for k, v in enumerate(args):
        index = tuple(("slice", None, None, None) for _ in range(axis)) + (
            ("slice", k, k + 1, None),)
        part = e.arr("getitem", [g], {"index": index})
        parts.append(e.arr("reshape", [part], {"shape": shape_of(v)}))
    return parts


def conv2d(e, op, args, out, g):
    """The images' adjoint is a transposed convolution, the weights' a correlation of the
    images with ``g``, the bias's ``g`` summed over the image."""
    x, w = args[0], args[1]
    p = op.attrs["params"]
    stride, padding = p.get("stride") or 1, p.get("padding") or 0
    height, width = shape_of(x)[-2:]
    kh, kw = shape_of(w)[-2:]
    grads = [e.arr("conv2d_grad_input", [g, w], {"height": height, "width": width,
                                                 "stride": stride, "padding": padding}),
             e.arr("conv2d_grad_weight", [x, g], {"kh": kh, "kw": kw, "stride": stride,
                                                  "padding": padding})]
    if len(args) == 3:
        grads.append(e.arr("sum", [g], {"axis": (-2, -1), "keepdims": False}))
    return grads


def max_pool2d(e, op, args, out, g):
    """Each window's gradient to its first maximum in row-major order (as PyTorch)."""
    p = op.attrs["params"]
    return [e.arr("max_pool2d_grad", [args[0], g], {"k": p["k"], "stride": p.get("stride")})]


def avg_pool2d(e, op, args, out, g):
    """Each window's gradient shared equally by its ``k*k`` pixels."""
    p = op.attrs["params"]
    height, width = shape_of(args[0])[-2:]
    return [e.arr("avg_pool2d_grad", [g], {"k": p["k"], "height": height, "width": width,
                                            "stride": p.get("stride")})]


def _math(name):
    return rules.MATH_RULES[name]


#: array fn -> rule
ARRAY_RULES = {
    "add": rules.add, "sub": rules.sub, "mul": rules.mul, "truediv": rules.truediv,
    "neg": rules.neg, "negative": rules.neg, "positive": identity, "copy": identity,
    "abs": rules.abs_, "fabs": rules.abs_, "maximum": rules.max_, "minimum": rules.min_,
    "fmax": rules.max_, "fmin": rules.min_, "power": rules.pow_, "pow": rules.pow_,
    "mod": rules.mod, "square": square, "reciprocal": reciprocal, "where": where,
    "astype": astype, "sum": sum_, "mean": mean, "max": extremum, "min": extremum,
    "matmul": matmul, "dot": matmul, "outer": outer, "reshape": reshape,
    "transpose": transpose, "getitem": getitem, "setitem": setitem, "clip": clip,
    "concatenate": concatenate, "stack": stack, "conv2d": conv2d, "max_pool2d": max_pool2d,
    "avg_pool2d": avg_pool2d,
    **{numpy: _math(name) for numpy, name in (
        ("sqrt", "sqrt"), ("exp", "exp"), ("exp2", "exp2"), ("expm1", "expm1"),
        ("log", "log"), ("log2", "log2"), ("log10", "log10"), ("log1p", "log1p"),
        ("sin", "sin"), ("cos", "cos"), ("tan", "tan"), ("arcsin", "asin"),
        ("arccos", "acos"), ("arctan", "atan"), ("sinh", "sinh"), ("cosh", "cosh"),
        ("tanh", "tanh"), ("arcsinh", "asinh"), ("arccosh", "acosh"),
        ("arctanh", "atanh"), ("cbrt", "cbrt"), ("arctan2", "atan2"), ("hypot", "hypot"),
        ("copysign", "copysign"), ("fmod", "fmod"))},
}
