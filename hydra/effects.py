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
union of their modes is what it orders by.  ``written_arrays(fn)`` lists the values of
the arrays that may be written; the scheduler's hazards, the read-only, aliasing and
list-argument checks of ``hydra.api`` and the cuda backend's copy-back read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import Loc
from .ir.core import Function, Op, Value
from .types import ArrayType


@dataclass(frozen=True)
class Effects:
    """The result of ``effects``.  ``params``: one mode per parameter of ``fn``;
    ``captured``: (``global_array`` op, its result's mode) in walk order; ``read`` and
    ``written``: the ids of every value whose memory may be read / written (views and
    joins included); ``write_at``: per written parameter or captured array (by value
    id), the location of an op that writes it; ``written_arrays``: the parameters and
    captured arrays (their values) that may be written, in order."""

    params: tuple[str, ...]
    captured: tuple[tuple[Op, str], ...]
    read: frozenset[int]
    written: frozenset[int]
    write_at: dict[int, Loc]
    written_arrays: tuple[Value, ...]


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
    may_be: dict[int, list[Value]] = {}  # value id -> the values it may be (or view)
    reads: list[Value] = list(fn.body.terminator.operands)  # returned: copied out
    writes: list[tuple[Value, Loc]] = []

    def flows(targets: list[Value], values: list[Value]) -> None:
        for t, v in zip(targets, values):
            may_be.setdefault(t.id, []).append(v)

    for op in fn.walk():
        m = op.memory
        reads += [op.operands[i] for i in m.reads]
        writes += [(op.operands[i], op.loc) for i in m.writes]
        if op.opcode == "array" and op.result.id in copied:  # NumPy's copy reads it
            reads += [op.operands[i] for i in m.aliases]
        else:
            for r in op.results:
                may_be.setdefault(r.id, []).extend(op.operands[i] for i in m.aliases)
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

    def reach(values: list[Value], seen: dict[int, Loc | None], loc: Loc | None) -> None:
        """Every value ``values`` may be goes into ``seen`` (with ``loc``)."""
        todo = list(values)
        while todo:
            v = todo.pop()
            if v.id not in seen:
                seen[v.id] = loc
                todo += may_be.get(v.id, [])

    read: dict[int, Loc | None] = {}
    reach(reads, read, None)
    written: dict[int, Loc | None] = {}
    for v, loc in writes:  # the first write that reaches a value is where it is written
        reach([v], written, loc)

    def mode(v: Value, whole: bool = False) -> str:
        return ("r" if v.id in read or whole else "") + ("w" if v.id in written else "")

    params = tuple(mode(p, bool(p.varying) and not isinstance(p.type, ArrayType))
                   for p in fn.params)
    captured = tuple((op, mode(op.result)) for op in fn.walk() if op.opcode == "global_array")
    entries = list(fn.params) + [op.result for op, _ in captured]
    return Effects(params, captured, frozenset(read), frozenset(written),
                   {v.id: written[v.id] for v in entries if v.id in written},
                   tuple(v for v in entries if v.id in written))
