"""What the gradient transformation needs to know about a function before and after it
runs (``hydra.grad.transform``).

Takes: a typed structured function (before uniformity).  Guarantees: ``useful`` and
``active`` are sets of value ids, to a fixpoint through operands, the values regions
yield and the values loops carry; ``prune`` removes quiet ops nothing reads.
"""

from __future__ import annotations

from ..ir.core import Function, Region, Value


def useful(fn: Function, value: Value) -> set[int]:
    """The ids of the values ``value`` depends on (through operands, the values regions
    yield and the values loops carry), to a fixpoint: a loop none of whose results is
    among them needs no tape (an aux output's loop, a loop of prints)."""
    found = {value.id}
    changed = True
    while changed:
        changed = False
        for op in fn.walk():
            args = [a for r in op.regions for a in r.args]
            if not any(v.id in found for v in op.results + args):
                continue
            needed = list(op.inputs()) + [v for r in op.regions for v in r.terminator.inputs()]
            for v in needed:
                if v.id not in found:
                    found.add(v.id)
                    changed = True
    return found


def active(fn: Function, wrt: set[int]) -> set[int]:
    """The ids of the values that depend on a differentiated parameter (``wrt``), to a
    fixpoint through operands, the values regions yield and loops carry (activity
    analysis, as Enzyme's): only they get adjoints, so ``W.T @ g`` for an input ``x``
    that is not differentiated (the first layer of a network, a loop's ``xs[t]``) is
    never computed, nor carried through a loop's reverse as an accumulator."""
    found = set(wrt)

    def flows(sources, targets) -> bool:
        new = [t for s, t in zip(sources, targets) if s.id in found and t.id not in found]
        found.update(t.id for t in new)
        return bool(new)

    changed = True
    while changed:
        changed = False
        for op in fn.walk():
            if op.opcode == "while":  # position by position: a loop's counter stays inactive
                before, body = op.regions
                passed = before.terminator.operands[1:]
                changed |= flows(op.operands, before.args)
                changed |= flows(body.terminator.operands, before.args)
                changed |= flows(passed, body.args) | flows(passed, op.results)
            elif op.opcode == "if":
                for r in op.regions:
                    changed |= flows(r.terminator.operands, op.results)
            elif any(v.id in found for v in op.operands):
                new = [r for r in op.results if r.id not in found]
                found.update(r.id for r in new)
                changed |= bool(new)
    return found


def prune(fn: Function) -> None:
    """Remove what nothing reads: the adjoints of operands that lead to no differentiated
    parameter (``W.T @ g`` for an ``x`` not differentiated: a GEMM that the later passes
    would keep, once linearize gives it a mask).  Only ops that neither have an effect
    nor may raise go, and ``if``s of such ops; loops stay."""
    changed = True
    while changed:
        used = {v.id for op in fn.walk() for v in op.inputs()}
        changed = _prune(fn.body, used)


def _prune(region: Region, used: set[int]) -> bool:
    changed, kept = False, []
    for op in region.ops:
        for r in op.regions:
            changed |= _prune(r, used)
        quiet = not (op.info.terminator or op.effect or op.traps or op.opcode == "while")
        if quiet and not any(r.id in used for r in op.results) and not any(
                o.effect or o.traps or o.opcode == "while" for r in op.regions
                for o in r.walk()):
            changed = True
            continue
        kept.append(op)
    region.ops = kept
    return changed


