"""Random differentiable per-lane ARRAY programs (the array counterpart of
``test_grad_random``): hydra.grad on numpy and cpu against float64 central differences of
the plain Python function, element by element, compared only where a lane's path (its
branches and trip counts) is the same at x - h, x and x + h (``gradcheck``).

Each program is ``prog(x, W, n)``: ``x`` a varying float vector of 4, ``W`` a uniform
``[3, 4]`` matrix (both differentiated), ``n`` a varying int.  Its variables (a vector of
4, a vector of 3, a matrix like ``W``, a number, and ``acc``, a lane's own vector that is
stored into) are assigned at the top, then reassigned, nested at random, under varying
``if``/``else``, ``for`` loops with per-lane trip counts (with ``break``) and stores
``acc[i] = ...`` at varying indices.  Expressions mix smooth elementwise arithmetic,
``np.where``, ``@``/``np.dot``/``np.outer`` with ``W``, reductions with ``axis``,
slices (negative steps too), ``None``/``...`` indexing, ``np.concatenate``/``np.stack``,
``reshape``/``.T``, ``cumsum``, ``sort``, ``roll``, ``take`` and ``np.linalg.norm``.
Every assignment goes through ``tanh``, so values stay bounded and gradients finite.
A seeded ``random.Random`` writes the program (hypothesis's draws favour the simplest
choice); ``HYDRA_FUZZ_EXAMPLES=N`` runs N examples per backend (CI: 12 on numpy, 1 on cpu,
whose compile costs ~10 s here).
"""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

import hydra
from test_random_programs import load  # prog from source in a real file
from tests.gradcheck import check_arrays

HEADER = "import numpy as np\n\n\n"
V4, V3, M, S = "a4", "b3", "m", "s"
SHAPES = {V4: (4,), V3: (3,), M: (3, 4), S: ()}
FUZZING = os.environ.get("HYDRA_FUZZ_EXAMPLES")


class Writer:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.lines: list[str] = []

    def pick(self, options):
        return self.rng.choice(options)

    # --- expressions of a kind: "4" (a vector of 4), "3", "m" ([3, 4]), "s" (a number)

    def expr(self, kind: str, depth: int) -> str:
        if depth <= 0 or self.rng.random() < 0.25:
            return self.leaf(kind)
        d = depth - 1
        if self.rng.random() < 0.45:  # elementwise, same kind
            a, b = self.expr(kind, d), self.expr(kind, d)
            return self.pick([f"({a} + {b})", f"({a} * {b})", f"({a} - {b})",
                              f"({a} / (np.abs({b}) + 1.0))", f"np.sin({a})",
                              f"np.exp(-np.abs({a}))", f"({a} * {self.expr(S, d)})",
                              f"np.where({a} > 0.3, {a}, {b} * 0.5)",
                              f"np.maximum({a}, {b})"])
        return self.pick(getattr(self, "shape_" + kind)(d))

    def leaf(self, kind: str) -> str:
        return {"4": self.pick(["x", V4]), "3": V3, "m": self.pick(["W", M]),
                "s": self.pick([S, "x[1]", f"{V4}[n % 4]", "acc[2]"])}[kind]

    def operands(self, d):
        return tuple(f"({self.expr(k, d)})" for k in ("4", "3", "m"))

    def shape_4(self, d):
        v4, v3, m = self.operands(d)
        return [f"(W.T @ {v3})", f"({v3} @ {m})", f"{m}.mean(axis=0)", f"np.cumsum({v4})",
                f"np.concatenate(({v3}[:2], {v4}[1:3]))", f"np.roll({v4}, 1)",
                f"np.sort({v4})", f"{v4}[::-1]", f"{m}[None, 1, ...][0]", f"{m}[2] * acc",
                f"np.take({v4}, (3, 0, 0, 1))"]

    def shape_3(self, d):
        v4, v3, m = self.operands(d)
        return [f"(W @ {v4})", f"np.dot({m}, {v4})", f"{m}.sum(axis=1)", f"{m}.max(axis=1)",
                f"{v4}[1:]", f"{v4}[::-2][:1] * {v3}", f"{m}[..., 1]", f"np.cumsum({v3})",
                f"{m}[:, n % 4]"]

    def shape_m(self, d):
        v4, v3, m = self.operands(d)
        return [f"np.outer({v3}, {v4})", f"({m} * {v4})", f"({m} * {v3}[:, None])",
                f"np.stack(({v4}, {v4} * 0.5, {v4}))", f"{m}.T.T",
                f"np.concatenate(({v4}, {v4}[::-1], {v3}, {v3}[:1])).reshape(3, 4)",
                f"({m} @ np.tanh({m}.T) @ W)"]

    def shape_s(self, d):
        v4, v3, m = self.operands(d)
        return [f"{v4}.sum()", f"{m}.mean()", f"{v3}.max()", f"np.linalg.norm({v4})",
                f"({v3} @ {v3})", f"{m}[n % 3, 1]", f"{v4}[(n + 1) % 4]", f"{m}.min()"]

    # --- statements ----------------------------------------------------------------------

    def assign(self, indent: str, depth: int) -> None:
        name = self.pick([V4, V3, M, S, "acc"])
        if name == "acc":
            i = self.pick(["n % 4", "(n + 2) % 4", "1"])
            self.lines.append(f"{indent}acc[{i}] = np.tanh(acc[{i}] * 0.5 + "
                              f"{self.expr('s', depth)})")
            return
        kind = {V4: "4", V3: "3", M: "m", S: "s"}[name]
        self.lines.append(f"{indent}{name} = np.tanh({self.expr(kind, depth)})")

    def block(self, indent: str, depth: int, count: int) -> None:
        for _ in range(count):
            r = self.rng.random()
            if r < 0.55 or depth <= 0:
                self.assign(indent, 2)
            elif r < 0.8:
                self.lines.append(f"{indent}if {self.expr('s', 1)} > 0.2:")
                self.block(indent + "    ", depth - 1, self.rng.randint(1, 2))
                self.lines.append(f"{indent}else:")
                self.block(indent + "    ", depth - 1, 1)
            else:
                self.lines.append(f"{indent}for t in range(n % 3 + {self.rng.randint(0, 1)}):")
                self.block(indent + "    ", depth - 1, self.rng.randint(1, 2))
                if self.rng.random() < 0.4:
                    self.lines.append(f"{indent}    if {self.expr('s', 1)} > 0.6:")
                    self.lines.append(f"{indent}        break")

    def program(self) -> str:
        self.lines = ["def prog(x, W, n):",
                      "    a4 = np.tanh(x * 1.5)", "    b3 = np.tanh(W @ x)",
                      "    m = np.tanh(W * x)", "    s = np.tanh(x.sum())",
                      "    acc = np.zeros(4)"]
        self.block("    ", 2, self.rng.randint(3, 6))
        self.lines.append("    return float(s + a4.sum() * 0.3 + np.tanh(b3).sum() "
                          "+ (m * m).sum() * 0.1 + (acc * acc).sum())")
        return HEADER + "\n".join(self.lines) + "\n"


def _run(seed: int, backend: str) -> None:
    source = Writer(seed).program()
    prog = load(source)
    k = hydra.compile(hydra.grad(prog, argnums=(0, 1)), varying=("x", "n"), backend=backend)
    rng = np.random.default_rng(seed)
    W = rng.uniform(-1, 1, (3, 4))
    for lanes in (1, 3):
        X, n = rng.uniform(-1.5, 1.5, (lanes, 4)), rng.integers(0, 6, lanes)
        dx, dW = k(X, W, n)
        try:
            check_arrays(prog, (dx, dW), [(X[j], W, int(n[j])) for j in range(lanes)],
                         [0, 1], rtol=1e-5, atol=1e-6)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{source}") from None


@pytest.mark.parametrize("seed", range(int(FUZZING or 12)))
def test_random_array_programs_numpy(seed):
    _run(seed, "numpy")


@pytest.mark.parametrize("seed", range(100, 100 + int(FUZZING or 1)))
def test_random_array_programs_cpu(seed):
    _run(seed, "cpu")
