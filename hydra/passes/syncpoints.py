"""Sync-point analysis (SPEC section 4): where must all lanes meet?

Takes: predicated SSA.  Guarantees: every op at which a compiled backend must
have finished all earlier statements on *all* lanes before going on gets
``attrs["sync"]`` = the reason, and ``fn.notes["sync_points"]`` lists them.  Lane-
local stretches between sync points may run gang by gang or thread by thread.

An op is a sync point if it is
- a cross-lane intrinsic (it reads every active lane's current value), or
  ``atomic_add`` (every lane's update must land before anyone reads the array);
- a ``print`` (lockstep output: all lanes' first print before any second print);
- a scalar load from, or store to, a shared array (a uniform argument or a captured
  array) that the kernel also writes, unless every scalar access to that array is
  *lane-private*: indexed by exactly ``lane()`` on its first axis, so no lane can read
  or overwrite an element another lane touched;
- a sub-array store (``acc[i] = v``) or an array operation that reads such an array or
  takes a view of it (``acc[i].sum()``, ``acc.sum()``, ``acc @ x``: its ``Op.memory``)
  where it is not lane-private itself (or the scalar accesses sync).  These run on the
  host for all lanes at once, after every earlier store: a barrier already on cpu and
  cuda, so lane-private scalar stores need no sync for them; Dask, whose chunks run
  apart, refuses the ones marked.
  Uniform views of a shared array (``acc.T``, ``acc.reshape(...)``) count as the array
  itself, and no access through one is lane-private.

Per-lane arrays (``np.zeros`` in a kernel, varying arguments) are private to
their lane and never sync.  Distinct array arguments are assumed not to alias
(as in Numba and C ``restrict``); passing one array twice is checked at call time.

Which arrays a kernel may write as a whole (for the call-time checks and the
scheduler) is ``hydra.effects``; this pass asks a finer question per access: the
index each op writes or reads a shared array at.
"""

from __future__ import annotations

from ..ir.core import Function, Op, Value
from ..types import ArrayType
from ..views import VIEW_FNS


def find_sync_points(fn: Function) -> Function:
    ops = list(fn.walk())
    lane_values = lane_indices(ops)
    roots = _uniform_view_roots(ops)
    accesses: dict[int, list[tuple[Op, bool]]] = {}  # (op, reached without a view)
    shared: dict[int, tuple[Value, bool]] = {}  # id(op) -> (the shared array, direct)
    written: set[int] = set()
    for op in ops:
        if len(op.results) == 1 and op.result.id in roots:
            continue  # making a uniform view accesses nothing: its uses do
        m, writes = op.memory, op.written_array
        for array in (op.operands[i] for i in (*m.reads, *m.aliases, *m.writes)):
            if array.varying or not isinstance(array.type, ArrayType):
                continue  # per-lane arrays are lane-private
            root = roots.get(array.id, array)
            accesses.setdefault(root.id, []).append((op, root is array))
            shared[id(op)] = root, root is array
            if array is writes:
                written.add(root.id)
    # the scalar loads and stores may run in native code, gang by gang or thread by
    # thread: they sync where any scalar access to their array is not lane-private.  An
    # array operation or a sub-array store runs on the host over all lanes at once, a
    # barrier already: it syncs only where it reaches other lanes' places itself (for
    # Dask, whose chunks run apart), or where the scalar accesses do.
    shared_hazard = {array_id for array_id in written if not all(
        direct and lane_private(op, lane_values)
        for op, direct in accesses[array_id] if not _host_level(op))}
    points = []
    for op in ops:
        reason = None
        root, direct = shared.get(id(op), (None, False))
        if op.cross_lane:
            reason = f"cross-lane {op.attrs.get('name') or op.attrs['fn']}"
        elif op.opcode == "print":
            reason = "print in lane order"
        elif root is not None and (root.id in shared_hazard or root.id in written
                                   and _host_level(op)
                                   and not (direct and lane_private(op, lane_values))):
            name = root.name or "an array"
            reason = (f"store of {name} at this lane's own index, which other lanes "
                      f"may read" if op.written_array is root
                      and lane_private(op, lane_values)
                      else f"store of {name}, which lanes write at other lanes' indices"
                      if op.written_array is not None
                      else f"{'load' if op.opcode == 'load' else 'read'} of {name} may "
                           f"read another lane's store")
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


def _uniform_view_roots(ops: list[Op]) -> dict[int, Value]:
    """Uniform views of shared arrays (``acc.T``, ``acc.reshape(...)``, ``acc[1:]``), by
    id, to the shared array they view: an access through one reaches that array.  (A
    view's first axis is not the array's, so no access through one is lane-private.)"""
    roots: dict[int, Value] = {}
    for op in ops:
        if op.opcode == "array" and op.attrs["fn"] in VIEW_FNS and op.results \
                and not op.result.varying and isinstance(op.result.type, ArrayType):
            base = op.operands[0]
            if not base.varying:
                roots[op.result.id] = roots.get(base.id, base)
    return roots


def lane_private(op: Op, lane_values: set[int]) -> bool:
    """Does ``op``, a load, store, ``array_store`` or array ``getitem``, reach its array's
    first axis at ``lane()`` (``lane_values``: the ids ``lane_indices`` found), so that no
    other lane's access meets it there?  Not at a slice (a whole axis), and no other op
    is: an array operation reads the whole array, ``atomic_add`` and ``print`` all lanes'."""
    if op.opcode in ("load", "store"):
        index = op.operands[1]
    elif op.opcode == "array_store" or op.opcode == "array" and op.attrs["fn"] == "getitem":
        spec = op.attrs["params"]["index"]
        if not spec or spec[0][0] != "int":
            return False
        index = op.operands[2 if op.opcode == "array_store" else 1]
    else:
        return False
    return index.id in lane_values


def _host_level(op: Op) -> bool:
    """An array operation or a sub-array store: the host runs it for all lanes at once."""
    return op.opcode in ("array", "array_store")

