"""Random structured programs, written by hypothesis as Python source, run by hydra.

Each program is a function ``prog(x, y, n, a, out)``: ``x`` varying int64, ``y``
varying float64 or float32, ``n`` a uniform int, ``a`` a uniform (shared, read-only)
int64 array, ``out`` a shared int64 array each lane writes at its own index.  The
body nests ``if``/``elif``/``else``, ``while`` (trip counts bounded by a counter),
``for`` over ``range`` with uniform or varying bounds and steps, ``break``,
``continue`` and ``return``, integer and float arithmetic, short-circuit guards,
helper calls, tuple assignment, a per-lane local array and (sometimes) cross-lane
intrinsics.  In float32 programs every float stays float32 (NumPy 2 promotion), so
plain Python computes what hydra computes.

Undefined behaviour is kept out by construction: every assignment wraps its value
into a small range so products stay far from int64 overflow, shift counts are masked,
integer divisors are never zero, float divisors are at least 1, and ``int()`` only
sees bounded floats.  The numpy backend is checked against the per-lane oracle (the
plain Python function) when the program is lane-local, and always against the lockstep
AST interpreter of ``lockstep_oracle`` (cross-lane calls and the exact print order
included); every other available backend is checked against numpy.  A disagreement is
a bug in hydra (or in an oracle).
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import tempfile

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import BACKENDS, CUDA_MAX_LANES, check_against_oracle

#: examples per CI run; about 0.1 s each on the numpy backend
MAX_EXAMPLES = 150

HEADER = '''\
import math

import numpy as np

from hydra import lane, nlanes, lanesum, lanemax, lanemin, laneany, prefixsum


def helper(p, q):
    if p > q:
        return (p - q) % 97
    r = 0
    for k in range(q % 4):
        if k == p % 3:
            return r + k
        r += q
    return r


'''

#: cross-lane calls that are defined whichever lanes are active (broadcast and shuffle
#: may read an inactive lane, which is an error: tested in test_intrinsics)
CROSS_LANE = ("lanesum({})", "lanemax({})", "lanemin({})", "prefixsum({})",
              "int(laneany({} > 0))")


class Writer:
    """Draws one program, statement by statement, with the names in scope."""

    def __init__(self, draw, cross_lane: bool, float32: bool, top_only: bool = False) -> None:
        self.draw = draw
        self.cross_lane = cross_lane
        #: cross-lane calls and prints only in top-level statements (and in the ``masks``
        #: shape): the cuda backend then runs the structured form in segments, which
        #: programs with sync points under varying control flow never reach
        self.top_only = top_only
        self.top = True
        self.float32 = float32
        self.used_cross_lane = False
        self.ints = ["i0", "i1", "i2"]
        self.floats = ["f0", "f1"]
        self.counter = itertools.count()
        self.lines: list[str] = []

    def choice(self, options):
        return self.draw(st.sampled_from(options))

    def chance(self, p: float) -> bool:
        return self.draw(st.floats(0, 1)) < p

    # --- expressions ---------------------------------------------------------------

    def int_leaf(self) -> str:
        kind = self.choice(["var", "var", "lit", "x", "n", "lane", "load", "out"]
                           + ["cross"] * self.cross_ok())
        if kind == "cross":
            self.used_cross_lane = True
            return self.choice(CROSS_LANE).format(self.choice(self.ints))
        if kind == "var":
            return self.choice(self.ints)
        if kind == "lit":
            return str(self.draw(st.integers(-5, 20)))
        if kind == "lane":
            return "lane()"
        if kind == "load":
            return f"a[{self.choice(self.ints)} % len(a)]"
        if kind == "out":
            return "out[lane()]"
        return kind

    def int_expr(self, depth: int = 2) -> str:
        if depth == 0 or self.chance(0.3):
            return self.int_leaf()
        a, b = self.int_expr(depth - 1), self.int_expr(depth - 1)
        kind = self.choice(["+", "-", "*", "//", "%", ">>", "<<", "&", "|", "^", "min",
                            "max", "abs", "ifexp", "int", "helper", "cross", "floor"])
        if kind in ("+", "-", "*", "&", "|", "^"):
            return f"({a} {kind} {b})"
        if kind in ("//", "%"):
            divisor = self.choice([f"(abs({b}) % 5 + 1)", "3", "-4", f"(-1 - abs({b}) % 3)"])
            return f"({a} {kind} {divisor})"
        if kind == ">>":
            return f"({a} >> ({b} & 7))"
        if kind == "<<":
            return f"({a} << ({b} & 3))"
        if kind in ("min", "max"):
            return f"{kind}({a}, {b})"
        if kind == "abs":
            return f"abs({a})"
        if kind == "ifexp":
            return f"({a} if {self.cond(depth - 1)} else {b})"
        if kind == "int":
            return f"int({self.float_expr(depth - 1)} % 1000.0)"
        if kind == "floor":
            return f"math.floor({self.choice(self.floats)})"
        if kind == "helper":
            return f"helper({a}, {b} % 50)"
        if self.cross_ok():
            self.used_cross_lane = True
            return self.choice(CROSS_LANE).format(self.choice(self.ints))
        return a

    def cross_ok(self) -> bool:
        return self.cross_lane and (self.top or not self.top_only)

    def float_leaf(self) -> str:
        kind = self.choice(["var", "var", "lit", "y", "float", "buf"])
        if kind == "var":
            return self.choice(self.floats)
        if kind == "lit":
            lit = self.choice(["0.5", "-1.25", "3.0", "0.0", "-0.0", "1e-3"])
            # a float literal standing alone (min(f, 0.5), a return value) is a Python
            # float, float64, in Python: typed literals keep float32 programs float32
            return f"np.float32({lit})" if self.float32 else lit
        if kind == "float":
            return f"{'np.float32' if self.float32 else 'float'}({self.int_leaf()})"
        if kind == "buf":
            return f"buf[{self.choice(self.ints)} % 4]"
        return "y"

    def float_expr(self, depth: int = 2) -> str:
        if depth == 0 or self.chance(0.3):
            return self.float_leaf()
        a, b = self.float_expr(depth - 1), self.float_expr(depth - 1)
        kind = self.choice(["+", "-", "*", "/", "sqrt", "min", "max", "abs", "mixed",
                            "ifexp", "mod"])
        if kind in ("+", "-", "*"):
            return f"({a} {kind} {b})"
        if kind == "/":
            return f"({a} / (abs({b}) + 1.0))"
        if kind == "sqrt":
            if self.float32:  # math.sqrt gives a Python float, which is float64
                return f"np.sqrt(abs({a}))"
            return self.choice([f"math.sqrt(abs({a}))", f"np.sqrt(abs({a}))"])
        if kind in ("min", "max"):
            return f"{kind}({a}, {b})"
        if kind == "abs":
            return f"abs({a})"
        if kind == "mixed":  # float32 * int64 is float64: only weak ints in float32 programs
            return f"({a} * {self.draw(st.integers(-3, 3)) if self.float32 else self.int_leaf()})"
        if kind == "mod":
            return f"({a} % {self.choice(['7.5', '-2.0', '1.0'])})"
        return f"({a} if {self.cond(depth - 1)} else {b})"

    def cond(self, depth: int = 1) -> str:
        kind = self.choice(["icmp", "icmp", "fcmp", "chain", "and", "or", "not", "truthy",
                            "guard"])
        op = self.choice(["<", "<=", ">", ">=", "==", "!="])
        if kind == "icmp":
            return f"{self.int_expr(depth)} {op} {self.int_expr(depth)}"
        if kind == "fcmp":
            return f"{self.float_expr(depth)} {op} {self.float_expr(depth)}"
        if kind == "chain":
            return f"{self.int_leaf()} < {self.int_expr(depth)} <= {self.int_leaf()}"
        if kind in ("and", "or") and depth > 0:
            return f"({self.cond(depth - 1)} {kind} {self.cond(depth - 1)})"
        if kind == "not" and depth > 0:
            return f"not ({self.cond(depth - 1)})"
        if kind == "guard":
            # the index lane-local: under the ``and`` fewer lanes are active, so a
            # cross-lane value in it differs there (lockstep semantics) and the checked
            # index is not the one loaded (lanesum(i0) + i0 in bounds, then out)
            cross, self.cross_lane = self.cross_lane, False
            i = self.int_expr(depth)
            self.cross_lane = cross
            return f"(0 <= {i} < len(a) and a[{i}] > {self.draw(st.integers(-3, 5))})"
        return f"({self.int_expr(depth)} & 1)"

    # --- statements ----------------------------------------------------------------

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def block(self, depth: int, in_loop: bool, loops_left: int) -> None:
        for _ in range(self.draw(st.integers(1, 3))):
            self.statement(depth, in_loop, loops_left)

    def statement(self, depth: int, in_loop: bool, loops_left: int) -> None:
        nested = depth < 4
        self.top = depth == 1
        kinds = ["int", "int", "float", "aug", "swap", "store", "buf"]
        if self.top or not self.top_only:
            kinds.append("print")
        if nested:
            kinds += ["if", "if"]
            if loops_left:
                kinds += ["while", "for"]
        if in_loop:
            kinds += ["break", "continue"]
        if self.cross_ok() and nested:
            kinds.append("masks")
        if not self.top_only:  # a return under a varying if masks all that follows
            kinds.append("return")
        kind = self.choice(kinds)
        if kind == "int":
            self.emit(depth, f"{self.choice(self.ints)} = ({self.int_expr()}) % 2001 - 1000")
        elif kind == "float":
            self.emit(depth, f"{self.choice(self.floats)} = ({self.float_expr()}) % 1000.0 "
                             f"- 500.0")
        elif kind == "print":
            # the lane comes second: tests group the lines by lane (lockstep interleaves)
            self.emit(depth, self.choice([
                f'print("p", lane(), {self.int_expr(1)}, {self.float_expr(1)})',
                f'print(f"f {{lane()}} {{{self.float_expr(1)}:.3f}} {{{self.choice(self.ints)}}}'
                f'|{{{self.choice(self.floats)}}}")',
                f'print("s", lane(), {self.choice(self.ints)}, sep=",", end="!\\n")']))
        elif kind == "swap":
            (i, j), f = self.draw(st.permutations(self.ints[:3]))[:2], self.choice(self.floats)
            self.emit(depth, f"{i}, {j}, {f} = {j}, {i}, {self.float_expr(1)} % 1000.0")
        elif kind == "store":
            self.emit(depth, f"out[lane()] = {self.choice(self.ints)}")
        elif kind == "buf":
            self.emit(depth, f"buf[{self.choice(self.ints)} % 4] = {self.choice(self.floats)}")
        elif kind == "aug":
            v = self.choice(self.ints)
            self.emit(depth, f"{v} {self.choice(['+=', '-=', '^='])} {self.int_expr(1)}")
            self.emit(depth, f"{v} %= 997")
        elif kind == "if":
            self.emit(depth, f"if {self.cond()}:")
            self.block(depth + 1, in_loop, loops_left)
            for _ in range(self.draw(st.integers(0, 2))):
                self.emit(depth, f"elif {self.cond()}:")
                self.block(depth + 1, in_loop, loops_left)
            if self.chance(0.5):
                self.emit(depth, "else:")
                self.block(depth + 1, in_loop, loops_left)
        elif kind == "while":
            w = f"w{next(self.counter)}"
            bound = self.choice(["3", "n", "(x % 4)", f"({self.choice(self.ints)} % 5)"])
            self.emit(depth, f"{w} = 0")
            self.emit(depth, f"while {w} < {bound} and {self.cond(0)}:")
            self.emit(depth + 1, f"{w} += 1")
            self.block(depth + 1, True, loops_left - 1)
        elif kind == "for":
            t = f"t{next(self.counter)}"
            start = self.choice(["0", "n", f"({self.int_expr(1)}) % 5", "x % 3"])
            stop = self.choice(["4", "n + 2", f"({self.int_expr(1)}) % 7 - 2", "-3"])
            step = self.choice(["1", "2", "-1", "-2", f"({self.choice(self.ints)} % 3 + 1)",
                                f"(-1 - {self.choice(self.ints)} % 2)"])
            self.emit(depth, f"for {t} in range({start}, {stop}, {step}):")
            self.ints.append(t)
            self.block(depth + 1, True, loops_left - 1)
            self.ints.remove(t)
        elif kind == "masks":
            self.same_cross_lane_under_masks(depth)
        elif kind in ("break", "continue"):
            self.emit(depth, f"if {self.cond()}:")
            self.emit(depth + 1, kind)
        else:
            self.emit(depth, f"if {self.cond()}:")
            self.emit(depth + 1, f"return {self.int_expr()}, {self.float_expr()}")

    def same_cross_lane_under_masks(self, depth: int) -> None:
        """One cross-lane expression, then the same text again under a (usually varying)
        condition and its else: each must see only the lanes active where it runs.  The
        operand is not reassigned in between, so a pass that merged equal expressions
        across masks (the cuda backend's structured form once did) gives the outer value.
        Drawn independently, the same call on an unchanged operand under another mask
        came up too rarely to catch that."""
        self.used_cross_lane = True
        v = self.choice(self.ints)
        call = self.choice(CROSS_LANE).format(v)
        first, inner, other = (self.choice([i for i in self.ints if i != v]) for _ in "abc")
        self.emit(depth, f"{first} = {call} % 2001 - 1000")
        self.top = False  # the condition may run under the mask of an earlier elif
        self.emit(depth, f"if {self.cond()}:")
        self.emit(depth + 1, f"{inner} = ({call} + {first}) % 2001 - 1000")
        if self.chance(0.5):
            self.emit(depth, "else:")
            self.emit(depth + 1, f"{other} = ({call} - {first}) % 2001 - 1000")

    def program(self) -> str:
        self.emit(0, "def prog(x, y, n, a, out):")
        self.emit(1, "i0 = x")
        self.emit(1, "i1 = n")
        self.emit(1, "i2 = 0")
        self.emit(1, "f0 = y")
        self.emit(1, "f1 = y * 0.0 + 0.5")
        self.emit(1, f"buf = np.zeros(4, {'np.float32' if self.float32 else 'np.float64'})")
        self.block(1, False, loops_left=2)
        if self.top_only:  # once more where nothing overwrites its results
            self.top = True
            self.same_cross_lane_under_masks(1)
        self.emit(1, "return i0 + i1 + i2, f0 + f1")
        return HEADER + "\n".join(self.lines) + "\n"


@st.composite
def programs(draw):
    cross_lane = draw(st.booleans())
    w = Writer(draw, cross_lane, float32=draw(st.booleans()),
               top_only=cross_lane and draw(st.booleans()))
    source = w.program()
    return source, w.used_cross_lane, w.float32, draw(st.sampled_from([np.int64, np.int32]))


#: removed when the test process exits; a failing example's source is in its error
_TMP_DIR = tempfile.TemporaryDirectory(prefix="hydra_random_")
_TMP = _TMP_DIR.name
_ids = itertools.count()


def load(source: str):
    """``prog`` from ``source`` written to a real file, so hydra can read its source."""
    path = os.path.join(_TMP, f"random_prog_{next(_ids)}.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.prog


#: mostly small lane counts (cheap, and every partial mask shape), sometimes many
LANES = st.one_of(st.integers(1, 17), st.sampled_from([64, 300]))
arguments = LANES.flatmap(lambda lanes: st.tuples(
    st.lists(st.integers(-50, 50), min_size=lanes, max_size=lanes),
    st.lists(st.floats(-100, 100, allow_nan=False), min_size=lanes, max_size=lanes),
    st.integers(-3, 6),
))

A = np.array([5, -2, 0, 7, 3, -9, 1], dtype=np.int64)


@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(), arguments)
def test_random_program(program, args):
    source, cross_lane, float32, int_type = program
    xs, ys, n = args
    fn = load(source)
    x = np.array(xs, dtype=int_type)
    y = np.array(ys, dtype=np.float32 if float32 else np.float64)
    for backend in BACKENDS:
        lanes = len(x) if backend != "cuda" else min(len(x), CUDA_MAX_LANES)
        try:
            out = np.full(lanes, -7, dtype=np.int64)
            check_against_oracle(fn, [x[:lanes], y[:lanes], n, A.copy(), out], lanes,
                                 ("x", "y"), backend, oracle=not cross_lane, prints=True,
                                 lockstep=True)
        except Exception as e:
            e.add_note(f"backend {backend}, program:\n{source}")
            raise
