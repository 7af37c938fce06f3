"""Read-modify-write races on shared arrays: a warning when the kernel compiles.

``counts[b] += 1`` run by many lanes loads ``counts[b]``, adds and stores, each lane
in lockstep: where two lanes hold the same ``b``, both load the old count and one
lane's store lands, so the other's update is lost (guide chapter 5, "Lockstep memory
and sync points": when several lanes write one element in one statement, one of the
values lands).  That is the documented semantics, yet a per-example reading of the
code expects every lane's update; ``atomic_add(counts, b, 1)`` counts them all.

``rmw_races`` finds, in predicated SSA, each store into a shared (uniform) array whose
stored value is computed from a load of the same array at the same index (``a[i] +=
v``, ``a[i] = a[i] + v``, and ``W[0] += x`` on rows of per-lane arrays), where lanes may
really collide:

- the index is not provably lane-private (the proof of ``syncpoints``: ``lane()`` on the
  first axis, so that no two lanes reach one element), nor, on any axis, a value that
  differs on every lane (a race needs two lanes at one element in one statement):
  ``lane()`` plus or minus a uniform value, times a nonzero constant, and such a value
  modulo ``nlanes()`` (``out[(lane() + 1) % nlanes()] += x``: a rotation);
- the lanes may write different values or different elements: the index or the stored
  value is varying (with both uniform, every lane writes the same value to the same
  element, e.g. ``W[0] += lanesum(g)``: one write is what the code means);
- more than one lane runs the store: not under ``if lane() == k`` (a mask that holds on
  one lane at most).

Kernels compiled for one lane never warn (``api``).  The warning is a
``hydra.HydraWarning`` located at the user's line, so Python shows ``file:line`` and the
line's text, and ``warnings.filterwarnings`` can silence it there.
"""

from __future__ import annotations

import warnings

from .errors import HydraWarning, Loc
from .ir.core import Function, Op, Value
from .passes.syncpoints import lane_indices, lane_private


def rmw_races(fn: Function) -> list[tuple[Loc, str]]:
    """(location, message) of each read-modify-write of a shared array that lanes may
    run on one element at once, in program order."""
    ops = list(fn.walk())
    lane_values = lane_indices(ops)
    defs = {r.id: op for op in ops for r in op.results}
    one_lane = _one_lane_masks(ops, lane_values)
    found = []
    for op in ops:
        if op.opcode not in ("store", "array_store") or op.operands[0].varying:
            continue  # per-lane arrays are the lane's own
        array, indices, value = _parts(op)
        if lane_private(op, lane_values) or op.mask is not None and op.mask.id in one_lane \
                or any(_per_lane(i, defs, lane_values) for i in indices):
            continue
        if not (value.varying or any(i.varying for i in indices)):
            continue
        if not _reads_back(value, op, defs):
            continue
        found.append((op.loc, _message(op, array, indices, defs)))
    return found


def warn_races(fn: Function) -> None:
    """Issue ``rmw_races(fn)`` as ``HydraWarning``s at the user's lines."""
    for loc, message in rmw_races(fn):
        warnings.warn_explicit(message, HydraWarning, loc.file, loc.line)


def _parts(op: Op) -> tuple[Value, list[Value], Value]:
    """(array, index values, stored value) of a store or an ``array_store``."""
    if op.opcode == "store":
        return op.operands[0], op.operands[1:-1], op.operands[-1]
    return op.operands[0], op.operands[2:], op.operands[1]


def _same_place(read: Op, store: Op) -> bool:
    """Does ``read`` load the element (or sub-array) that ``store`` writes?"""
    if read.operands[0].id != store.operands[0].id:
        return False
    _, indices, _ = _parts(store)
    if store.opcode == "store":
        got = read.operands[1:] if read.opcode == "load" else None
    else:
        got = read.operands[1:] if read.opcode == "array" and read.attrs["fn"] == "getitem" \
            and read.attrs["params"]["index"] == store.attrs["params"]["index"] else None
    return got is not None and [v.id for v in got] == [v.id for v in indices]


def _reads_back(value: Value, store: Op, defs: dict[int, Op]) -> bool:
    """Is ``value`` computed (through any chain of ops) from a read of the place
    ``store`` writes?"""
    seen: set[int] = set()
    todo = [value]
    while todo:
        v = todo.pop()
        op = defs.get(v.id)
        if v.id in seen or op is None:
            continue
        seen.add(v.id)
        if op.opcode in ("load", "array") and _same_place(op, store):
            return True
        todo += op.operands
    return False


def _per_lane(v: Value, defs: dict, lane_values: set[int], modulo: bool = True) -> bool:
    """Does ``v`` differ on every lane?  ``lane()`` (and its casts), plus or minus a
    uniform value, negated, times a nonzero constant; modulo ``nlanes()`` once (n
    consecutive integers have n distinct residues)."""
    if v.id in lane_values:
        return True
    op = defs.get(v.id)
    if op is None or not op.results or op.result.type.kind not in "iu":
        return False
    a = op.operands

    def per_lane(x: Value) -> bool:
        return _per_lane(x, defs, lane_values, modulo=False)
    if op.opcode in ("add", "sub"):
        return any(per_lane(x) and not y.varying for x, y in (a, a[::-1]))
    if op.opcode == "neg":
        return per_lane(a[0])
    if op.opcode == "cast":
        return op.result.type.bits >= 32 and _per_lane(a[0], defs, lane_values, modulo)
    if op.opcode == "mul":
        return any(per_lane(x) and _nonzero_const(y, defs) for x, y in (a, a[::-1]))
    if op.opcode == "mod" and modulo:
        m = defs.get(a[1].id)
        return per_lane(a[0]) and m is not None and m.opcode == "intrinsic" \
            and m.attrs["name"] == "nlanes"
    return False


def _nonzero_const(v: Value, defs: dict) -> bool:
    op = defs.get(v.id)
    return op is not None and op.opcode == "const" and op.attrs["value"] != 0


def _one_lane_masks(ops: list[Op], lane_values: set[int]) -> set[int]:
    """Ids of masks true on one lane at most: ``lane() == k`` with a uniform ``k``, and
    any mask that is the ``and`` of one of them with something else."""
    ids: set[int] = set()
    for op in ops:
        a = op.operands
        if op.opcode == "eq" and len(a) == 2 and any(
                x.id in lane_values and not y.varying for x, y in (a, a[::-1])):
            ids.add(op.result.id)
        elif op.opcode in ("bitand", "and") and any(x.id in ids for x in a):
            ids.add(op.result.id)
    return ids


def _message(op: Op, array: Value, indices: list[Value], defs: dict[int, Op]) -> str:
    name = array.name or "a shared array"

    def shown(i: Value) -> str:
        d = defs.get(i.id)
        return i.name or (repr(d.attrs["value"]) if d is not None and d.opcode == "const"
                          else "index")
    if op.opcode == "store":
        place = f"{name}[{', '.join(shown(i) for i in indices)}]"
    else:
        ints = iter(indices)
        items = [_shown_item(item, ints, shown) for item in op.attrs["params"]["index"]]
        place = f"{name}[{', '.join(items)}]"
    hint = (f"use hydra.atomic_add({name}, {shown(indices[0])}, value) to add every "
            f"lane's value"
            if op.opcode == "store" and array.type.ndim == 1 else
            "use hydra.atomic_add on a 1-d shared array to add every lane's value, or "
            "sum the lanes' values first (lanesum) and update once")
    return (f"{place} is read, changed and written back by many lanes at once, and lanes "
            f"may reach the same element: only one lane's write lands there and the "
            f"others' updates are lost (guide chapter 5, 'Lockstep memory and sync "
            f"points'); {hint}")


def _shown_item(item: tuple, ints, shown) -> str:
    """One item of an ``array_store``'s static index, as the user wrote it."""
    if item[0] == "int":
        return shown(next(ints))
    if item[0] == "slice":
        a, b, c = (("" if x is None else str(x)) for x in item[1:])
        return f"{a}:{b}" + (f":{c}" if c else "")
    return "None" if item[0] == "none" else "..."
