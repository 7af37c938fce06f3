"""Sync-point analysis (SPEC section 4): where must all lanes meet?

Takes: predicated SSA.  Guarantees: every op at which a compiled backend must
have finished all earlier statements on *all* lanes before going on gets
``attrs["sync"]`` = the reason, and ``fn.notes["sync_points"]`` lists them.  Lane-
local stretches between sync points may run gang by gang or thread by thread.

An op is a sync point if it is
- a cross-lane intrinsic (it reads every active lane's current value), or
  ``atomic_add`` (every lane's update must land before anyone reads the array);
- a ``print`` (lockstep output: all lanes' first print before any second print);
- a load from, or store to, a shared array (a uniform argument or a captured
  array) that the kernel also writes, unless every access to that array is
  *lane-private*: indexed by exactly ``lane()`` on its first axis, so no lane can
  read or overwrite an element another lane touched.

Per-lane arrays (``np.zeros`` in a kernel, varying arguments) are private to
their lane and never sync.  Distinct array arguments are assumed not to alias
(as in Numba and C ``restrict``); passing one array twice is checked at call time.

Which arrays a kernel may write as a whole (for the call-time checks and the
scheduler) is ``hydra.effects``; this pass asks a finer question per access: the
index each op writes or reads a shared array at.
"""

from __future__ import annotations

from ..ir.core import Function, Op, Value


def find_sync_points(fn: Function) -> Function:
    ops = list(fn.walk())
    lane_values = lane_indices(ops)
    accesses: dict[int, list[Op]] = {}
    written: set[int] = set()
    for op in ops:
        array = op.operands[0] if op.opcode == "load" else op.written_array
        if array is not None and not array.varying:  # per-lane arrays are lane-private
            accesses.setdefault(array.id, []).append(op)
            if op.opcode != "load":
                written.add(array.id)
    shared_hazard = set()
    for array_id in written:
        if not all(lane_private(op, lane_values) for op in accesses[array_id]):
            shared_hazard.add(array_id)
    points = []
    for op in ops:
        reason = None
        if op.cross_lane:
            reason = f"cross-lane {op.attrs.get('name') or op.attrs['fn']}"
        elif op.opcode == "print":
            reason = "print in lane order"
        elif op.opcode in ("load", "store") and op.operands[0].id in shared_hazard:
            name = op.operands[0].name or "an array"
            reason = (f"load of {name} may read another lane's store" if op.opcode == "load"
                      else f"store of {name} at this lane's own index, which other lanes "
                           f"may read" if lane_private(op, lane_values)
                      else f"store of {name}, which lanes write at other lanes' indices")
        if reason:
            op.attrs["sync"] = reason
            points.append((op.loc, reason))
        else:
            op.attrs.pop("sync", None)
    fn.notes["sync_points"] = points
    return fn


def lane_indices(ops: list[Op]) -> set[int]:
    """Ids of values equal to lane() on every lane (lane() itself and casts of it)."""
    ids: set[int] = set()
    for op in ops:
        if op.opcode == "intrinsic" and op.attrs["name"] == "lane":
            ids.add(op.result.id)
        elif op.opcode == "cast" and op.operands[0].id in ids and op.result.type.kind in "iu" \
                and op.result.type.bits >= 32:
            ids.add(op.result.id)
    return ids


def first_index(op: Op) -> Value | None:
    """The index by which ``op`` (a load, store, ``array_store`` or ``atomic_add``)
    reaches its array's first axis; None where that is a slice (a whole axis)."""
    if op.opcode == "array_store":
        spec = op.attrs["params"]["index"]
        return op.operands[2] if spec and spec[0][0] == "int" else None
    return op.operands[1]


def lane_private(op: Op, lane_values: set[int]) -> bool:
    """Does ``op`` reach its array's first axis at ``lane()`` (``lane_values``: the ids
    ``lane_indices`` found), so that no other lane's access meets it there?"""
    if op.cross_lane:
        return False
    index = first_index(op)
    return index is not None and index.id in lane_values
