"""Per-lane arrays (SPEC section 8): each whole-array operation's per-lane definition,
its shape rule and its batching rule.

A per-lane ("varying") array of per-lane shape S is stored lane axis first, ``[N, *S]``;
a uniform array is one array of shape S; a varying number is ``[N]``.  ``PER_LANE`` maps
an ``array`` op's ``fn`` to the NumPy code of one lane (``f(*operands, **params)``): it
is the semantics, the shape and dtype rule (``result_type`` runs it on placeholder
arrays at compile time, as ``jax.eval_shape`` does) and the fallback batching rule (a
loop over the lanes).  ``BATCH`` maps ``fn`` to its batching rule
``rule(f, args, vary, n, out, params)``, following JAX's ``batching.py``: it sees which
operands vary and computes the result for all N lanes in one NumPy/BLAS call.  An op
whose operands are all uniform is computed once, by ``f`` itself, and needs no rule.
The rule that matters most: ``U @ x`` with a uniform matrix and per-lane vectors is
``X @ U.T``, one GEMM over the lanes, never N matrix-vector products.  The functions of
``hydra.arraylib`` (cumsum, sort, take, pad, ...) bring their definitions and rules into
these tables.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from . import arraylib
from .windows import avg_pool2d, avg_pool2d_grad, conv2d, max_pool2d
# the layers' adjoints (hydra.grad's rules emit them; leading axes batch)
from .windowgrads import conv2d_grad_input, conv2d_grad_weight, max_pool2d_grad
from .arraylib import loop_rule  # noqa: F401  (batching.loop_rule: the fallback rule)
from .types import ArrayType, Type, scalar

# --- per-lane definitions -------------------------------------------------------------

UFUNCS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power,
    "lshift": np.left_shift, "rshift": np.right_shift, "bitand": np.bitwise_and,
    "bitor": np.bitwise_or, "bitxor": np.bitwise_xor, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal,
    "neg": np.negative, "invert": np.invert, "not": np.logical_not,
    "maximum": np.maximum, "minimum": np.minimum, "where": np.where, "clip": np.clip,
}
#: NumPy math functions hydra takes on arrays, elementwise
MATH_UFUNCS = ("tanh", "exp", "log", "sqrt", "abs", "absolute", "sin", "cos", "tan", "arcsin",
               "arccos", "arctan", "sinh", "cosh", "arcsinh", "arccosh", "arctanh", "exp2",
               "expm1", "log1p", "log2", "log10", "floor", "ceil", "trunc", "rint", "square",
               "sign", "isnan", "isinf", "isfinite", "logical_not", "negative", "reciprocal",
               "arctan2", "hypot", "power", "fmax", "fmin", "logaddexp", "logical_and",
               "logical_or", "logical_xor", "copysign", "cbrt", "fabs", "fmod", "positive",
               "deg2rad", "rad2deg", "degrees", "radians", "signbit", "logaddexp2",
               "nextafter", "spacing", "heaviside", "float_power", "gcd", "lcm")
UFUNCS.update({name: getattr(np, name) for name in MATH_UFUNCS})
ELEMENTWISE = frozenset({*UFUNCS, "astype"})
REDUCTIONS = frozenset({"sum", "max", "min", "mean", "prod", "argmax", "argmin", "any", "all"})
#: results that are a lane's own new array even from uniform operands (writes stay private)
FRESH = frozenset({"zeros_like", "ones_like", "full_like", "empty_like", "arange", "copy",
                   "full", "setitem", *arraylib.FRESH})


def lane_copies(value, n: int) -> np.ndarray:
    """``n`` copies of ``value``, lane axis first, each laid out in memory as ``value``
    is: NumPy's results keep their operands' axis order (``W.T * 2`` and
    ``np.zeros_like(W.T)`` are Fortran-ordered), and whether a reshape of a lane's copy
    is a view, as per example, depends on it."""
    value = np.asarray(value)
    one = np.empty_like(value)  # order K: value's axis order, dense
    rows = np.empty(n * one.size, one.dtype)
    out = np.lib.stride_tricks.as_strided(rows, (n,) + one.shape,
                                          (one.size * one.itemsize,) + one.strides)
    out[...] = value
    return out


def index_tuple(spec, ints) -> tuple:
    """The index of a static spec (``("int",)``, ``("slice", a, b, c)``, ``("none",)``,
    ``("ellipsis",)``) with its ``("int",)`` places taken from ``ints`` in order."""
    ints = iter(ints)
    out = []
    for item in spec:
        kind = item[0]
        out.append(next(ints) if kind == "int" else slice(*item[1:]) if kind == "slice"
                   else None if kind == "none" else Ellipsis)
    return tuple(out)


def int_axes(spec, ndim: int) -> list[int]:
    """The axis (of an array of ``ndim`` axes) that each ``("int",)`` item of a static
    index spec indexes."""
    axes, axis = [], 0
    for item in spec:
        if item[0] == "int":
            axes.append(axis)
        if item[0] in ("int", "slice"):
            axis += 1
        elif item[0] == "ellipsis":  # the axes no other index item names
            axis += ndim - sum(1 for i in spec if i[0] in ("int", "slice"))
    return axes


def setitem(a, value, *ints, index):
    """A copy of ``a`` with ``a[index] = value`` (hydra.grad's functional form of a
    store into a lane's own array)."""
    out = np.array(a, copy=True)
    out[index_tuple(index, ints)] = value
    return out


def _reduce(name):
    fn = getattr(np, name)

    def reduce(a, axis=None, keepdims=False):
        return fn(a, axis=axis, keepdims=keepdims)
    return reduce


PER_LANE: dict[str, Callable] = {
    **UFUNCS,
    **{name: _reduce(name) for name in REDUCTIONS},
    "astype": lambda a, dtype: np.asarray(a).astype(dtype),
    "matmul": np.matmul, "dot": np.dot, "outer": np.outer,
    "transpose": lambda a: np.transpose(a),
    "reshape": lambda a, shape: np.reshape(a, shape),
    # a.copy() is C-ordered; np.copy(a) and np.array(a) keep a's axis order (order="K")
    "copy": lambda a, order="C": np.array(a, copy=True, order=order),
    "getitem": lambda a, *ints, index: a[index_tuple(index, ints)],
    "concatenate": lambda *arrays, axis=0: np.concatenate(arrays, axis=axis),
    "stack": lambda *arrays, axis=0: np.stack(arrays, axis=axis),
    "zeros_like": lambda a, dtype=None: np.zeros_like(a, dtype=dtype),
    "ones_like": lambda a, dtype=None: np.ones_like(a, dtype=dtype),
    "empty_like": lambda a, dtype=None: np.zeros_like(a, dtype=dtype),
    "full_like": lambda a, v, dtype=None: np.full_like(a, v, dtype=dtype),
    "arange": lambda start, stop, step, dtype: np.arange(start, stop, step, dtype=dtype),
    "full": lambda v, shape, dtype: np.full(shape, v, dtype=dtype),
    "einsum": lambda *ops, subscripts: np.einsum(subscripts, *ops),
    "tensordot": lambda a, b, axes=2: np.tensordot(a, b, axes),
    "conv2d": conv2d, "max_pool2d": max_pool2d, "conv2d_grad_input": conv2d_grad_input,
    "conv2d_grad_weight": conv2d_grad_weight, "max_pool2d_grad": max_pool2d_grad,
    "avg_pool2d": avg_pool2d, "avg_pool2d_grad": avg_pool2d_grad, "setitem": setitem,
    **arraylib.PER_LANE,
}

# --- the shape rule ---------------------------------------------------------------------


def placeholder(t: Type, weak: bool):
    """A value of type ``t`` for running a per-lane definition at compile time."""
    if isinstance(t, ArrayType):
        return np.ones(t.shape, t.dtype.dtype)
    if weak and t.weak:
        return {"b": True, "i": 1, "f": 1.0}[t.kind]
    return t.dtype.type(1)


def result_type(fn: str, types: list[Type], params: dict) -> Type:
    """The type of ``fn``'s result: NumPy's own rules (shapes, broadcasting, NEP 50
    promotion) applied to placeholders.  NumPy's errors propagate to the caller."""
    args = [placeholder(t, True) for t in types]
    if fn in ("getitem", "setitem"):  # index 0 fits every axis that is not empty
        keep = 1 if fn == "getitem" else 2
        args = args[:keep] + [np.int64(0) for _ in args[keep:]]
    with np.errstate(all="ignore"):
        out = PER_LANE[fn](*args, **params)
    out = np.asarray(out) if not isinstance(out, np.generic) else out
    dt = scalar(out.dtype)
    if isinstance(out, np.generic):
        return dt
    return ArrayType(dt, out.ndim, tuple(out.shape))


# --- batching rules -------------------------------------------------------------------

def _align(a, r: int, n: int):
    """A varying operand ``[N, *s]`` as ``[N, 1.., *s]`` of rank 1 + r, so that NumPy's
    right-aligned broadcasting against uniform operands works per lane."""
    a = np.asarray(a)
    return a.reshape((n,) + (1,) * (r - (a.ndim - 1)) + a.shape[1:])


def elementwise_rule(f, args, vary, n, out, params):
    r = out.ndim if isinstance(out, ArrayType) else 0
    r = max([r] + [np.ndim(a) - 1 for a, v in zip(args, vary) if v])
    return f(*[_align(a, r, n) if v else a for a, v in zip(args, vary)], **params)


def shift_axis(axis, nd: int):
    """A per-lane axis (an int, a tuple, or None: all ``nd``) as an axis of ``[N, *S]``."""
    if axis is None:
        return tuple(range(1, nd + 1))
    if isinstance(axis, tuple):
        return tuple(a + 1 if a >= 0 else a for a in axis)
    return axis + 1 if axis >= 0 else axis


def reduction_rule(f, args, vary, n, out, params):
    (a,) = args
    nd = a.ndim - 1
    axis = params.get("axis")
    keep = params.get("keepdims", False)
    if f is PER_LANE["argmax"] or f is PER_LANE["argmin"]:
        if axis is None:
            if keep:
                return loop_rule(f, args, vary, n, out, params)
            return f(a.reshape(n, -1), axis=1)
    return f(a, axis=shift_axis(axis, nd), keepdims=keep)


def matmul_rule(f, args, vary, n, out, params):
    a, b = args
    va, vb = vary
    da, db = np.ndim(a) - va, np.ndim(b) - vb
    if da == 0 or db == 0:
        return elementwise_rule(np.multiply, args, vary, n, out, {})
    if va != vb and (db if va else da) > 2 or f is PER_LANE["dot"] and db > 2:
        # a uniform operand with batch axes, which the lane axis would misalign, and
        # np.dot of a stack of matrices (not matmul's broadcast): one lane at a time
        return loop_rule(f, args, vary, n, out, params)
    got = lane_product(np, a, b, va, vb, da, db)
    return got if got is not None else loop_rule(f, args, vary, n, out, params)


def one_gemm(va: bool, vb: bool, da: int, db: int) -> bool:
    """Is ``lane_product`` of these operands one product with the lanes as its rows:
    per-lane vectors @ a uniform matrix (or vector), a uniform matrix (or vector) @
    per-lane vectors (``X @ U.T``)?"""
    return va != vb and (da if va else db) == 1 and (db if va else da) in (1, 2)


def lane_product(xp, a, b, va: bool, vb: bool, da: int, db: int):
    """``a @ b`` of per-lane operands (``va``/``vb``: varying; ``da``/``db``: a lane's
    ndim, neither 0) as one product over the lanes in the array namespace ``xp``
    (written once for NumPy and CuPy), or None where it is not one."""
    if va and not vb:
        return xp.matmul(a, b)  # [N, k] @ [k, p], [N, m, k] @ [k, p]: lanes are rows
    if vb and not va:
        if db == 1:
            return xp.matmul(b, a.T) if da == 2 else xp.matmul(b, a)  # one GEMM: X @ U.T
        if da <= 2 and db == 2:
            return xp.matmul(a, b)
    if va and vb and da <= 2 and db <= 2:
        if da == 1 and db == 1:
            return xp.einsum("nk,nk->n", a, b)
        if da == 2 and db == 1:
            return xp.matmul(a, b[:, :, None])[:, :, 0]
        if da == 1 and db == 2:
            return xp.matmul(a[:, None, :], b)[:, 0, :]
        return xp.matmul(a, b)
    return None


def outer_rule(f, args, vary, n, out, params):
    a, b = (x.reshape(n, -1) if v else np.ravel(x) for x, v in zip(args, vary))
    a = a[:, :, None] if vary[0] else a[None, :, None]
    b = b[:, None, :] if vary[1] else b[None, None, :]
    return a * b


def transpose_rule(f, args, vary, n, out, params):
    (a,) = args
    nd = a.ndim - 1
    return np.transpose(a, (0,) + tuple(range(nd, 0, -1)))


def reshape_rule(f, args, vary, n, out, params):
    return np.reshape(args[0], (n,) + out.shape)


def join_rule(f, args, vary, n, out, params):
    arrays = [a if v else np.broadcast_to(a, (n,) + np.shape(a)) for a, v in zip(args, vary)]
    if params.get("axis", 0) is None:  # np.concatenate(..., axis=None): each lane's flattened
        arrays, axis = [a.reshape(n, -1) for a in arrays], 1
    else:
        axis = shift_axis(params.get("axis", 0), out.ndim)
    return (np.concatenate if f is PER_LANE["concatenate"] else np.stack)(arrays, axis=axis)


def leading_axes(batches=lambda vary: True):
    """The rule of a function that takes the lane axis as a leading axis of its operands
    where ``batches(vary)`` (``hydra.windows``: x ``[N, C, H, W]``, one im2col and
    batched GEMMs), else a loop over the lanes."""
    def rule(f, args, vary, n, out, params):
        if batches(vary):
            return f(*args, **params)
        return loop_rule(f, args, vary, n, out, params)
    return rule


def einsum_rule(f, args, vary, n, out, params):
    """One einsum for all lanes: a fresh index letter for the lane axis of each varying
    operand, first in the output."""
    spec = params["subscripts"].replace(" ", "")
    ins, _, result = spec.partition("->")
    ins = ins.split(",")
    if not _:  # NumPy's implicit output: the broadcast axes, then the unsummed letters
        letters = "".join(ins).replace(".", "")
        result = ("..." if "..." in spec else "") + \
            "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    lane = next(c for c in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA"
                if c not in spec)
    ins = [lane + s if v else s for s, v in zip(ins, vary)]
    return np.einsum(f"{','.join(ins)}->{lane}{result}", *args)


def tensordot_rule(f, args, vary, n, out, params):
    a, b = args
    axes = params.get("axes", 2)
    if vary[0] and vary[1]:
        return loop_rule(f, args, vary, n, out, params)
    if isinstance(axes, int):
        axes = (tuple(range(np.ndim(a) - vary[0] - axes, np.ndim(a) - vary[0])),
                tuple(range(axes)))
    axes = tuple((x,) if isinstance(x, int) else tuple(x) for x in axes)
    shift = [shift_axis(ax, None) if v else ax for ax, v in zip(axes, vary)]
    res = np.tensordot(a, b, (shift[0], shift[1]))
    if vary[1]:  # the lane axis sits after a's free axes: move it to the front
        res = np.moveaxis(res, np.ndim(a) - len(axes[0]), 0)
    return res


BATCH: dict[str, Callable] = {
    **{name: elementwise_rule for name in ELEMENTWISE},
    **{name: reduction_rule for name in REDUCTIONS},
    "matmul": matmul_rule, "dot": matmul_rule, "outer": outer_rule,
    "transpose": transpose_rule, "reshape": reshape_rule,
    "copy": lambda f, args, vary, n, out, params: np.array(
        args[0], copy=True, order=params.get("order", "C")),
    "concatenate": join_rule, "stack": join_rule,
    **dict.fromkeys(("max_pool2d", "avg_pool2d", "avg_pool2d_grad", "conv2d_grad_weight"),
                    leading_axes()),
    # lane by lane: a per-lane filter or bias (and the input's gradient through a per-lane
    # filter), the pooling gradient of a uniform image
    "conv2d": leading_axes(lambda vary: not any(vary[1:])),
    "conv2d_grad_input": leading_axes(lambda vary: not vary[1]),
    "max_pool2d_grad": leading_axes(lambda vary: vary[0]),
    "einsum": einsum_rule, "tensordot": tensordot_rule, **arraylib.BATCH,
    "full": lambda f, args, vary, n, out, params: np.broadcast_to(
        np.asarray(args[0]).reshape((n,) + (1,) * len(out.shape)), (n,) + out.shape).copy(),
    # like a per-lane array (its only operand, varying here): the batched array's like
    # (an adjoint spreads a number with ones_like: once per lane in Python was 1 ms)
    **dict.fromkeys(("zeros_like", "ones_like", "empty_like"), leading_axes()),
}


def batched(fn: str, args: list, vary: list[bool], n: int, out: Type, params: dict):
    """``fn`` over all ``n`` lanes: its result as a varying value (``[N, *S]``) when any
    operand varies or the op makes fresh arrays, else as one uniform value."""
    f = PER_LANE[fn]
    if not any(vary):
        value = f(*args, **params)
        if fn in FRESH:
            value = lane_copies(value, n)
        return _typed(value, out)
    return _typed(BATCH.get(fn, loop_rule)(f, args, vary, n, out, params), out)


def _typed(value, out: Type):
    dtype = out.dtype.dtype if isinstance(out, ArrayType) else out.dtype
    value = np.asarray(value)
    return value if value.dtype == dtype else value.astype(dtype)
