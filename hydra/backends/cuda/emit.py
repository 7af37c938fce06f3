"""Per-lane scalar Python source for one IR op, for a ``numba.cuda.jit`` kernel.

Takes: ops of the structured or the predicated IR, one at a time, and a ``Frame``
saying how each array is laid out.  Guarantees: the emitted statements compute
exactly what the host rules (``hydra/executor/rules.py``) compute for one lane, both when
numba compiles them for a GPU and when the CUDA simulator runs them as Python with
NumPy scalars.  That is why every result is wrapped in its NumPy type (``np.int32(a
+ b)``): numba widens small integers and the wrap brings them back; NumPy scalars
already wrap; shifts and float->int casts are guarded where the two would differ
(LLVM leaves out-of-range shifts undefined; the simulator cannot cast NaN).

Runtime errors go through an error buffer ``err[lane, 0:3]``: the failing lane
counts itself in ``err[N, 0]``, writes a 1-based *site* number and up to two
payload values (an index and a size) and returns, so a failing kernel never hangs;
the host reads the one counter after a launch and the rows only if it is set.
``ErrorSites`` remembers each site's kind, message and source location, and the
host turns the first failure (lowest site, then lowest lane) into the numpy
backend's exception.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field

import numpy as np

from ...errors import RUNTIME_ERRORS, Loc
from ...executor.scalars import MATH as SCALAR_MATH
from ...intrinsics import INTRINSICS, lowers
from ...ir.core import Op, Value
from ...types import ArrayType, ScalarType
from . import device

_INFIX = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "bitand": "&", "bitor": "|",
          "bitxor": "^", "floordiv": "//", "mod": "%"}
_COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
#: opcodes spelled as one expression (operands ``{0}``, ``{1}``) in the result's NumPy type
_TYPED = {**{n: f"{{0}} {s} {{1}}" for n, s in _INFIX.items()}, "neg": "-{0}", "invert": "~{0}",
          "abs": "abs({0})", "min": "{1} if {1} < {0} else {0}",
          "max": "{1} if {1} > {0} else {0}"}
#: math functions: the reference's NumPy ufunc (numba-cuda implements these in device
#: code), else the helpers of ``device.py`` (NumPy's special values on both targets), abs
#: and Python's math
MATH = {**{fn: f"np.{f.__name__}" for fn, f in SCALAR_MATH.items() if isinstance(f, np.ufunc)},
        **{fn: f"dev.{fn}" for fn in device.MATH}, "fabs": "abs",
        **{fn: f"math.{fn}" for fn in ("copysign", "isinf", "isfinite", "erf", "erfc")}}


#: the math functions ``expr`` lowers: the table and pow (as ``**``, or ``ipow``)
NATIVE_MATH = frozenset(MATH) | {"pow"}
#: the opcodes ``OpEmitter.expr`` spells as one expression (the others have ``op_*``)
EXPR_OPS = frozenset(_TYPED) | frozenset(_COMPARE) | {
    "pow", "lshift", "rshift", "not", "const", "undef", "cast", "select", "math", "entry_mask",
    "array_dim", "intrinsic"}


def np_type(t: ScalarType) -> str:
    return "bool" if t.name == "bool" else f"np.{t.name}"


def literal(value, t: ScalarType) -> str:
    """Source of a constant of type ``t``."""
    if t.name == "bool":
        return "True" if value else "False"
    if t.kind == "f":  # (nan, inf and -inf: math's constants)
        text = repr(float(value)).replace("nan", "math.nan").replace("inf", "math.inf")
        return f"np.{t.name}({text})"
    return f"np.{t.name}({int(value)})"


@dataclass
class ErrorSites:
    """The error sites of one kernel module, numbered from 1 in program order."""

    sites: list[tuple[str, str, Loc, bool]] = field(default_factory=list)

    def add(self, kind: str, message: str, loc: Loc, names_lane: bool = True) -> int:
        self.sites.append((kind, message, loc, names_lane))
        return len(self.sites)

    def raise_first(self, err: np.ndarray) -> None:
        """Raise the numpy backend's exception for the first failure in ``err``
        (the per-lane rows of the error buffer; a lane that counts itself writes its row)."""
        failed = np.nonzero(err[:, 0])[0]
        lane = int(min(failed, key=lambda i: (err[i, 0], i)))
        kind, message, loc, names_lane = self.sites[int(err[lane, 0]) - 1]
        message = message.format(int(err[lane, 1]), int(err[lane, 2]))
        raise RUNTIME_ERRORS[kind](message, lane if names_lane else None, loc)


@dataclass
class Frame:
    """How the values of one kernel are spelled.

    ``prefixed``: ids of arrays whose leading axis is the lane axis (varying
    arguments, per-lane arrays in device buffers); they are indexed ``a[lane, ...]``.
    ``readonly``: ids of arrays that must not be stored into.
    ``contract``: float products may fuse with a sum into one FMA (``fastmath``);
    otherwise they are spelled as separately rounded operations, which NVVM never
    contracts (it would by default, and the result would differ from NumPy's).
    """

    sites: ErrorSites
    boundscheck: bool = True
    contract: bool = False
    prefixed: set[int] = field(default_factory=set)
    readonly: set[int] = field(default_factory=set)

    @classmethod
    def of(cls, options: dict) -> "Frame":
        """The frame of a new kernel compiled with the kernel's ``options``."""
        return cls(ErrorSites(), options.get("boundscheck", True), bool(options.get("fastmath")))


def ident(text: str) -> str:
    """``text`` made a Python identifier (function names like ``<lambda>``)."""
    return re.sub(r"\W", "_", text)


def renumber(source: str) -> str:
    """Value names numbered from 0 in order of appearance: stable text for dumps."""
    numbers: dict[str, int] = {}

    def sub(m):
        return f"{m.group(1) or ''}v{numbers.setdefault(m.group(2), len(numbers))}"
    return re.sub(r"\b(in_|out_)?v(\d+)\b", sub, source)


def name(v: Value) -> str:
    return f"v{v.id}"


class OpEmitter:
    """Emits the statements of one op (no regions) as lines at the current indent."""

    def __init__(self, frame: Frame) -> None:
        self.frame = frame
        self.lines: list[str] = []
        self.depth = 1
        self.temps = 0
        self.last_line = -1
        #: values of const ops (sizes of per-lane arrays must be constants)
        self.constants: dict[int, object] = {}

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    @contextlib.contextmanager
    def block(self, header: str):
        """The lines emitted inside, indented under ``header``."""
        self.line(header)
        self.depth += 1
        yield
        self.depth -= 1

    def masked(self, op: Op):
        """A masked op's lines under ``if mask:``."""
        return contextlib.nullcontext() if op.mask is None else self.block(f"if {name(op.mask)}:")

    def fail(self, kind: str, message: str, loc: Loc, *payload: str,
             names_lane: bool = True) -> None:
        """Record a failure of this lane and leave the kernel."""
        site = self.frame.sites.add(kind, message, loc, names_lane)
        self.line("cuda.atomic.add(err, (N, 0), 1)")
        self.line(f"err[lane, 0] = {site}")
        for k, p in enumerate(payload[:2]):
            self.line(f"err[lane, {k + 1}] = {p}")
        self.line("return")

    # --- the kernel around the ops -------------------------------------------------------

    def take(self, v: Value, arg: str) -> None:
        """``v`` from the kernel parameter ``arg``: an array as it is (a varying one has
        the lane axis first), a varying number at ``[lane]``, a uniform one as it is."""
        if isinstance(v.type, ArrayType):
            if v.varying:
                self.frame.prefixed.add(v.id)
            self.line(f"{name(v)} = {arg}")
        elif v.varying:
            self.line(f"{name(v)} = {np_type(v.type)}({arg}[lane])")
        else:
            self.line(f"{name(v)} = {np_type(v.type)}({arg})")

    def kernel(self, entry: str, params: list[str], outputs) -> str:
        """The kernel function ``entry`` around the lines emitted: lanes from N on
        return at once; each (output parameter, value) of ``outputs`` is stored at
        ``[lane]``, or a uniform value at ``[0]`` by lane 0."""
        lines = [f"def {entry}(N, {', '.join(params + ['err'])}):",
                 "    lane = cuda.grid(1)", "    if lane >= N:", "        return"]
        lines += self.lines + [f"    {out}[lane] = {name(v)}" if v.varying else
                               f"    if lane == 0:\n        {out}[0] = {name(v)}"
                               for out, v in outputs]
        return renumber("\n".join(lines)) + "\n"

    # --- one op ------------------------------------------------------------------------

    def emit(self, op: Op) -> None:
        if op.opcode == "const":
            self.constants[op.result.id] = op.attrs["value"]
        elif op.loc is not None and op.loc.line != self.last_line:
            # the user's line above the code made from it
            self.last_line = op.loc.line
            self.line(f"# {op.loc.line}: {op.loc.source_line().strip()}")
        special = getattr(self, "op_" + op.opcode, None)
        if special is not None:
            special(op)
            return
        self.line(f"{name(op.result)} = {self.expr(op)}")

    def expr(self, op: Op) -> str:
        """The expression of a pure scalar op."""
        o = [name(v) for v in op.operands]
        t = op.results[0].type
        n = op.opcode
        if n in _COMPARE:
            return f"bool({o[0]} {_COMPARE[n]} {o[1]})"
        if n in ("add", "sub", "mul") and t.kind == "f" and not self.frame.contract:
            return f"{np_type(t)}(dev.{n}_rn{t.bits}({o[0]}, {o[1]}))"
        if n == "pow" or (n == "math" and op.attrs["fn"] == "pow"):
            if t.kind in "iu":
                return f"{np_type(t)}(dev.ipow({o[0]}, {o[1]}, {np_type(t)}(1)))"
            return f"{np_type(t)}({o[0]} ** {o[1]})"
        if n in ("lshift", "rshift"):
            return self.shift(n, o, t)
        if n in ("not", "invert") and t.name == "bool":
            return f"not {o[0]}"
        if n in _TYPED:  # (floordiv and mod have op_ methods: divide)
            return f"{np_type(t)}({_TYPED[n].format(*o)})"
        if n == "const":
            return literal(op.attrs["value"], t)
        if n == "undef":
            return literal(0, t) if isinstance(t, ScalarType) else "None"
        if n == "cast":
            return self.cast(o[0], op.operands[0].type, t)
        if n == "select":
            inner = f"{o[1]} if {o[0]} else {o[2]}"
            return f"{np_type(t)}({inner})" if isinstance(t, ScalarType) else f"({inner})"
        if n == "math":
            return f"{np_type(t)}({MATH[op.attrs['fn']]}({', '.join(o)}))"
        if n == "entry_mask":
            return "True"
        if n == "array_dim":
            axis = op.attrs["axis"] + (1 if op.operands[0].id in self.frame.prefixed else 0)
            return f"np.int64({o[0]}.shape[{axis}])"
        if n == "intrinsic" and op.attrs.get("chunk_local") and op.attrs["name"] == "lanemax":
            # hydra.grad's bound on a loop's reverse trips (``lanemax`` of the trip
            # counts): any upper bound of this lane's is right, and one thread is one lane
            return f"{np_type(t)}({o[0]})"
        if n == "intrinsic":
            return INTRINSICS[op.attrs["name"]].lowerings["cuda"](op)
        raise AssertionError(f"{n} is not in EXPR_OPS")

    @staticmethod
    def shift(n: str, o: list[str], t: ScalarType) -> str:
        a, b = o
        T = np_type(t)
        # NumPy: a shift by >= the width (or a negative count) gives 0 (or -1 for a
        # negative a shifted right); LLVM leaves it undefined, so guard it
        if n == "lshift":
            return f"({T}({a} << {b}) if 0 <= {b} < {t.bits} else {T}(0))"
        outside = f"({T}(-1) if {a} < 0 else {T}(0))" if t.kind == "i" else f"{T}(0)"
        return f"({T}({a} >> {b}) if 0 <= {b} < {t.bits} else {outside})"

    @staticmethod
    def cast(x: str, src, t: ScalarType) -> str:
        if t.name == "bool":
            return f"bool({x} != 0)"
        if src.kind == "f" and t.kind in "iu":
            return OpEmitter.float_to_int(x, t)
        return f"{np_type(t)}({x})"

    @staticmethod
    def float_to_int(x: str, t: ScalarType) -> str:
        """NumPy's float->int cast on x86, spelled so that a GPU (whose conversions
        saturate) and the simulator (which cannot convert NaN) both give it: int32
        and int64 take their minimum for NaN and out-of-range values (cvttsd2si),
        8- and 16-bit types go through int32 and wrap, unsigned 32- and 64-bit ones
        as ``scalars.float_to_unsigned`` says."""
        def guarded(bits: int, x: str = x) -> str:
            edge = float(2 ** (bits - 1))
            return (f"(np.int{bits}({x}) if {-edge!r} <= {x} < {edge!r} "
                    f"else np.int{bits}({-2 ** (bits - 1)}))")
        if t.name in ("int64", "int32"):
            return guarded(t.bits)
        if t.name in ("uint64", "uint32"):
            # scalars.float_to_unsigned: from 2**(B-1) on, x - 2**(B-1) with the
            # top bit flipped
            half = float(2 ** (t.bits - 1))
            high = f"({guarded(t.bits, f'({x} - {half!r})')} ^ np.int{t.bits}({-int(half)}))"
            return f"{np_type(t)}({high} if {x} >= {half!r} else {guarded(t.bits)})"
        return f"{np_type(t)}({guarded(32)})"

    # --- ops with statements -----------------------------------------------------------

    def divide(self, op: Op) -> None:
        t = op.result.type
        a, b = (name(v) for v in op.operands)
        r = name(op.result)
        if t.kind not in "iu":
            self.line(f"{r} = {np_type(t)}({a} {_INFIX[op.opcode]} {b})")
            return
        word = "division" if op.opcode == "floordiv" else "modulo"
        with self.block(f"if {b} == 0:"):
            with self.masked(op):
                self.fail("zerodiv", f"integer {word} by zero", op.loc)
            self.line(f"{r} = {np_type(t)}(0)")
        self.line("else:")
        self.line(f"    {r} = {np_type(t)}({a} {_INFIX[op.opcode]} {b})")

    op_floordiv = divide
    op_mod = divide

    def index(self, op: Op) -> str:
        """Bounds-check and wrap the indices of a load/store; the subscript text."""
        array = op.operands[0]
        a = name(array)
        lead = 1 if array.id in self.frame.prefixed else 0
        subs = ["lane"] if lead else []
        for axis, v in enumerate(op.operands[1:1 + array.type.ndim]):
            i = name(v)
            n = f"{a}.shape[{axis + lead}]"
            self.temps += 1
            j = f"i{self.temps}"
            self.line(f"{j} = np.int64({i})")
            if self.frame.boundscheck:
                with self.block(f"if {j} < -{n} or {j} >= {n}:"):
                    self.fail("index", f"index {{0}} is out of bounds for axis {axis} with "
                              f"size {{1}}", op.loc, j, n)
            self.line(f"if {j} < 0:")
            self.line(f"    {j} += {n}")
            subs.append(j)
        return ", ".join(subs)

    def op_load(self, op: Op) -> None:
        t = op.result.type
        with self.masked(op):
            sub = self.index(op)
            self.line(f"{name(op.result)} = {np_type(t)}({name(op.operands[0])}[{sub}])")
        if op.mask is not None:
            self.line("else:")
            self.line(f"    {name(op.result)} = {literal(0, t)}")

    def op_store(self, op: Op) -> None:
        array = op.operands[0]
        with self.masked(op):
            if array.id in self.frame.readonly:
                # the reference names no lane here: the array, not a lane, is at fault
                self.fail("value", f"cannot store into the read-only array "
                          f"{array.name or ''}".rstrip(), op.loc, names_lane=False)
            else:
                sub = self.index(op)
                self.line(f"{name(array)}[{sub}] = {name(op.operands[-1])}")

    def op_count(self, op: Op) -> None:
        """hydra.profile's counter (passes/instrument): a lane is cuda's unit of issue
        (warps diverge in hardware), so each lane that runs the region adds one."""
        arr, site = name(op.operands[0]), op.attrs["site"]
        with self.masked(op):
            for col in range(3):
                self.line(f"cuda.atomic.add({arr}, ({site}, {col}), 1)")

    def op_check(self, op: Op) -> None:
        with self.masked(op), self.block(f"if not {name(op.operands[0])}:"):
            self.fail(op.attrs["kind"],
                      op.attrs["message"].replace("{", "{{").replace("}", "}}"), op.loc)

    def op_local_array(self, op: Op) -> None:
        """A per-lane array of constant shape (``structured.fits``: its size operands
        are constants, emitted before it) in the thread's local memory."""
        dims = [int(self.constants[v.id]) for v in op.operands]
        dtype = op.attrs["dtype"]
        r = name(op.result)
        kind = "np.bool_" if dtype == "bool" else f"np.{dtype}"
        self.line(f"{r} = cuda.local.array(({''.join(f'{d}, ' for d in dims)}), {kind})")
        fill = literal(op.attrs["fill"] or 0, ScalarType(str(np.dtype(dtype))))
        k = f"k{op.result.id}"
        self.line(f"for {k} in range({int(np.prod(dims))}):")
        # the row-major index of k: axis a's stride is the product of the sizes after it
        index = ", ".join(f"({k} // {int(np.prod(dims[a + 1:]))}) % {d}"
                          for a, d in enumerate(dims))
        self.line(f"    {r}[{index}] = {fill}")


# --- the cuda lowerings of the lane-local intrinsics: (op) -> the per-lane expression
# (``lane`` is the thread's global index, ``N`` the kernel's lane count).  Cross-lane
# intrinsics have none: they are sync points, which the host runs between two kernels
# by their reference (the simulator has no warp shuffles, ballots or grid sync). ---------

@lowers("cuda", "lane")
def _lane(op: Op) -> str:
    return f"{np_type(op.result.type)}(lane)"


@lowers("cuda", "nlanes")
def _nlanes(op: Op) -> str:
    return f"{np_type(op.result.type)}(N)"
