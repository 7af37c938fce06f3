"""What the gradient transformation needs to know about a function before and after it
runs (``hydra.grad.transform``).

Takes: a typed structured function (before uniformity).  Guarantees:
``check_differentiable`` raises the ``CompileError`` SPEC section 11 gives for the first
op it refuses; ``useful`` and ``active`` are sets of value ids, to a fixpoint through
operands, the values regions yield and the values loops carry; ``prune`` removes quiet
ops nothing reads.
"""

from __future__ import annotations

from ..errors import CompileError
from ..intrinsics import INTRINSICS
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


def defined(region: Region) -> set[int]:
    """The ids of the values ``region`` defines: its arguments, its ops' results and
    their regions' arguments, nested."""
    out = {a.id for a in region.args}
    for op in region.walk():
        out.update(r.id for r in op.results)
        out.update(a.id for r in op.regions for a in r.args)
    return out


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


def check_differentiable(fn: Function) -> None:
    """``CompileError`` at the first op that SPEC section 11 refuses inside ``fn``."""
    for op in fn.walk():
        if op.opcode in ("tape_push", "tape_pop"):
            raise CompileError("hydra.grad: a gradient of a gradient through a loop is not "
                               "supported yet (the inner gradient's tape has no adjoint)",
                               op.loc)
        if op.opcode in ("store", "array_store"):
            raise CompileError(
                "hydra.grad: a store into an argument or a captured array is not "
                "differentiable (stores into a shared array, a caller's array or a view of "
                "a varying argument never are; a lane's own arrays may be stored into)",
                op.loc)
        if op.cross_lane or op.opcode == "intrinsic" and INTRINSICS[op.attrs["name"]].effect:
            raise CompileError(f"hydra.grad: {describe(op)} is not differentiable: cross-lane "
                               f"operations and atomic_add inside the differentiated "
                               f"function are not (SPEC section 11)", op.loc)


def describe(op) -> str:
    """The op as an error message names it."""
    if op.opcode == "math":
        return f"math function {op.attrs['fn']}"
    if op.opcode == "array":
        return f"array operation {op.attrs['fn']}"
    if op.opcode == "intrinsic":
        return f"{op.attrs['name']}()"
    return f"operation {op.opcode}"
