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
from dataclasses import KW_ONLY, dataclass, field
from typing import Iterator

from ..arraylib import MAKERS
from ..batching import PER_LANE
from ..errors import Loc
from ..intrinsics import INTRINSICS, PARAM_KINDS
from ..types import ArrayType, Type

#: every operand (of an op that takes any number of them)
ALL = "all"


@dataclass(frozen=True, slots=True)
class Memory:
    """What an op does to the memory of its operands, declared once per opcode (and per
    ``array`` fn, per intrinsic); ``hydra.effects`` follows these and nothing else.

    reads, writes: the operand positions (or ``ALL``) whose array the op reads / writes
    (a number operand has no memory: reading one is not declared; a varying number
    parameter is read whole by ``hydra.effects`` itself).
    aliases: the operand positions whose array the result may be, or be a view of (a
    write through the result lands in it; a read of the result reads it).  A number
    result is no view: ``Op.memory`` turns such aliases into reads.
    carries: the results (and region arguments) are the values the op's regions yield
    (``if``: its arms'; ``while``: its initial, passed-on and yielded carried values).
    """

    reads: tuple[int, ...] | str = ()
    writes: tuple[int, ...] | str = ()
    aliases: tuple[int, ...] | str = ()
    carries: bool = False


#: touches no array memory (numbers in, a number or a new array out)
PURE = Memory()
#: reads every operand's array, the result is new
READS = Memory(reads=ALL)
#: the result is (a view of) operand 0: a reshape, a transpose, basic indexing
VIEW = Memory(aliases=(0,))
#: the opcode's own memory depends on its fn / intrinsic name (``ARRAY_MEMORY``, ``Op.memory``)
BY_NAME = Memory(reads=ALL, writes=ALL, aliases=ALL)


@dataclass(frozen=True, slots=True)
class OpInfo:
    """Schema of an opcode; the verifier checks it.

    effect: has a side effect (never removed; carries a mask after linearize).
    traps:  may raise for some operand values (carries a mask after linearize so that
            inactive lanes never raise).  ``Op.traps`` refines it (float // and % do
            not trap) and ``Op.needs_mask`` is the one mask rule linearize follows.
    regions: number of regions it owns.  terminator: ends a region.
    operands, results: how many (None: any number, or a rule of the op's own).
    attrs: the attributes it must have; ``ATTRS`` lists the optional ones that passes
    hand to each other.
    memory: what it reads and writes of its operands' arrays (``Memory``; required).
    """

    doc: str
    _: KW_ONLY
    memory: Memory
    effect: bool = False
    traps: bool = False
    regions: int = 0
    terminator: bool = False
    operands: int | None = None
    results: int | None = 1
    attrs: tuple[str, ...] = ()


_ARITH = {
    "add": "a + b", "sub": "a - b", "mul": "a * b", "truediv": "a / b (IEEE for floats)",
    "floordiv": "a // b; integer division by zero raises",
    "mod": "a % b with Python's sign; integer modulo by zero raises", "pow": "a ** b",
    "lshift": "a << b", "rshift": "a >> b", "bitand": "a & b", "bitor": "a | b",
    "bitxor": "a ^ b", "lt": "a < b", "le": "a <= b", "gt": "a > b", "ge": "a >= b",
    "eq": "a == b", "ne": "a != b", "min": "min(a, b)", "max": "max(a, b)",
}
_UNARY = {"neg": "-a", "invert": "~a", "not": "not a (bool)", "abs": "abs(a)"}
BINARY_OPS = frozenset(_ARITH)
UNARY_OPS = frozenset(_UNARY)

OPCODES: dict[str, OpInfo] = {
    **{name: OpInfo(doc, operands=2, memory=PURE, traps=name in ("floordiv", "mod"))
       for name, doc in _ARITH.items()},
    **{name: OpInfo(doc, operands=1, memory=PURE) for name, doc in _UNARY.items()},
    "const": OpInfo("a constant", operands=0, attrs=("value",), memory=PURE),
    "undef": OpInfo("a value of the result type that is never observed", operands=0,
                    memory=PURE),
    "cast": OpInfo("convert to the result type (float->int truncates toward zero)",
                   operands=1, memory=PURE),
    "select": OpInfo("per lane: c ? a : b", operands=3, memory=Memory(aliases=(1, 2))),
    "math": OpInfo("a math function fn (sqrt, exp, ...) of its 1 or 2 operands",
                   attrs=("fn",), memory=PURE),
    # the array itself: hydra.effects counts its accesses as the captured array's
    "global_array": OpInfo("a NumPy array captured at compile time", operands=0,
                           attrs=("array", "name"), memory=PURE),
    # the shape, which no write changes: not the array's memory
    "array_dim": OpInfo("size of an axis of an array", operands=1, attrs=("axis",),
                        memory=PURE),
    "local_array": OpInfo("a new per-lane array of shape operands", attrs=("dtype", "fill"),
                          memory=PURE),
    "load": OpInfo("array[indices] (one index per axis); out of bounds raises", traps=True,
                   memory=Memory(reads=(0,))),
    "store": OpInfo("array[indices] = value (one index per axis)", effect=True, traps=True,
                    results=0, memory=Memory(writes=(0,))),
    "array": OpInfo("a NumPy operation fn on whole arrays (SPEC section 8) with its static "
                    "arguments params; hydra.batching has its per-lane definition and its "
                    "batching rule", attrs=("fn", "params"), memory=BY_NAME),
    "array_store": OpInfo("array[index] = value for sub-arrays (params: the static index; "
                          "the int operands after the value fill its dynamic places)",
                          effect=True, traps=True, results=0, attrs=("fn", "params"),
                          memory=Memory(reads=(1,), writes=(0,))),
    "intrinsic": OpInfo("a lane intrinsic from hydra.intrinsics, whose table entry gives "
                        "its arity, result and facts", attrs=("name",), results=None,
                        memory=BY_NAME),
    "print": OpInfo("print per active lane in lane order", effect=True, results=0,
                    attrs=("parts", "sep", "end"), memory=READS),
    "check": OpInfo("raise kind with message where the condition is false", effect=True,
                    traps=True, operands=1, results=0, attrs=("kind", "message"),
                    memory=PURE),
    "any": OpInfo("uniform: is any lane of the mask on", operands=1, memory=PURE),
    "entry_mask": OpInfo("the lanes that run the kernel", operands=0, memory=PURE),
    "if": OpInfo("structured if; regions: then, else; results: what they yield", regions=2,
                 operands=1, results=None, memory=Memory(carries=True)),
    "while": OpInfo("structured loop; operands: initial carried values; regions: before "
                    "(ends in condition), body (ends in yield); results: carried values at exit",
                    regions=2, results=None, memory=Memory(carries=True)),
    # hydra.grad's tape: the kernel's own private storage, no operand's array (so no
    # memory of an operand is touched); effects, so never removed and masked by linearize
    "tape_push": OpInfo("push its operands as one record per active lane onto tape "
                        "`tape` (hydra.grad: loop state the reverse sweep needs)",
                        effect=True, results=0, attrs=("tape",), memory=PURE),
    "tape_pop": OpInfo("pop each active lane's last record from tape `tape`: its values "
                       "(hydra.grad's reverse sweep, aligned with the forward loop: a "
                       "value pushed uniform pops uniform)", effect=True, operands=0,
                       results=None, attrs=("tape",), memory=PURE),
    # hydra.profile's counters (passes/instrument): the profiler's own storage, no memory
    # the kernel can see; an effect, so never removed and masked by linearize
    "count": OpInfo("add the active lanes of its mask to the profile counters of site "
                    "`site` (hydra.profile: one per region)", effect=True, operands=1,
                    results=0, attrs=("site",), memory=PURE),
    # what a terminator passes on, its op declares (carries); the kernel's own return
    # values hydra.effects counts as read (the backend copies them out)
    "yield": OpInfo("end of a region: its values", terminator=True, results=0, memory=PURE),
    "condition": OpInfo("end of a while's before region: continue?, carried values",
                        terminator=True, results=0, memory=PURE),
}

#: optional attributes, which passes hand to each other: name -> (opcodes, meaning)
ATTRS: dict[str, tuple[tuple[str, ...] | None, str]] = {
    "sync": (None, "a sync point (any op; set by syncpoints): why all lanes meet here"),
    "exit_flags": (("while",), "indices of the carried break/return flags (frontend -> "
                               "linearize, which removes it)"),
    "guard": (("if",), "an any-lane guard that linearize put around an arm"),
    "varying": (("while",), "a loop that repeats while any lane is active (linearize)"),
    "tie": (("select",), "np.maximum/np.minimum: where both sides are equal, each gets half "
                         "the gradient (hydra.grad)"),
    "stop_gradient": (("cast",), "hydra.stop_gradient(x): the value, with no gradient "
                                 "flowing back through it (hydra.grad)"),
    "chunk_local": (("intrinsic",), "a reduction hydra.grad makes for itself (a reverse "
                                    "sweep's trip count, any upper bound of the active "
                                    "lanes' counts is right): over any lanes that include "
                                    "this one is enough (a Dask chunk, never staged; a GPU "
                                    "thread's own lane)"),
    "_python": (("const",), "a Python int constant's exact value, which may exceed 64 bits "
                            "until it meets a type (frontend constant folding)"),
    "_numpy_layout": (("array",), "a written reshape reads the result, so its memory layout "
                                  "decides what the write reaches: NumPy's, never a fused "
                                  "loop's (uniformity)"),
}


#: array ops that reduce over the active lanes (lanesum of an array, ...): cross-lane, the
#: cross-lane intrinsics of a value applied to arrays, and ``lanesum(np.outer(d, x))``
LANE_ARRAY_FNS = frozenset({name for name, entry in INTRINSICS.items()
                            if entry.cross_lane and not entry.effect} | {"lanesum_outer"})

#: array ops worth running on the active lanes' rows only (products, convolutions)
HEAVY_ARRAY_FNS = frozenset({"matmul", "dot", "conv2d", "max_pool2d", "conv2d_grad_input",
                             "conv2d_grad_weight", "max_pool2d_grad", "avg_pool2d",
                             "avg_pool2d_grad"})

#: per ``array`` fn (each one ``hydra.batching`` defines per lane, and the cross-lane
#: ones): what it does to its operands' arrays (``Memory``).  An operation reads its
#: operands and computes a new array (``hydra.arraylib``'s views are spelled as reshapes,
#: copies and basic indexing by the frontend), except: the ``*_like`` family, ``arange``,
#: ``full`` and arraylib's makers (eye, linspace) read only shapes and numbers; views are
#: (views of) operand 0 (``hydra.views.VIEW_FNS``: NumPy may copy a reshape, which
#: ``hydra.effects`` asks ``views`` about); ``np.einsum`` may return a writeable view of
#: an operand (``'ii->i'``), so it reads and may be each.
ARRAY_MEMORY: dict[str, Memory] = {
    **{fn: READS for fn in (*PER_LANE, *LANE_ARRAY_FNS)},
    **{fn: PURE for fn in ("zeros_like", "ones_like", "empty_like", "full_like", "arange",
                           "full", *MAKERS)},
    **{fn: VIEW for fn in ("getitem", "reshape", "transpose")},
    "einsum": Memory(reads=ALL, aliases=ALL),
}


def intrinsic_memory(name: str) -> Memory:
    """An intrinsic reads its array arguments (``PARAM_KINDS``: "1-d array") and, if it
    has an effect (``atomic_add``), writes them; its other arguments are numbers (an
    effect on no array argument would be undeclared: a test checks there is none)."""
    entry = INTRINSICS[name]
    arrays = tuple(i for i, p in enumerate(entry.params) if "array" in PARAM_KINDS[p])
    return Memory(reads=arrays, writes=arrays if entry.effect else ())


def _positions(which: tuple[int, ...] | str, n: int) -> tuple[int, ...]:
    return tuple(range(n)) if which == ALL else which

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
        if self.opcode == "array":  # a gather at computed indices checks its bounds
            return self.attrs["fn"] == "getitem" and len(self.operands) > 1
        return OPCODES[self.opcode].traps

    @property
    def cross_lane(self) -> bool:
        """Reads (or writes for) other lanes: a sync point, run with all lanes at once."""
        if self.opcode == "array":
            return self.attrs["fn"] in LANE_ARRAY_FNS
        return self.opcode == "intrinsic" and INTRINSICS[self.attrs["name"]].cross_lane

    @property
    def needs_mask(self) -> bool:
        """Must carry the mask of the lanes that run it after linearize (so inactive
        lanes never write, raise, or take part in a cross-lane op); the verifier checks
        what linearize guarantees by this same rule.  A heavy array operation (a
        product, a convolution) carries it too: the host runs it on the active lanes'
        rows only where few lanes are active (compaction, SPEC section 8)."""
        return self.effect or self.traps or self.cross_lane or (
            self.opcode == "array" and self.attrs["fn"] in HEAVY_ARRAY_FNS)

    @property
    def memory(self) -> Memory:
        """What this op reads and writes of its operands' arrays, its declaration
        (``OpInfo.memory``, ``ARRAY_MEMORY``, an intrinsic's array arguments) with the
        positions spelled out.  A number result is no view: what it may alias, it read."""
        if self.opcode == "array":
            m = ARRAY_MEMORY[self.attrs["fn"]]
        elif self.opcode == "intrinsic":
            m = intrinsic_memory(self.attrs["name"])
        else:
            m = OPCODES[self.opcode].memory
        n = len(self.operands)
        reads, writes = _positions(m.reads, n), _positions(m.writes, n)
        aliases = _positions(m.aliases, n)
        if aliases and not all(isinstance(r.type, ArrayType) for r in self.results):
            reads, aliases = tuple(sorted(set(reads) | set(aliases))), ()
        return Memory(reads, writes, aliases, m.carries)

    @property
    def written_array(self) -> Value | None:
        """The array this op writes, if any (its ``memory`` declaration)."""
        writes = self.memory.writes
        return self.operands[writes[0]] if writes else None


def passes_on(op: Op) -> list[tuple[Value, Value, Op]]:
    """The values an ``if`` or a ``while`` passes on (``Memory.carries``), as (to, from,
    at: the op whose operand ``from`` is): an if's results from its arms' yields; a
    while's before-region arguments from its initial values (at the while) and its
    body's yield, its body arguments and results from what its condition passes on."""
    if op.opcode == "if":
        return [(r, y, arm.terminator) for arm in op.regions
                for r, y in zip(op.results, arm.terminator.operands)]
    before, body = op.regions
    cond, end = before.terminator, body.terminator
    return [*((a, v, op) for a, v in zip(before.args, op.operands)),
            *((a, v, end) for a, v in zip(before.args, end.operands)),
            *((a, v, cond) for a, v in zip(body.args, cond.operands[1:])),
            *((r, v, cond) for r, v in zip(op.results, cond.operands[1:]))]


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
