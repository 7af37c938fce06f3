"""Two more precomputed host steps (cpu backend): scalar cross-lane reductions and the
one-GEMM products of per-lane vectors with a uniform matrix.

Takes: one op that runs on the host (``hoststeps.quick`` asks here after its own cases).
Guarantees: ``lane_step(op)`` is None or a ``Quick`` step that puts the same value into
``env`` as ``host.run_op`` would, computed by the same NumPy call on the same arrays:

- ``lanesum(x)`` and kin of a per-lane scalar (an ``intrinsic`` op): the intrinsic's
  own reference on the ``[N]`` array and the mask (the host rule first broadcasts the
  operand, looks the rule up and builds an error callback: ~10 us of the digits CNN's
  step for a 1 us reduction);
- ``U @ x`` and ``x @ U`` (a uniform matrix, per-lane vectors or matrices: lanes as the
  rows of one GEMM): ``batching.matmul_rule``'s one ``np.matmul``, minus the rule's
  dispatch (~5 us a product).

Anything else goes to the host rule: a reduction over no active lane (its error), a
product under a mask with few active lanes (the policy's ``op_below``: the host
rule computes the active rows only; inside a compacted loop ``compactsteps`` plans the
product itself), an operand with another shape or dtype than the
IR says (an undefined value, a uniform array a select passed through).
"""

from __future__ import annotations

import numpy as np

from ...batching import matmul_rule
from ...intrinsics import INTRINSICS
from ...ir.core import Op
from ...types import ArrayType, ScalarType
from ..host import Host, run_op
from ..policy import current as current_policy
from .quick import Quick

#: the intrinsics whose reference reduces the active lanes of one scalar
#: the lane reductions: the intrinsics that combine by a monoid
LANE_REDUCTIONS = frozenset(n for n, e in INTRINSICS.items() if e.monoid is not None)


def lane_step(op: Op) -> Quick | None:
    """The precomputed step of ``op`` (see the module docstring), or None."""
    if op.opcode == "intrinsic":
        return _lane_reduction(op)
    if op.opcode == "array" and op.attrs["fn"] in ("matmul", "dot"):
        return _gemm(op)
    return None


def _lane_reduction(op: Op) -> Quick | None:
    name = op.attrs.get("name")
    if name not in LANE_REDUCTIONS or len(op.operands) != 1 or len(op.results) != 1 \
            or op.result.varying:
        return None
    (x,) = op.operands
    if not (x.varying and isinstance(x.type, ScalarType)):
        return None
    ref = INTRINSICS[name].reference
    xid, rid = x.id, op.result.id
    src, dtype = x.type.dtype, op.result.type.dtype
    mid = op.mask.id if op.mask is not None else None
    masks: dict[int, np.ndarray] = {}

    def step(env, lanes):
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
        run_op(Host(None, lanes), op, env)
    return Quick(op, step)


class _NoLanes(Exception):
    """A reduction over no active lane: the host rule raises its error."""


def _fail(kind, message, lane):
    raise _NoLanes


def _gemm(op: Op) -> Quick | None:
    if len(op.operands) != 2 or len(op.results) != 1 or not op.result.varying:
        return None
    a, b = op.operands
    r = op.result
    if not all(isinstance(v.type, ArrayType) and v.type.shape is not None
               and v.type.dtype == r.type.dtype for v in (a, b, r)):
        return None
    vary = [bool(a.varying), bool(b.varying)]
    da, db = a.type.ndim, b.type.ndim
    # matmul_rule's one-GEMM cases: lanes as the rows of one product
    if not (vary == [True, False] and da >= 1 and db >= 1
            or vary == [False, True] and db == 1 and da in (1, 2)):
        return None
    want = [((0,) if v else ()) + tuple(t.type.shape) for v, t in zip(vary, (a, b))]
    ids = [a.id, b.id]
    rid = r.id
    dtype = r.type.dtype.dtype
    f = np.matmul if op.attrs["fn"] == "matmul" else np.dot
    out = r.type
    mid = op.mask.id if op.mask is not None else None

    def step(env, lanes):
        args = [env[i] for i in ids]
        if mid is not None and np.count_nonzero(env[mid]) < current_policy().op_below * lanes:
            run_op(Host(None, lanes), op, env)
            return
        for x, v, w in zip(args, vary, want):
            if type(x) is not np.ndarray or x.dtype != dtype \
                    or x.shape != ((lanes,) + w[1:] if v else w):
                run_op(Host(None, lanes), op, env)
                return
        value = matmul_rule(f, args, vary, lanes, out, {})
        env[rid] = value if value.dtype == dtype else value.astype(dtype)
    return Quick(op, step)
