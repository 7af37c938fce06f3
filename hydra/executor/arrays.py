"""Host rules of per-lane arrays (SPEC section 8): the ``array`` and ``array_store`` ops,
selects between arrays, and cross-lane reductions of arrays.

Every backend runs these over all N lanes at once (the cpu backend as host steps:
batched NumPy/BLAS), by the batching rules of ``hydra.batching``.  Indexing with
computed indices checks the bounds of the active lanes only and names the first
failing lane, as scalar loads do; inactive lanes read index 0.
"""

from __future__ import annotations

import numpy as np

from ..batching import FRESH, batched, index_tuple, int_axes, lane_copies
from ..ir.core import LANE_ARRAY_FNS, Op
from ..registry import record
from ..types import ArrayType


def checked_ints(h, op: Op, env, spec, dims, ints, vary):
    """The dynamic indices, bounds checked on the active lanes and made non-negative;
    varying ones are ``[N]`` arrays with index 0 on inactive lanes."""
    mask = env[op.mask.id] if op.mask is not None else np.ones(h.lanes, dtype=bool)
    out = []
    for k, axis in enumerate(int_axes(spec, len(dims))):
        n = dims[axis]
        i = np.asarray(ints[k], dtype=np.int64)
        bad = (i < -n) | (i >= n)
        lanes = np.nonzero(mask & bad)[0] if vary[k] else \
            (np.nonzero(mask)[0][:1] if bad else [])
        if len(lanes):
            lane = int(lanes[0])
            shown = int(i[lane]) if vary[k] else int(i)
            h.fail("index", f"index {shown} is out of bounds for axis {axis} with size "
                   f"{n}", lane, op.loc)  # a uniform index: the lowest active lane
        i = np.where(i < 0, i + n, i)
        out.append(np.where(mask, i, 0) if vary[k] else (0 if bad else int(i)))
    return out


def _index(h, array, array_varying: bool, spec, ints, ints_vary):
    """(index tuple into the stored array, the position of the lane axis in the result
    of indexing with it, or None where the result keeps the stored lane axis first)."""
    n = h.lanes
    if not any(ints_vary):
        idx = index_tuple(spec, ints)
        return ((slice(None),) + idx if array_varying else idx), None
    ints = [np.asarray(i) if v else np.full(n, i) for i, v in zip(ints, ints_vary)]
    idx = index_tuple(spec, ints)
    if array_varying:
        idx = (np.arange(n),) + idx
    return idx, _lane_axis(idx, array.ndim)


def _lane_axis(idx: tuple, ndim: int) -> int:
    """Where NumPy puts the (one, lane-long) advanced axis of indexing with ``idx``:
    first when the advanced indices are apart, else where the first one stands (after
    the axes of the slices, ``None``s and ``...`` before it)."""
    adv = [k for k, x in enumerate(idx) if isinstance(x, np.ndarray)]
    if not adv or adv[-1] - adv[0] + 1 != len(adv):
        return 0
    used = sum(1 for x in idx if x is not None and x is not Ellipsis)
    return sum(ndim - used if x is Ellipsis else 1 for x in idx[:adv[0]])


def _getitem(h, op: Op, env):
    array_v = op.operands[0]
    array = env[array_v.id]
    ints = [env[v.id] for v in op.operands[1:]]
    vary = [bool(v.varying) for v in op.operands[1:]]
    spec = op.attrs["params"]["index"]
    dims = array.shape[1:] if array_v.varying else array.shape
    ints = checked_ints(h, op, env, spec, dims, ints, vary)
    idx, at = _index(h, array, bool(array_v.varying), spec, ints, vary)
    out = array[idx]
    if at:
        out = np.moveaxis(out, at, 0)
    if op.result.varying and not (array_v.varying or any(vary)):
        out = np.broadcast_to(out, (h.lanes,) + np.shape(out))
    return out


def array_rule(h, op: Op, env) -> list:
    fn = op.attrs["fn"]
    if fn == "getitem":
        return [_getitem(h, op, env)]
    if fn in LANE_ARRAY_FNS:
        return [_lane_reduce(h, op, env)]
    args, vary = [env[v.id] for v in op.operands], [bool(v.varying) for v in op.operands]
    if op.mask is not None and op.result.varying and any(vary):
        mask = env[op.mask.id]
        rows = np.nonzero(mask)[0]
        if len(rows) < h.policy.op_below * h.lanes:
            return [_compacted(h, op, fn, args, vary, rows)]
    out = batched(fn, args, vary, h.lanes, op.result.type, op.attrs["params"])
    if op.result.varying and not any(vary) and fn not in FRESH:
        # an array the kernel writes into (uniformity's written temporaries): each
        # lane's own copy
        out = lane_copies(out, h.lanes)
    return [out if out.ndim or op.result.varying else out[()]]


def _compacted(h, op: Op, fn: str, args, vary, rows):
    """A heavy operation on the active lanes' rows only (gather, compute, scatter);
    the rows of inactive lanes are zeros, which no lane ever observes."""
    t = op.result.type
    shape = tuple(t.shape) if hasattr(t, "shape") else ()
    # a product or reduction may give each lane a number (x @ y): a ScalarType
    dtype = t.dtype.dtype if isinstance(t, ArrayType) else t.dtype
    out = np.zeros((h.lanes,) + shape, dtype)
    if len(rows):
        part = [a[rows] if v else a for a, v in zip(args, vary)]
        out[rows] = batched(fn, part, vary, len(rows), t, op.attrs["params"])
    return out


def _lane_reduce(h, op: Op, env):
    """lanesum/laneprod/lanemin/lanemax of arrays: elementwise over the active lanes;
    lanesum_outer(d, x) is ``D.T @ X`` over the active rows: one GEMM."""
    fn = op.attrs["fn"]
    mask = env[op.mask.id] if op.mask is not None else np.ones(h.lanes, dtype=bool)
    lanes = [np.broadcast_to(env[v.id], (h.lanes,) + tuple(getattr(v.type, "shape", ())))
             for v in op.operands]
    dtype = op.result.type.dtype.dtype
    if fn == "prefixsum":
        x = lanes[0]
        vals = np.where(mask.reshape((-1,) + (1,) * (x.ndim - 1)), x, 0).astype(dtype)
        return np.cumsum(vals, axis=0) - vals
    if fn in ("laneany", "laneall"):
        lanes[0] = lanes[0].astype(bool)
    # the records' definitions reduce or index the lane axis: arrays ride along

    def fail(kind, message, lane):
        h.fail(kind, message, lane, op.loc)
    return np.asarray(record("array", fn).definition(lanes, mask, h.lanes, fail)).astype(dtype)


def array_store_rule(h, op: Op, env) -> list:
    """``a[index] = value``: into a lane's own array, or into a shared one at per-lane
    places (``out[lane()] = h``); only active lanes write."""
    array_v, value_v = op.operands[:2]
    array = env[array_v.id]
    value = env[value_v.id]
    ints = [env[v.id] for v in op.operands[2:]]
    vary = [bool(v.varying) for v in op.operands[2:]]
    spec = op.attrs["params"]["index"]
    dims = array.shape[1:] if array_v.varying else array.shape
    mask = env[op.mask.id] if op.mask is not None else np.ones(h.lanes, dtype=bool)
    if not array.flags.writeable:
        h.fail("value", f"cannot store into the read-only array {array_v.name}", None, op.loc)
    ints = checked_ints(h, op, env, spec, dims, ints, vary)
    sub = tuple(op.attrs["params"]["shape"])
    if not (array_v.varying or any(vary)):
        # a uniform place in a shared array: every active lane writes it, the last wins
        lanes = np.nonzero(mask)[0]
        if len(lanes):
            v = value[lanes[-1]] if value_v.varying else value
            array[index_tuple(spec, ints)] = v
        return []
    lanes = np.nonzero(mask)[0]
    if value_v.varying:
        value = np.asarray(value)
        value = value.reshape((h.lanes,) + (1,) * (len(sub) - (value.ndim - 1)) + value.shape[1:])
    values = np.broadcast_to(value, (h.lanes,) + sub)[lanes] if value_v.varying else \
        np.broadcast_to(value, (len(lanes),) + sub)
    ints = [np.asarray(i)[lanes] if v else np.full(len(lanes), i) for i, v in zip(ints, vary)]
    idx = index_tuple(spec, ints)
    if array_v.varying:
        idx = (lanes,) + idx
    at = _lane_axis(idx, array.ndim)
    if at:
        values = np.moveaxis(values, 0, at)
    array[idx] = values
    return []


def select_rule(h, op: Op, env) -> list:
    """``c ? a : b`` of arrays: whole lane rows (a lane that skipped a branch keeps its
    arrays)."""
    c, a, b = (env[v.id] for v in op.operands)
    t = op.result.type
    shape = (h.lanes,) + tuple(t.shape)
    if a is None or b is None:  # an undef from an arm no lane ran
        v, arm = (b, op.operands[2]) if a is None else (a, op.operands[1])
        # (both undef: a value no lane defined, as from an if that no lane entered)
        if op.result.varying and not arm.varying and v is not None:  # one row per lane
            v = lane_copies(v, h.lanes)
        return [v]
    if not op.operands[0].varying:
        return [a if c else b]
    a = a if op.operands[1].varying else np.broadcast_to(a, shape)
    b = b if op.operands[2].varying else np.broadcast_to(b, shape)
    return [np.where(np.asarray(c).reshape((h.lanes,) + (1,) * t.ndim), a, b)]

