"""The one effects analysis: which of the caller's arrays a kernel may read and write.

Takes: a specialization's IR after the uniformity pass (the predicated IR the backends
run; any later stage works too): every op's memory declaration (``Op.memory``, from
``hydra.ir.core``), the regions that pass values on, and ``fn.notes["shared_reshapes"]``
(the reshapes of shared arrays that NumPy copies, ``hydra.views``).

Guarantees: ``effects(fn)``, computed once per specialization and kept in
``fn.notes["effects"]``, says for each parameter and each captured array
(``global_array``) whether the kernel may read it and whether it may write it (a mode:
"", "r", "w" or "rw").  It over-approximates what can happen, never less:

- an access counts for every array the accessed value may be: a value may be what a
  ``select`` picks, what an ``if`` yields, what a loop carries (initial, passed on,
  yielded: to a fixpoint), and (a view of) the operands a view declares it aliases
  (getitem, reshape, transpose, einsum), so a store through ``x[0]`` or ``W.T`` writes
  ``x`` or ``W``;
- a reshape of a shared array that NumPy copies reads its operand and is a new array
  (writing it writes no argument); any other array an op computes is new as well;
- a varying number parameter is an array the kernel reads whole; the values the kernel
  returns are read (the backend copies them out);
- the shape of an array (``array_dim``) is no access to its memory.

Two parameters that are one array passed twice get one mode each: the scheduler
(``hydra.dataflow``) compares the byte ranges of all of a launch's accesses, so the
union of their modes is what it orders by.  ``Effects.accesses`` lists, per parameter
and captured array, the ops that read or write it (through whatever value), and
``written_arrays(fn)`` the arrays that may be written.  Read by: the scheduler's
hazards (``hydra.dataflow``), the read-only, aliasing and list-argument checks and the
byte-swapped copy-back of ``hydra.api``, the cuda backend's copy-back and Dask's
add-only arrays (``hydra.dask.call``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import Loc
from .ir.core import Function, Op, Value
from .types import ArrayType


@dataclass(frozen=True)
class Effects:
    """The result of ``effects``.  ``params``: one mode per parameter of ``fn``;
    ``captured``: (``global_array`` op, its result's mode) in walk order; ``accesses``:
    per parameter or captured array (by value id) that the kernel touches, its
    accesses in walk order as (``"r"`` or ``"w"``, the op: the kernel's final
    ``yield`` for a returned array); ``written_arrays``: the parameters and captured
    arrays (their values) that may be written, in order."""

    params: tuple[str, ...]
    captured: tuple[tuple[Op, str], ...]
    accesses: dict[int, tuple[tuple[str, Op], ...]]
    written_arrays: tuple[Value, ...]

    def write_at(self, v: Value) -> Loc | None:
        """Where an op writes the parameter or captured array ``v`` (None: nowhere)."""
        return next((op.loc for kind, op in self.accesses.get(v.id, ()) if kind == "w"), None)


def effects(fn: Function) -> Effects:
    """What ``fn`` may read and write (see the module docstring); cached in ``fn.notes``."""
    found = fn.notes.get("effects")
    if found is None:
        found = fn.notes["effects"] = _analyse(fn)
    return found


def written_arrays(fn: Function) -> tuple[Value, ...]:
    """The arrays the kernel may write, as the values they enter by: parameters
    (varying or uniform) and captured arrays (``global_array`` results), in order."""
    return effects(fn).written_arrays


def _analyse(fn: Function) -> Effects:
    copied = {chain[-1].result.id for copies, _, chain in fn.notes.get("shared_reshapes", ())
              if copies}
    is_of: dict[int, list[Value]] = {}  # value id -> the values that may be it (or a view)
    touched: dict[int, list[tuple[str, Op]]] = {}  # value id -> its accesses
    end = fn.body.terminator
    for v in end.operands:  # returned: the backend copies it out
        touched.setdefault(v.id, []).append(("r", end))

    def flows(targets: list[Value], values: list[Value]) -> None:
        for t, v in zip(targets, values):
            is_of.setdefault(v.id, []).append(t)

    for op in fn.walk():
        m = op.memory
        reads = list(m.reads)
        if op.opcode == "array" and op.result.id in copied:  # NumPy's copy reads it
            reads += m.aliases
        else:
            for i in m.aliases:
                is_of.setdefault(op.operands[i].id, []).extend(op.results)
        for kind, where in (("r", reads), ("w", m.writes)):
            for i in where:
                touched.setdefault(op.operands[i].id, []).append((kind, op))
        if m.carries and op.opcode == "if":
            for region in op.regions:
                flows(op.results, region.terminator.operands)
        elif m.carries:  # a while: before's args <- init, body's yield; the rest <- passed
            before, body = op.regions
            passed = before.terminator.operands[1:]  # after the condition
            flows(before.args, op.operands)
            flows(before.args, body.terminator.operands)
            flows(body.args, passed)
            flows(op.results, passed)

    def accesses(entry: Value) -> tuple[tuple[str, Op], ...]:
        """The accesses of every value that may be ``entry`` (or a view of it)."""
        seen, todo = set(), [entry]
        while todo:
            v = todo.pop()
            if v.id not in seen:
                seen.add(v.id)
                todo += is_of.get(v.id, [])
        found = dict.fromkeys(a for vid in seen for a in touched.get(vid, ()))
        return tuple(sorted(found, key=lambda a: order[id(a[1])]))

    order = {id(op): k for k, op in enumerate(fn.walk())}
    order[id(end)] = len(order)
    globals_ = [op for op in fn.walk() if op.opcode == "global_array"]
    entries = list(fn.params) + [op.result for op in globals_]
    found = {v.id: accesses(v) for v in entries}

    def mode(v: Value, whole: bool = False) -> str:
        kinds = {kind for kind, _ in found[v.id]} | ({"r"} if whole else set())
        return "".join(k for k in "rw" if k in kinds)

    params = tuple(mode(p, bool(p.varying) and not isinstance(p.type, ArrayType))
                   for p in fn.params)
    return Effects(params, tuple((op, mode(op.result)) for op in globals_),
                   {vid: acc for vid, acc in found.items() if acc},
                   tuple(v for v in entries if "w" in mode(v)))
