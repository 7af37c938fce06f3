"""The one Step contract of the per-lane array executor, and its one runner.

A **step** is a piece of a region that the host side runs over all of a host's lanes
(or over a compacted loop's rows) at once.  It has

- ``ops``: the IR ops it stands for, in program order;
- its declared effects: ``effect`` (one of its ops writes memory, prints or may
  raise: it keeps its place among the other steps) and ``writes`` (the values it puts
  into ``env``);
- ``run(host, env)``: puts into ``env`` exactly what ``rules.run_op`` of its ops would
  (the same bits, or the summation-order tolerance of SPEC section 8 where its rule
  says so), except the values of its ops that only its own ops read (a fused chain
  keeps those in registers).  Values in ``env`` keep NumPy's layout (a step may use
  another layout inside itself only).  Every error goes through ``host`` (a fast path
  that does not apply calls ``host.run_op``), so a step in a compacted loop names the
  original lane;
- ``describe()``: its line in ``dump-ir --stage steps``.

Kinds: ``OpStep`` (one op by its host rule), ``Quick`` (one op with its work prepared
at plan time: ``opsteps``, ``reductions``, ``products``, ``rowsteps``), ``fuse.Fused``
(a chain of elementwise ops as one native loop), and a backend's own (cpu:
``phases.Phase``, native SIMD code).  ``planner.Planner`` makes them; ``run_steps``
runs them, for every backend's host side.
"""

from __future__ import annotations

import time

import numpy as np

from .. import events
from ..backends.cut import nested
from ..ir.core import Op, Value
from .counting import account  # hydra.profile (issue 30)


class Step:
    """A planned host step (see the module docstring)."""

    ops: list[Op]

    def run(self, host, env: dict) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def record(self, k: int, start: float) -> None:
        """hydra.profile (issue 30): the event of this step, run as step ``k`` of the
        top level from ``start`` (``run_steps_recorded``)."""
        events.record("step", self.describe(), start, step=k, lines=step_lines(self))

    @property
    def effect(self) -> bool:
        return any(op.effect for op in self.ops)

    @property
    def writes(self) -> list[Value]:
        return [r for op in self.ops for r in op.results]


class OpStep(Step):
    """One op by its host rule (``host.run_op``: on compacted rows, lane ids and row
    gathers as the host of those rows gives them)."""

    def __init__(self, op: Op) -> None:
        self.op = op
        self.ops = [op]

    def run(self, host, env: dict) -> None:
        host.run_op(self.op, env)

    def describe(self) -> str:
        return f"host rule: {op_label(self.op)}"

    def record(self, k: int, start: float) -> None:
        if self.op.opcode not in ("const", "global_array"):  # (its time: ``run_op``'s)
            events.record("host", f"host step: {self.op.opcode}", start, step=k,
                          lines=step_lines(self), why=getattr(self, "why", ""))


class Quick(Step):
    """One op with its work prepared at plan time: ``fn(host, env)``, named in the
    steps dump by the function that made it."""

    def __init__(self, op: Op, fn) -> None:
        self.op = op
        self.ops = [op]
        self.fn = fn
        self.run = fn  # ``run`` is ``fn`` itself: one call less on every step

    def describe(self) -> str:
        """The op and the rule that made it."""
        made_by = f"{self.fn.__module__.rsplit('.', 1)[-1]}." \
                  f"{self.fn.__qualname__.split('.<locals>')[0]}"
        return f"precomputed host step: {op_label(self.op)} ({made_by})"


def run_steps(host, plan, env: dict) -> None:
    """The one runner: each ``(step, dead)`` of ``plan`` in order, the values ``dead``
    dropped after it (``planner.deaths``: their memory is reused at once, as a NumPy
    expression frees its temporaries).  Every host step of every backend runs here."""
    if events.RECORDING:  # hydra.profile (issue 30): precomputed steps timed
        return run_steps_recorded(host, plan, env, False)
    for step, dead in plan:
        step.run(host, env)
        for v in dead:
            env.pop(v, None)


def run_steps_recorded(host, plan, env: dict, record: bool = True) -> None:
    """``run_steps`` inside an open profile: a precomputed step's time goes into its
    line's (a product's also as an event); with ``record`` (a kernel's top level) each
    step is an event too (``Step.record``)."""
    for k, (step, dead) in enumerate(plan):
        start = time.perf_counter()
        step.run(host, env)
        if isinstance(step, Quick):
            account(step.op, env, start, time.perf_counter(), host.lanes)
        if record:
            step.record(k, start)
        for v in dead:
            env.pop(v, None)


def step_lines(step: Step) -> list[int]:
    """The source lines of a step's ops and the ops nested in them (cached)."""
    lines = getattr(step, "_lines", None)
    if lines is None:
        lines = step._lines = sorted({o.loc.line for top in step.ops for o in nested(top)
                                      if o.loc is not None and o.loc.line > 0})
    return lines


def op_label(op: Op) -> str:
    """``array matmul (line 12)``: an op as the steps dump names it."""
    what = op.attrs.get("fn") or op.attrs.get("name") or (
        repr(op.attrs["value"]) if op.opcode == "const" else "")
    line = f" (line {op.loc.line})" if op.loc and op.loc.line > 0 else ""
    return f"{op.opcode}{' ' + what if what else ''}{line}"


def converter(dtype):
    """A converter of values to ``dtype`` that copies only where the dtype differs."""
    def typed(value):
        value = np.asarray(value)
        return value if value.dtype == dtype else value.astype(dtype)
    return typed
