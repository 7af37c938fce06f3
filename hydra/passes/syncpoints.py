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

``written_arrays`` is the one answer to "which arrays may this kernel write" (stores
and ``atomic_add``), for this pass and for the call-time checks (aliasing, read-only
arrays).
"""

from __future__ import annotations

from ..ir.core import Function, Op, Value
from ..views import VIEW_FNS


def find_sync_points(fn: Function) -> Function:
    ops = list(fn.walk())
    lane_values = _lane_indices(ops)
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
        if not all(_lane_private(op, lane_values) for op in accesses[array_id]):
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
                           f"may read" if _lane_private(op, lane_values)
                      else f"store of {name}, which lanes write at other lanes' indices")
        if reason:
            op.attrs["sync"] = reason
            points.append((op.loc, reason))
        else:
            op.attrs.pop("sync", None)
    fn.notes["sync_points"] = points
    return fn


def written_arrays(fn: Function) -> list[Value]:
    """The arrays the kernel may write, as the values they enter by: parameters
    (varying or uniform) and captured arrays (``global_array`` results), in order.

    An array value that reaches a store through other ops (a ``select``, an ``if``'s
    result, a loop-carried value, a view) counts every array that may flow into it; an
    array the kernel computes (``W.sum(0)``, ``W.copy()``, a reshape NumPy copies) is a
    new one, so writing it writes none of its operands."""
    sources: dict[int, list[Value]] = {}  # value id -> the values it may be
    copied = {chain[-1].result.id for copies, _, chain in fn.notes.get("shared_reshapes", ())
              if copies}

    def flows(targets: list[Value], values: list[Value]) -> None:
        for t, v in zip(targets, values):
            sources.setdefault(t.id, []).append(v)

    for op in fn.walk():
        if op.opcode == "if":
            for region in op.regions:
                flows(op.results, region.terminator.operands)
        elif op.opcode == "while":
            before, body = op.regions
            passed = before.terminator.operands[1:]  # after the condition
            flows(before.args, op.operands)
            flows(before.args, body.terminator.operands)
            flows(body.args, passed)
            flows(op.results, passed)
        elif op.opcode == "array" and (op.attrs["fn"] not in VIEW_FNS
                                       or op.result.id in copied):
            continue
        elif op.opcode not in ("load", "global_array", "local_array"):
            for r in op.results:  # select, tuple, tuple_get...: any input may flow out
                sources.setdefault(r.id, []).extend(op.inputs())
    seen: set[int] = set()
    todo = [op.written_array for op in fn.walk() if op.written_array is not None]
    while todo:
        v = todo.pop()
        if v.id not in seen:
            seen.add(v.id)
            todo += sources.get(v.id, [])
    entry = list(fn.params) + [op.result for op in fn.walk() if op.opcode == "global_array"]
    return [v for v in entry if v.id in seen]


def _lane_indices(ops: list[Op]) -> set[int]:
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


def _lane_private(op: Op, lane_values: set[int]) -> bool:
    if op.cross_lane:
        return False
    index = first_index(op)
    return index is not None and index.id in lane_values
