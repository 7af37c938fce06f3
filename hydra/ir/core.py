"""The IR: typed, structured SSA with uniform/varying marks and source locations.

A ``Function`` owns one ``Region``.  A region is a list of ``Op``s ending in a
terminator (``yield`` or ``condition``) and has block arguments.  Control flow is
*structured*, as in MLIR's ``scf`` dialect: an ``if`` op owns a then- and an
else-region and its results are what they yield (the phis of the join); a
``while`` op owns a ``before`` region (which computes the condition and ends in
``condition``) and a ``body`` region, and its loop-carried values are the block
arguments of both.  Python's source is structured, and ``break``, ``continue``
and ``return`` are turned into flag variables by the frontend, so this loses
nothing and makes every pass a local rewrite of one region.

Every ``Value`` has a type, a ``varying`` mark (None until the uniformity pass
runs) and a source location.  Ops are generic (operands, results, attributes,
regions, an optional ``mask``) and every opcode is described once, in ``OPCODES``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Iterator

from ..errors import Loc
from ..intrinsics import INTRINSICS
from ..types import Type


@dataclass(frozen=True, slots=True)
class OpInfo:
    """Schema of an opcode.

    effect: has a side effect (must not be removed, must carry a mask after linearize).
    traps:  may raise for some operand values (must carry a mask after linearize so
            that inactive lanes never raise).
    regions: number of regions it owns.
    terminator: ends a region.
    """

    doc: str
    effect: bool = False
    traps: bool = False
    regions: int = 0
    terminator: bool = False


_ARITH = {
    "add": "a + b", "sub": "a - b", "mul": "a * b", "truediv": "a / b (IEEE for floats)",
    "floordiv": "a // b", "mod": "a % b (Python sign rules)", "pow": "a ** b",
    "lshift": "a << b", "rshift": "a >> b", "bitand": "a & b", "bitor": "a | b",
    "bitxor": "a ^ b", "lt": "a < b", "le": "a <= b", "gt": "a > b", "ge": "a >= b",
    "eq": "a == b", "ne": "a != b", "min": "min(a, b)", "max": "max(a, b)",
}
BINARY_OPS = frozenset(_ARITH)
COMPARE_OPS = frozenset({"lt", "le", "gt", "ge", "eq", "ne"})
UNARY_OPS = frozenset({"neg", "invert", "not", "abs"})

OPCODES: dict[str, OpInfo] = {
    **{name: OpInfo(doc) for name, doc in _ARITH.items()},
    "floordiv": OpInfo("a // b; integer division by zero raises", traps=True),
    "mod": OpInfo("a % b with Python's sign; integer modulo by zero raises", traps=True),
    "neg": OpInfo("-a"),
    "invert": OpInfo("~a"),
    "not": OpInfo("not a (bool)"),
    "abs": OpInfo("abs(a)"),
    "const": OpInfo("a constant; attrs: value"),
    "undef": OpInfo("a value of the result type that is never observed"),
    "cast": OpInfo("convert to the result type (float->int truncates toward zero)"),
    "select": OpInfo("per lane: c ? a : b"),
    "math": OpInfo("a math function; attrs: fn (sqrt, exp, ...)"),
    "global_array": OpInfo("a NumPy array captured at compile time; attrs: array, name"),
    "array_dim": OpInfo("size of an axis of an array; attrs: axis"),
    "local_array": OpInfo("a new per-lane array of shape operands; attrs: dtype, fill"),
    "load": OpInfo("array[indices]; out of bounds raises", traps=True),
    "store": OpInfo("array[indices] = value", effect=True, traps=True),
    "intrinsic": OpInfo("a lane intrinsic from hydra.intrinsics; attrs: name"),
    "print": OpInfo("print per active lane in lane order; attrs: parts, sep, end", effect=True),
    "check": OpInfo("raise attrs.kind with attrs.message where the condition is false",
                    effect=True, traps=True),
    "any": OpInfo("uniform: is any lane of the mask on"),
    "entry_mask": OpInfo("the lanes that run the kernel"),
    "if": OpInfo("structured if; regions: then, else; results: what they yield", regions=2),
    "while": OpInfo("structured loop; operands: initial carried values; regions: before "
                    "(ends in condition), body (ends in yield); results: carried values at exit",
                    regions=2),
    "yield": OpInfo("end of a region: its values", terminator=True),
    "condition": OpInfo("end of a while's before region: continue?, carried values",
                        terminator=True),
}


_ids = itertools.count()


@dataclass(slots=True, eq=False)
class Value:
    """An SSA value.  ``varying`` is None until the uniformity pass marks it."""

    type: Type
    loc: Loc
    name: str = ""
    varying: bool | None = None
    id: int = field(default_factory=lambda: next(_ids))

    def __repr__(self) -> str:
        return f"%{self.name or self.id}"


@dataclass(slots=True, eq=False)
class Op:
    opcode: str
    operands: list[Value]
    results: list[Value]
    loc: Loc
    attrs: dict = field(default_factory=dict)
    regions: list["Region"] = field(default_factory=list)
    mask: Value | None = None

    @property
    def info(self) -> OpInfo:
        return OPCODES[self.opcode]

    @property
    def result(self) -> Value:
        assert len(self.results) == 1, self.opcode
        return self.results[0]

    def inputs(self) -> list[Value]:
        """Operands and mask: every value this op reads directly."""
        return self.operands + ([self.mask] if self.mask is not None else [])

    # --- op facts: the one definition every pass and backend reads ---------------------

    @property
    def effect(self) -> bool:
        """Has a side effect: never removed, runs only on its mask's lanes."""
        if self.opcode == "intrinsic":
            return INTRINSICS[self.attrs["name"]].effect
        return OPCODES[self.opcode].effect

    @property
    def traps(self) -> bool:
        """May raise for some operand values.  Float ``//`` and ``%`` never do (IEEE
        gives nan or inf); integer ones do on a zero divisor."""
        if self.opcode in ("floordiv", "mod"):
            return self.results[0].type.kind != "f"
        if self.opcode == "intrinsic":
            return INTRINSICS[self.attrs["name"]].traps
        return OPCODES[self.opcode].traps

    @property
    def cross_lane(self) -> bool:
        """Reads (or writes for) other lanes: a sync point, run with all lanes at once."""
        return self.opcode == "intrinsic" and INTRINSICS[self.attrs["name"]].cross_lane

    @property
    def needs_mask(self) -> bool:
        """Must carry the mask of the lanes that run it after linearize (so inactive
        lanes never write, raise, or take part in a cross-lane op); the verifier checks
        what linearize guarantees by this same rule."""
        return self.effect or self.traps or self.cross_lane

    @property
    def written_array(self) -> Value | None:
        """The array this op writes, if any."""
        if self.opcode == "store":
            return self.operands[0]
        if self.opcode == "intrinsic" and self.effect:
            return self.operands[INTRINSICS[self.attrs["name"]].params.index("a")]
        return None


@dataclass(slots=True, eq=False)
class Region:
    args: list[Value] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)

    @property
    def terminator(self) -> Op:
        return self.ops[-1]

    def walk(self) -> Iterator[Op]:
        """Every op in this region and the regions nested in it, outer first."""
        for op in self.ops:
            yield op
            for region in op.regions:
                yield from region.walk()


@dataclass(slots=True, eq=False)
class Function:
    name: str
    params: list[Value]
    param_names: list[str]
    body: Region
    loc: Loc
    #: facts passes attach for later stages and tools (e.g. sync points)
    notes: dict = field(default_factory=dict)

    def walk(self) -> Iterator[Op]:
        return self.body.walk()
