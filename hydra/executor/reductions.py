"""Precomputed steps of reductions: across lanes (``lanesum`` and kin of per-lane
numbers and arrays, ``lanesum(np.outer(d, x))``) and over per-lane axes (``np.sum``,
``max``, ``min`` of per-lane arrays).

Takes: one op that runs on the host (``opsteps.quick`` asks here).
Guarantees: each step puts the value ``rules.run_op`` would into ``env``: across lanes
by the same NumPy call on the same values in the same order (the same bits), where the
rule first broadcasts, copies the active rows or builds an error callback (~10 us of
the digits CNN's step for a 1 us reduction); over per-lane axes with one ``einsum`` or
one reduce over a leading axis, within the summation-order tolerance of SPEC section 8
for float sums.  A reduction over no active lane, a mask that is not all true, or an
operand of another layout than the IR says goes to ``host.run_op`` (its error, or the
rule's values).
"""

from __future__ import annotations

import numpy as np

from ..intrinsics import INTRINSICS
from ..ir.core import Op
from ..registry import monoid
from ..types import ArrayType, ScalarType
from .steps import Quick, converter

def reduction_step(op: Op) -> Quick | None:
    """The precomputed step of a reduction ``op``, or None."""
    if op.opcode == "intrinsic":
        return _lane_reduction(op)
    fn = op.attrs["fn"]
    if fn in _LANE_REDUCTIONS and len(op.operands) == 1 and op.operands[0].varying \
            and isinstance(op.operands[0].type, ArrayType) \
            and isinstance(op.result.type, ArrayType):
        return _lane_reduce(op, op.result.type.dtype.dtype)
    if fn == "lanesum_outer" and all(v.varying for v in op.operands):
        return _lanesum_outer(op)
    return None


def axis_reduction(op: Op):
    """The ``make(host, env)`` of a reduction over per-lane axes that ``einsum`` or one
    leading-axis reduce computes faster than the rule, or None."""
    fn, a = op.attrs["fn"], op.operands[0].type
    if not (isinstance(a, ArrayType) and a.shape is not None
            and op.result.type.dtype == a.dtype):
        return None
    size = int(np.prod([a.shape[k] for k in _reduced(op)]))
    if fn == "sum" and a.dtype.name in ("float32", "float64") and size >= EINSUM_SUM_FROM:
        return _einsum_sum(op)
    # fewer than EINSUM_SUM_FROM (and at least one) numbers per row: one reduce
    if fn in _SHORT_REDUCTIONS and op.result.varying and a.dtype.kind in "iuf" \
            and a.ndim >= 1 and 1 <= size < EINSUM_SUM_FROM:
        return _short_reduce(op)
    return None


def _lane_reduction(op: Op) -> Quick | None:
    name = op.attrs.get("name")  # an intrinsic reducing one number's active lanes (monoid)
    if name not in INTRINSICS or monoid(name) is None or len(op.operands) != 1 \
            or len(op.results) != 1 or op.result.varying:
        return None
    (x,) = op.operands
    if not (x.varying and isinstance(x.type, ScalarType)):
        return None
    ref = INTRINSICS[name].reference
    xid, rid = x.id, op.result.id
    src, dtype = x.type.dtype, op.result.type.dtype
    mid = op.mask.id if op.mask is not None else None
    masks: dict[int, np.ndarray] = {}

    def step(host, env):
        lanes = host.lanes
        a = env[xid]
        if type(a) is np.ndarray and a.shape == (lanes,) and a.dtype == src:
            mask = env[mid] if mid is not None else masks.get(lanes)
            if mask is None:
                mask = masks[lanes] = np.ones(lanes, dtype=bool)
            try:
                env[rid] = np.asarray(ref([a], mask, lanes, _fail)).astype(dtype)[()]
                return
            except _NoLanes:
                pass
        host.run_op(op, env)
    return Quick(op, step)


class _NoLanes(Exception):
    """A reduction over no active lane: the host rule raises its error."""


def _fail(kind, message, lane):
    raise _NoLanes


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

    def step(host, env):
        x = env[xid]
        if (mid is None or env[mid].all()) and isinstance(x, np.ndarray) and x.ndim == nd \
                and x.flags.c_contiguous:
            env[rid] = typed(ufunc.reduce(x))
        else:
            host.run_op(op, env)
    return Quick(op, step)


def _lanesum_outer(op: Op):
    """``lanesum(np.outer(d, x))`` with every lane active: ``D.T @ X`` on the arrays
    themselves (the host rule gathers the active rows first: the same contiguous
    values, so the same GEMM and the same bits)."""
    (did, xid), rid = (v.id for v in op.operands), op.result.id
    mid = op.mask.id if op.mask is not None else None
    dtype = op.result.type.dtype.dtype

    def step(host, env):
        lanes = host.lanes
        d, x = env[did], env[xid]
        if (mid is None or env[mid].all()) and all(
                isinstance(a, np.ndarray) and a.ndim >= 1 and a.shape[0] == lanes
                and a.flags.c_contiguous for a in (d, x)):
            env[rid] = (d.reshape(lanes, -1).T @ x.reshape(lanes, -1)).astype(dtype, copy=False)
        else:
            host.run_op(op, env)
    return Quick(op, step)


#: einsum sums only this many elements or more per row: below, NumPy's reduce adds in
#: plain order, as the per-example function does, and costs little
EINSUM_SUM_FROM = 32


def _einsum_sum(op: Op):
    """A float sum over per-lane axes as one einsum: NumPy's reduce runs its inner loop
    once per output row (~40 us for [256, 8, 64] over the last axis, einsum ~9 us).  It
    adds in another order than the per-lane ``np.sum`` (pairwise): the summation-order
    tolerance of reductions (SPEC section 8)."""
    axes, aid = _reduced(op), op.operands[0].id
    letters = "abcdefghijklmnopqrstuvwxy"[:op.operands[0].type.ndim]
    kept = "".join(c for k, c in enumerate(letters) if k not in axes)
    spec = f"z{letters}->z{kept}"
    keep = op.attrs["params"].get("keepdims", False)
    shape = tuple(1 if k in axes else n for k, n in enumerate(op.operands[0].type.shape))

    def make(host, env):
        lanes = host.lanes
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


def _short_reduce(op: Op):
    """``sum``, ``max`` or ``min`` over short per-lane rows as one reduce
    over the leading axis of a copy with the reduced axes moved to the front: NumPy's
    reduce over a last axis runs its inner loop once per row (~10 us for the max of
    [256, 10]), over a leading axis it combines whole rows (~2 us).  Max and min give
    the same values (a NaN propagates either way); a sum adds in index order along the
    row, where the per-lane ``np.sum`` adds pairwise from 8 elements on: the
    summation-order tolerance of reductions (SPEC section 8)."""
    shape, aid = tuple(op.operands[0].type.shape), op.operands[0].id
    axes = _reduced(op)
    kept = [d for d in range(len(shape)) if d not in axes]
    perm = tuple(1 + d for d in axes) + (0,) + tuple(1 + d for d in kept)
    rows = int(np.prod([shape[d] for d in axes]))
    out = tuple(1 if d in axes else n for d, n in enumerate(shape)) \
        if op.attrs["params"].get("keepdims", False) else tuple(shape[d] for d in kept)
    ufunc = monoid(op.attrs["fn"]).ufunc

    def make(host, env):
        lanes = host.lanes
        x = np.ascontiguousarray(env[aid].transpose(perm)).reshape(rows, -1)
        return ufunc.reduce(x, axis=0).reshape((lanes,) + out)
    return make
