"""Precomputed host steps of per-lane array ops (cpu backend): the per-call Python cost.

Takes: one op that runs on the host.
Guarantees: ``quick(op)`` is None or a ``Quick`` step whose ``run(env, lanes)`` puts
the same values into ``env`` as ``host.run_op`` would, for the common cheap ops of
per-lane array code (views by static slices and uniform indices, reshapes, transposes,
copies, constants, reductions, elementwise ops that do not fuse, ops on uniform arrays
only).  Everything the host rule re-derives on every call (the rule to use, index
tuples, shifted axes, the result dtype, lane-axis alignment) is worked out once here;
a uniform index out of bounds goes to the host rule itself, which raises the error
(or, on no active lane, reads index 0) exactly as before.  A digits-CNN step runs ~55
such ops, each ~3-10 us through the general rules.
"""

from __future__ import annotations

import numpy as np

from ...batching import ELEMENTWISE, FRESH, PER_LANE, REDUCTIONS, shift_axis, index_tuple
from ...ir.core import LANE_ARRAY_FNS, Op
from ...registry import monoid
from ...types import ArrayType, ScalarType
from ..host import Host, run_op
from . import background
from .nativeloops import compiled
from .lanesteps import lane_step
from .products import product_step
from .quick import Quick, converter


def quick(op: Op) -> Quick | None:
    """The precomputed step of ``op``, or None where the host rule runs it."""
    if op.opcode == "const" and not op.result.varying:
        value = op.result.type.dtype.type(op.attrs["value"])
        rid = op.result.id

        def const(env, lanes):
            env[rid] = value
        return Quick(op, const)
    if op.opcode == "intrinsic":
        return lane_step(op)
    if op.opcode != "array" or len(op.results) != 1:
        return None
    fn, params = op.attrs["fn"], op.attrs["params"]
    if fn in _LANE_REDUCTIONS and len(op.operands) == 1 and op.operands[0].varying \
            and isinstance(op.operands[0].type, ArrayType) \
            and isinstance(op.result.type, ArrayType):
        return _lane_reduce(op, op.result.type.dtype.dtype)
    if fn == "lanesum_outer" and all(v.varying for v in op.operands):
        return _lanesum_outer(op)
    if fn in ("matmul", "dot"):
        return product_step(op) or lane_step(op)
    if fn in LANE_ARRAY_FNS or fn not in PER_LANE:
        return None
    r = op.result
    rt = r.type
    if not isinstance(rt, (ArrayType, ScalarType)) or \
            isinstance(rt, ArrayType) and rt.shape is None:
        return None
    dtype = rt.dtype.dtype if isinstance(rt, ArrayType) else rt.dtype
    ids = [v.id for v in op.operands]
    vary = [bool(v.varying) for v in op.operands]
    rid = r.id
    make = None
    if fn == "getitem":
        make = _getitem(op)
    elif fn == "reshape" and vary == [True]:
        shape = tuple(rt.shape)

        def make(env, lanes):
            return env[ids[0]].reshape((lanes,) + shape)
    elif fn == "transpose" and vary == [True]:
        axes = (0,) + tuple(range(rt.ndim, 0, -1))

        def make(env, lanes):
            return env[ids[0]].transpose(axes)
    elif fn == "stack" and all(vary) and len(vary) <= 32 and isinstance(rt, ArrayType) \
            and all(isinstance(v.type, ArrayType) and v.type.dtype == rt.dtype
                    for v in op.operands):  # not a stack of numbers
        make = _stack(op, ids, dtype)
    elif fn == "copy" and vary == [True]:
        order = params.get("order", "C")  # a.copy(): C; np.copy(a): a's axis order

        def make(env, lanes):
            return np.array(env[ids[0]], copy=True, order=order)
    elif not any(vary) and r.varying and fn not in FRESH and isinstance(rt, ArrayType):
        pass  # an array the kernel writes (uniformity): the host rule copies it per lane
    elif not any(vary) and fn not in FRESH and op.mask is None:
        make = _uniform(fn, params, ids, dtype, bool(r.varying))
    elif fn == "sum" and vary == [True] and _float_sum(op):
        make = _einsum_sum(op, ids[0], params)
    elif fn in _SHORT_REDUCTIONS and vary == [True] and r.varying and _short(op):
        make = _short_reduce(op, ids[0], params)
    elif r.varying and fn in REDUCTIONS and fn not in ("argmax", "argmin") and vary == [True]:
        f = PER_LANE[fn]
        axis = shift_axis(params.get("axis"), op.operands[0].type.ndim)
        keep = params.get("keepdims", False)
        typed = converter(dtype)

        def make(env, lanes):
            return typed(f(env[ids[0]], axis=axis, keepdims=keep))
    elif r.varying and fn in ELEMENTWISE and op.mask is None and isinstance(rt, ArrayType):
        make = _elementwise(op, fn, params, ids, dtype)
    if make is None:
        return None

    def step(env, lanes):
        env[rid] = make(env, lanes)
    return Quick(op, step)


#: the cross-lane reductions of numbers' arrays (their ufuncs: the records' monoids)
_LANE_REDUCTIONS = frozenset({"lanesum", "laneprod", "lanemin", "lanemax"})


def _lane_reduce(op: Op, dtype):
    """``lanesum(g)`` and kin of a per-lane array with every lane active: the reduction
    over the lane axis of the array itself, where the host rule first copies the
    active rows (``x[mask]``): the same values in the same order, so the same bits."""
    ufunc = monoid(op.attrs["fn"]).ufunc
    xid, rid = op.operands[0].id, op.result.id
    mid = op.mask.id if op.mask is not None else None
    nd = op.operands[0].type.ndim + 1
    typed = converter(dtype)

    def step(env, lanes):
        x = env[xid]
        if (mid is None or env[mid].all()) and isinstance(x, np.ndarray) and x.ndim == nd \
                and x.flags.c_contiguous:
            env[rid] = typed(ufunc.reduce(x))
        else:
            run_op(Host(None, lanes), op, env)
    return Quick(op, step)


def _lanesum_outer(op: Op):
    """``lanesum(np.outer(d, x))`` with every lane active: ``D.T @ X`` on the arrays
    themselves (the host rule gathers the active rows first: the same contiguous
    values, so the same GEMM and the same bits)."""
    (did, xid), rid = (v.id for v in op.operands), op.result.id
    mid = op.mask.id if op.mask is not None else None
    dtype = op.result.type.dtype.dtype

    def step(env, lanes):
        d, x = env[did], env[xid]
        if (mid is None or env[mid].all()) and all(
                isinstance(a, np.ndarray) and a.ndim >= 1 and a.shape[0] == lanes
                and a.flags.c_contiguous for a in (d, x)):
            env[rid] = (d.reshape(lanes, -1).T @ x.reshape(lanes, -1)).astype(dtype, copy=False)
        else:
            run_op(Host(None, lanes), op, env)
    return Quick(op, step)


def _uniform(fn, params, ids, dtype, varying: bool):
    """An op on uniform values only: computed once per call, as ``batched`` does."""
    f = PER_LANE[fn]
    typed = converter(dtype)

    def make(env, lanes):
        out = typed(f(*[env[i] for i in ids], **params))
        return out if out.ndim or varying else out[()]
    return make


#: einsum sums only this many elements or more per row: below, NumPy's reduce adds in
#: plain order, as the per-example function does, and costs little
EINSUM_SUM_FROM = 32


def _float_sum(op: Op) -> bool:
    a = op.operands[0].type
    if not (isinstance(a, ArrayType) and a.dtype.name in ("float32", "float64")
            and op.result.type.dtype == a.dtype):
        return False
    axis = op.attrs["params"].get("axis")
    axes = range(a.ndim) if axis is None else axis if isinstance(axis, tuple) else (axis,)
    return int(np.prod([a.shape[k] for k in axes])) >= EINSUM_SUM_FROM


def _einsum_sum(op: Op, aid: int, params: dict):
    """A float sum over per-lane axes as one einsum: NumPy's reduce runs its inner loop
    once per output row (~40 us for [256, 8, 64] over the last axis, einsum ~9 us).  It
    adds in another order than the per-lane ``np.sum`` (pairwise): the summation-order
    tolerance of reductions (SPEC section 8)."""
    nd = op.operands[0].type.ndim
    axis = params.get("axis")
    axes = set(range(nd)) if axis is None else \
        {a % nd for a in (axis if isinstance(axis, tuple) else (axis,))}
    letters = "abcdefghijklmnopqrstuvwxy"[:nd]
    kept = "".join(c for k, c in enumerate(letters) if k not in axes)
    spec = f"z{letters}->z{kept}"
    keep = params.get("keepdims", False)
    shape = tuple(1 if k in axes else n for k, n in enumerate(op.operands[0].type.shape))

    def make(env, lanes):
        out = np.einsum(spec, env[aid])
        return out.reshape((lanes,) + shape) if keep else out
    return make


#: the reductions ``_short_reduce`` runs (by their records' monoids)
_SHORT_REDUCTIONS = frozenset({"sum", "max", "min"})


def _reduced(op: Op) -> tuple:
    """The per-lane axes ``op`` (a reduction) reduces, in order."""
    nd = op.operands[0].type.ndim
    axis = op.attrs["params"].get("axis")
    return tuple(range(nd)) if axis is None else \
        tuple(sorted({a % nd for a in (axis if isinstance(axis, tuple) else (axis,))}))


def _short(op: Op) -> bool:
    """A reduction of fewer than ``EINSUM_SUM_FROM`` (and at least one) elements per
    row, in the operand's own dtype, of numbers: one ``_short_reduce``."""
    a = op.operands[0].type
    if not (isinstance(a, ArrayType) and a.shape is not None and a.dtype.kind in "iuf"
            and op.result.type.dtype == a.dtype and a.ndim >= 1):
        return False
    return 1 <= int(np.prod([a.shape[k] for k in _reduced(op)])) < EINSUM_SUM_FROM


def _short_reduce(op: Op, aid: int, params: dict):
    """``sum``, ``max`` or ``min`` over short per-lane rows (``_short``) as one reduce
    over the leading axis of a copy with the reduced axes moved to the front: NumPy's
    reduce over a last axis runs its inner loop once per row (~10 us for the max of
    [256, 10]), over a leading axis it combines whole rows (~2 us).  Max and min give
    the same values (a NaN propagates either way); a sum adds in index order along the
    row, where the per-lane ``np.sum`` adds pairwise from 8 elements on: the
    summation-order tolerance of reductions (SPEC section 8)."""
    shape = tuple(op.operands[0].type.shape)
    axes = _reduced(op)
    kept = [d for d in range(len(shape)) if d not in axes]
    perm = tuple(1 + d for d in axes) + (0,) + tuple(1 + d for d in kept)
    rows = int(np.prod([shape[d] for d in axes]))
    out = tuple(1 if d in axes else n for d, n in enumerate(shape)) \
        if params.get("keepdims", False) else tuple(shape[d] for d in kept)
    ufunc = monoid(op.attrs["fn"]).ufunc

    def make(env, lanes):
        x = np.ascontiguousarray(env[aid].transpose(perm)).reshape(rows, -1)
        return ufunc.reduce(x, axis=0).reshape((lanes,) + out)
    return make


def _stack(op: Op, ids: list, dtype):
    """``np.stack`` of per-lane arrays as one generated copy loop (``fuse``), specialized
    on the inputs' per-lane strides: NumPy copies the rows of strided views (the nine
    shifted windows of an im2col) one short row at a time."""
    shape = tuple(op.operands[0].type.shape)
    k = len(ids)
    axis = op.attrs["params"].get("axis", 0) % (len(shape) + 1)
    out = tuple(op.result.type.shape)
    kernels: dict = {}

    def make(env, lanes):
        arrays = [env[i] for i in ids]
        if any(a is None or a.ndim != len(shape) + 1 for a in arrays):
            run_op(Host(None, lanes), op, env)  # a uniform array a select passed through
            return env[op.result.id]
        key = tuple(a.strides[1:] for a in arrays)
        kern = kernels.get(key)
        if kern is None:
            if len(kernels) >= 4 or any(x % dtype.itemsize for st in key for x in st):
                return np.stack(arrays, axis=axis + 1)
            per = [tuple(x // dtype.itemsize for x in st) for st in key]
            kern = kernels[key] = compiled(stack_source(shape, k, axis, per))
        result = np.empty((lanes,) + out, dtype)
        if not background.ready(kern, [lanes, result, *arrays]):  # being built
            return np.stack(arrays, axis=axis + 1)
        kern(lanes, result, *arrays)
        return result
    return make


def _elementwise(op: Op, fn, params, ids, dtype):
    """An elementwise op that does not fuse (exp, tanh, ...): its varying operands
    aligned to the result's rank once, as ``batching.elementwise_rule`` does."""
    f = PER_LANE[fn]
    typed = converter(dtype)
    rank = op.result.type.ndim
    pads = []
    for v in op.operands:
        if not v.varying:
            pads.append(None)
            continue
        s = tuple(v.type.shape) if isinstance(v.type, ArrayType) else ()
        pads.append((1,) * (rank - len(s)) + s)

    def make(env, lanes):
        return typed(f(*[env[i] if p is None else env[i].reshape((lanes,) + p)
                         for i, p in zip(ids, pads)], **params))
    return make


def int_sizes(spec, dims: tuple) -> list[int]:
    """The size of the axis each ``("int",)`` item of an index spec indexes."""
    sizes, axis = [], 0
    for item in spec:
        if item[0] == "int":
            sizes.append(dims[axis])
        if item[0] in ("int", "slice"):
            axis += 1
        elif item[0] == "ellipsis":
            axis += len(dims) - sum(1 for i in spec if i[0] in ("int", "slice"))
    return sizes


def _getitem(op: Op):
    """A view by static slices and uniform integer indices (bounds checked here; an
    index out of bounds goes to the host rule, which raises or reads index 0)."""
    array, *ints = op.operands
    if any(v.varying for v in ints) or not isinstance(array.type, ArrayType) \
            or array.type.shape is None or (op.result.varying and not array.varying):
        return None
    spec = op.attrs["params"]["index"]
    sizes = int_sizes(spec, tuple(array.type.shape))
    lead = (slice(None),) if array.varying else ()
    aid, iids = array.id, [v.id for v in ints]
    if not iids:
        idx = lead + index_tuple(spec, [])

        def view(env, lanes):
            return env[aid][idx]
        return view

    def make(env, lanes):
        got = []
        for i, n in zip(iids, sizes):
            k = int(env[i])
            if k < -n or k >= n:
                run_op(Host(None, lanes), op, env)  # its error (or index 0)
                return env[op.result.id]
            got.append(k + n if k < 0 else k)
        return env[aid][lead + index_tuple(spec, got)]
    return make


def precompute(steps: list) -> list:
    """``steps`` with each op that ``quick`` takes replaced by its ``Quick`` step."""
    return [(quick(s) or s) if isinstance(s, Op) else s for s in steps]


# --- np.stack of per-lane arrays: one native copy ---------------------------------------

def stack_source(shape: tuple, k: int, axis: int, strides: list[tuple]) -> str:
    """The loops of ``np.stack`` of ``k`` per-lane arrays of shape ``shape`` at ``axis``
    into a fresh C-ordered ``[N, *out]`` array; ``strides``: each input's per-lane
    element strides (constants: the kernel is specialized on them)."""
    out = shape[:axis] + (k,) + shape[axis:]
    cs = [int(np.prod(out[d + 1:], dtype=np.int64)) for d in range(len(out))]
    ostr = cs[:axis] + cs[axis + 1:]  # per input axis, its stride in the output
    lane = int(np.prod(out, dtype=np.int64))
    ins = [f"a{j}" for j in range(k)]
    lines = [f"def fused(n, o0, {', '.join(ins)}):"]
    lines += [f"    a{j}s = a{j}.strides[0] // a{j}.itemsize" for j in range(k)]
    lines.append("    for i0 in range(n):")
    # a short last axis is spelled out, all loads before all stores: the store of one
    # element between two loads (the loop's order) keeps LLVM from packing them (the
    # output might alias an input); the spelled-out run packs into vector moves
    short = bool(shape) and 0 < shape[-1] <= STACK_SPELLED
    for j in range(k):
        cur, ocur = f"i0 * a{j}s", f"i0 * {lane} + {j * cs[axis]}"
        ind = "        "
        for d, size in enumerate(shape[:-1] if short else shape):
            lines.append(f"{ind}for i{d + 1} in range({size}):")
            ind += "    "
            cur = f"{cur} + i{d + 1} * {strides[j][d]}"
            ocur = f"{ocur} + i{d + 1} * {ostr[d]}"
        if not short:
            lines.append(f"{ind}_st(o0, {ocur}, _ld(a{j}, {cur}))")
            continue
        last = len(shape) - 1
        lines += [f"{ind}v{q} = _ld(a{j}, {cur} + {q * strides[j][last]})"
                  for q in range(shape[-1])]
        lines += [f"{ind}_st(o0, {ocur} + {q * ostr[last]}, v{q})" for q in range(shape[-1])]
    return "\n".join(lines) + "\n"


#: ``np.stack`` spells out a last axis of at most this many elements (``stack_source``)
STACK_SPELLED = 16
