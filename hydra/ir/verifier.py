"""The one IR verifier.  Tests run it after every pass.

Checks, for any stage: every opcode is known; every value is defined before it
is used and only where it is visible (an op sees the values defined earlier in
its region and in the regions around it); each region ends in the right
terminator; ``if``/``while`` regions yield as many values, of the same types,
as the op has results.  With ``predicated=True`` it also checks the guarantee
of linearization: no ``if`` or ``while`` depends on a varying value, and every
op with a side effect or that may trap carries a mask.
"""

from __future__ import annotations

from ..errors import HydraError
from .core import OPCODES, Function, Op, Region, Value


class VerifyError(HydraError):
    """The IR broke one of its invariants: a compiler bug, never a user error."""


def verify(fn: Function, predicated: bool = False) -> None:
    _Verifier(fn, predicated).run()


class _Verifier:
    def __init__(self, fn: Function, predicated: bool) -> None:
        self.fn = fn
        self.predicated = predicated

    def fail(self, op: Op | None, msg: str) -> None:
        where = f" at {op.opcode} ({op.loc})" if op is not None else ""
        raise VerifyError(f"IR of {self.fn.name} is invalid{where}: {msg}")

    def run(self) -> None:
        self.region(self.fn.body, set(p.id for p in self.fn.params), "yield")

    def region(self, region: Region, visible: set[int], terminator: str) -> None:
        visible = visible | {a.id for a in region.args}
        if not region.ops or region.ops[-1].opcode != terminator:
            self.fail(None, f"region does not end in {terminator}")
        for i, op in enumerate(region.ops):
            if op.opcode not in OPCODES:
                self.fail(op, "unknown opcode")
            if OPCODES[op.opcode].terminator and i != len(region.ops) - 1:
                self.fail(op, "terminator in the middle of a region")
            for v in op.inputs():
                if not isinstance(v, Value):
                    self.fail(op, f"operand {v!r} is not a Value")
                if v.id not in visible:
                    self.fail(op, f"operand {v!r} used where it is not defined")
            if len(op.regions) != OPCODES[op.opcode].regions:
                self.fail(op, "wrong number of regions")
            self.structure(op, visible)
            if self.predicated:
                self.predication(op)
            visible = visible | {r.id for r in op.results}

    def structure(self, op: Op, visible: set[int]) -> None:
        if op.opcode == "if":
            for r in op.regions:
                if r.args:
                    self.fail(op, "if regions take no arguments")
                self.region(r, visible, "yield")
                self.same_types(op, r.terminator.operands, op.results)
        elif op.opcode == "while":
            before, body = op.regions
            self.same_types(op, op.operands, before.args)
            self.same_types(op, before.args, body.args)
            self.same_types(op, before.args, op.results)
            self.region(before, visible, "condition")
            self.region(body, visible, "yield")
            self.same_types(op, before.terminator.operands[1:], body.args)
            self.same_types(op, body.terminator.operands, before.args)

    def same_types(self, op: Op, a: list[Value], b: list[Value]) -> None:
        if [v.type for v in a] != [v.type for v in b]:
            self.fail(op, f"types differ: {[str(v.type) for v in a]} vs {[str(v.type) for v in b]}")

    def predication(self, op: Op) -> None:
        if op.opcode in ("if", "while"):
            cond = op.operands[0] if op.opcode == "if" else op.regions[0].terminator.operands[0]
            if cond.varying:
                self.fail(op, "branch on a varying value after linearization")
        if op.needs_mask and op.mask is None:
            self.fail(op, "side effect, trapping or cross-lane op without a mask")
