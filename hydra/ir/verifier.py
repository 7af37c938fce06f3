"""The one IR verifier.  Tests run it after every pass.

Checks, for any stage: every opcode is known and its op keeps the contract of
its ``OPCODES`` entry (operand and result counts, required attributes, optional
ones only from ``ATTRS`` and on the opcodes they belong to; loads and stores take
one index per axis; intrinsics their table entry's arity); every value is defined
before it is used and only where it is visible (an op sees the values defined
earlier in its region and in the regions around it); each region ends in the right
terminator; ``if``/``while`` regions yield as many values, of the same types, as
the op has results; every ``tape_pop`` pops records of the types a ``tape_push`` of its
tape pushes (``hydra.grad``).  With ``predicated=True`` it also checks the guarantees of
linearization: no ``if`` or ``while`` depends on a varying value, every op that
``Op.needs_mask`` (side effects, traps, cross-lane reads: the rule linearize
follows) carries a mask, and no ``exit_flags`` are left.
"""

from __future__ import annotations

from ..errors import HydraError
from ..intrinsics import INTRINSICS
from .core import ATTRS, OPCODES, Function, Op, Region, Value


class VerifyError(HydraError):
    """The IR broke one of its invariants: a compiler bug, never a user error."""


def verify(fn: Function, predicated: bool = False) -> None:
    check = _Verifier(fn, predicated)
    check.region(fn.body, {p.id for p in fn.params}, "yield")
    check.tapes()


class _Verifier:
    def __init__(self, fn: Function, predicated: bool) -> None:
        self.fn = fn
        self.predicated = predicated

    def fail(self, op: Op | None, msg: str) -> None:
        where = f" at {op.opcode} ({op.loc})" if op is not None else ""
        raise VerifyError(f"IR of {self.fn.name} is invalid{where}: {msg}")

    def tapes(self) -> None:
        pushed: dict = {}
        for op in self.fn.walk():
            if op.opcode == "tape_push":
                pushed.setdefault(op.attrs["tape"], [v.type for v in op.operands])
        for op in self.fn.walk():
            if op.opcode == "tape_pop":
                types = pushed.get(op.attrs["tape"])
                if types is None:
                    self.fail(op, f"tape {op.attrs['tape']} is popped but never pushed")
                if types != [r.type for r in op.results]:
                    self.fail(op, f"pops {[str(r.type) for r in op.results]} from tape "
                                  f"{op.attrs['tape']}, which holds {[str(t) for t in types]}")

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
            self.contract(op)
            self.structure(op, visible)
            if self.predicated:
                self.predication(op)
            visible = visible | {r.id for r in op.results}

    def contract(self, op: Op) -> None:
        info = OPCODES[op.opcode]
        operands, results = info.operands, info.results
        if op.opcode in ("load", "store"):
            array = op.operands[0].type if op.operands else None
            operands = getattr(array, "ndim", -9) + (1 if op.opcode == "load" else 2)
        elif op.opcode == "intrinsic":
            entry = INTRINSICS.get(op.attrs.get("name"))
            if entry is None:
                self.fail(op, f"unknown intrinsic {op.attrs.get('name')!r}")
            operands, results = entry.nargs, 0 if entry.effect else 1
        if operands is not None and len(op.operands) != operands:
            self.fail(op, f"{len(op.operands)} operands where it takes {operands}")
        if results is not None and len(op.results) != results:
            self.fail(op, f"{len(op.results)} results where it has {results}")
        for name in info.attrs:
            if name not in op.attrs:
                self.fail(op, f"attribute {name!r} missing")
        for name in op.attrs:
            where = ATTRS[name][0] if name in ATTRS else ()
            if name not in info.attrs and where is not None and op.opcode not in where:
                self.fail(op, f"attribute {name!r} does not belong on {op.opcode}")
        if self.predicated and "exit_flags" in op.attrs:
            self.fail(op, "exit_flags left after linearization")

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
