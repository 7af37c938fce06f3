"""Random differentiable programs (hypothesis writes them as Python source): hydra.grad
on numpy and cpu against float64 central differences of the plain Python function,
lane by lane, compared only where a lane's path (its branches and trip counts) is the
same at x - h, x and x + h (``gradcheck``).

Each program is ``prog(y, z, n)`` (``y``, ``z`` varying floats, ``n`` a varying int)
with nested ``if``/``elif``/``else``, ``for`` over ranges with per-lane bounds,
``while`` loops bounded by a counter, ``break``, ``continue`` and early ``return``,
and smooth float arithmetic; floats are kept bounded (``tanh``) and ints small, so
every lane's gradient is finite."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hydra
from test_random_programs import load  # prog from source in a real file
from tests.gradcheck import check

HEADER = "import math\n\n\n"

#: smooth float expressions of a and b (c: a condition), bounded where they could blow up
FLOAT_FORMS = ["({a} + {b})", "({a} - {b})", "({a} * {b})", "({a} / (abs({b}) + 1.0))",
               "math.sin({a})", "math.tanh({a})", "math.exp(-abs({a}))",
               "math.sqrt({a} * {a} + 1.0)", "min({a}, {b})", "max({a}, {b})", "abs({a})",
               "({a} if {c} else {b})", "(abs({a}) + 0.5) ** 1.5",
               "math.atan2({a}, abs({b}) + 1.0)"]


class Writer:
    """Draws one program, statement by statement."""

    def __init__(self, draw) -> None:
        self.draw = draw
        self.floats = ["f0", "f1"]
        self.ints = ["i0", "i1"]
        self.counter = itertools.count()
        self.lines: list[str] = []

    def choice(self, options):
        return self.draw(st.sampled_from(options))

    def float_expr(self, depth: int = 2) -> str:
        if depth == 0 or self.draw(st.integers(0, 9)) < 3:
            return self.choice([*self.floats, *self.floats, "y", "z", "0.5", "-1.25"])
        a, b = self.float_expr(depth - 1), self.float_expr(depth - 1)
        form = self.choice(FLOAT_FORMS)
        return form.format(a=a, b=b, c=self.cond() if "{c}" in form else "")

    def int_expr(self) -> str:
        return self.choice([f"({self.choice(self.ints)} + 1) % 5", "n % 4",
                            f"int({self.choice(self.floats)} > 0.25)",
                            f"int(abs({self.choice(self.floats)}) * 2.0) % 3",
                            f"{self.choice(self.ints)} * 2 % 7"])

    def cond(self) -> str:
        kind = self.choice(["f", "f", "i", "and"])
        op = self.choice(["<", "<=", ">", ">="])
        if kind == "f":
            return f"{self.float_expr(1)} {op} {self.choice(['0.0', '0.3', '-0.4'])}"
        if kind == "i":
            return f"{self.choice(self.ints)} {op} {self.draw(st.integers(0, 3))}"
        return f"({self.choice(self.ints)} > 0 and {self.float_expr(1)} < 0.5)"

    def emit(self, indent: int, text: str) -> None:
        self.lines.append(f"{' ' * 4 * indent}{text}")

    def block(self, indent: int, depth: int, in_loop: bool) -> None:
        """One to three statements at ``indent``."""
        count = self.draw(st.integers(1, 3))
        while count:
            self.statement(indent, depth, in_loop)
            count -= 1

    def statement(self, indent: int, depth: int, in_loop: bool) -> None:
        kinds = ["float", "float", "int"] + ["if", "for", "while"] * (depth > 0) \
            + ["exit"] * in_loop + ["return"]
        kind = self.choice(kinds)
        if kind == "float":
            self.emit(indent, f"{self.choice(self.floats)} = "
                              f"math.tanh({self.float_expr()}) * 2.0")
        elif kind == "int":
            self.emit(indent, f"{self.choice(self.ints)} = {self.int_expr()}")
        elif kind == "if":
            self.emit(indent, f"if {self.cond()}:")
            self.block(indent + 1, depth - 1, in_loop)
            if self.draw(st.booleans()):
                self.emit(indent, f"elif {self.cond()}:")
                self.block(indent + 1, depth - 1, in_loop)
            self.emit(indent, "else:")
            self.block(indent + 1, depth - 1, in_loop)
        elif kind == "for":
            k = f"k{next(self.counter)}"
            self.emit(indent, f"for {k} in range({self.int_expr()}):")
            self.block(indent + 1, depth - 1, True)
        elif kind == "while":
            c = f"c{next(self.counter)}"
            self.emit(indent, f"{c} = 0")
            self.emit(indent, f"while {c} < {self.int_expr()}:")
            self.emit(indent + 1, f"{c} += 1")
            self.block(indent + 1, depth - 1, True)
        elif kind == "exit":
            self.emit(indent, f"if {self.cond()}:")
            self.emit(indent + 1, self.choice(["break", "continue"]))
        else:
            self.emit(indent, f"if {self.cond()}:")
            self.emit(indent + 1, f"return {self.float_expr()} * y + z")

    def program(self) -> str:
        self.lines = ["def prog(y, z, n):", "    f0 = y", "    f1 = z * 0.5",
                      "    i0 = n % 3", "    i1 = 1"]
        self.block(1, 2, False)
        self.emit(1, f"return {self.float_expr()} * y + f0 * f1 + z")
        return HEADER + "\n".join(self.lines) + "\n"


@st.composite
def programs(draw):
    return Writer(draw).program()


def _run(source: str, backend: str) -> None:
    prog = load(source)
    k = hydra.compile(hydra.grad(prog, argnums=(0, 1)), varying=("y", "z", "n"),
                      backend=backend)
    rng = np.random.default_rng(len(source))
    for lanes in (1, 17):
        y, z = rng.uniform(-2, 2, lanes), rng.uniform(-2, 2, lanes)
        n = rng.integers(0, 9, lanes)
        dy, dz = k(y, z, n)
        check(prog, (dy, dz), list(zip(y, z, n)), [0, 1], rtol=1e-5, atol=1e-6)


_SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@settings(max_examples=40, **_SETTINGS)
@given(programs())
def test_random_programs_numpy(source):
    _run(source, "numpy")


@settings(max_examples=10, **_SETTINGS)
@given(programs())
def test_random_programs_cpu(source):
    _run(source, "cpu")
