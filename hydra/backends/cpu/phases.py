"""Splitting a kernel at its sync points into native phases and host steps, and running it.

Takes: predicated SSA whose sync points are marked (``op.attrs["sync"]``).
Guarantees: lockstep semantics (SPEC section 4) with native speed between sync points.
The function body's top-level ops are cut into *steps*:

- a **native phase**: a run of the cutter (``hydra.backends.cut``) over top-level ops
  that ``codegen.lowerable`` accepts; it becomes one LLVM kernel (``codegen``) that
  runs gang by gang on all cores.  Its live-ins come in as per-lane buffers or
  scalars, its live-outs go out the same way (constants are made in each kernel
  instead).
- a **host step**: one top-level op that ``lowerable`` refuses, with the reason (a
  sync point: a cross-lane intrinsic, a print, a load that may read another lane's
  store; or an op with no vector code), planned by the executor's planner
  (``hydra.executor.planner``: fused chains, precomputed steps, host rules, with
  ``machinecode.background.COMPILE_LOOP`` as its loop compiler).  It runs with all lanes
  at once, so cross-lane reads see every lane's current value and prints come out in
  lane order; a sync point inside varying control flow makes its whole
  top-level loop or ``if`` such a step (the lockstep region runs with all lanes
  together).  ``dump-ir`` names each host step and its reason.

All gangs finish a phase before the next step starts: that is where they meet.
"""

from __future__ import annotations

import hashlib
import threading
import time

import numpy as np

from ... import events
from ...errors import RUNTIME_ERRORS
from ...ir.core import Function, Op, Value
from ...types import ArrayType, ScalarType
from ...executor import policy
from ...executor.host import Host
from ...executor.planner import Planner
from ...executor.steps import OpStep, Step, run_steps, run_steps_recorded, step_lines
from ..cut import Run, cut, nested, users_of
from ..machinecode import background, loops
from . import counts, persistent
from .codegen import KINDS, KernelGen, lowerable
from .driver import Driver
from .ganglocal import gang_local_values
from ..protocol import cores
from .schedule import lane_cost_ns, threads_for
from .stops import error_buffer
from .chains import gang_vectors
from .vectors import Geometry, geometry, vector_bits


def varying_types(fn: Function) -> list[ScalarType]:
    out = [p.type for p in fn.params if p.varying and isinstance(p.type, ScalarType)]
    for op in fn.walk():
        out += [r.type for r in op.results if r.varying and isinstance(r.type, ScalarType)]
    return out


class Phase(Step):
    """One native kernel: a run of the cutter and the code made for it (a step of the
    plan: ``run`` runs it over the host's lanes)."""

    def __init__(self, run: Run, plan: "Plan") -> None:
        self.plan = plan
        self.ops = run.ops
        self.inputs: list[Value] = run.inputs
        self.outputs: list[Value] = run.outputs
        self.gen: KernelGen | None = None
        self.text = ""
        self.driver: Driver | None = None
        self.one_gang = False
        #: estimated single-core ns per lane (None: unknown), for ``schedule.threads_for``
        self.cost: float | None = None
        #: a persistent phase's lockstep twin for its errors (None: not made yet);
        #: False for a lockstep phase, which raises its own
        self.twin: Phase | None | bool = False
        #: the threads its last run used (its profile event)
        self.threads = 1
        #: when a profiled run's build of its machine code ended: the phase's event
        #: starts there, not at the step's start (the build is an event of its own)
        self.built_at = 0.0

    def run(self, host, env: dict) -> None:
        if events.RECORDING and self.driver.call is None:  # hydra.profile: its build
            start = time.perf_counter()
            self.driver.build()
            events.record("build", "machine code of a native phase", start)
            self.built_at = time.perf_counter()
        self.plan.run_phase(self, env, host.lanes)

    def describe(self) -> str:
        return f"native phase: {len(self.ops)} ops, {len(self.inputs)} in, " \
               f"{len(self.outputs)} out"

    def record(self, k: int, start: float) -> None:
        start, self.built_at = max(start, self.built_at), 0.0
        events.record("phase", f"native phase {k}", start, step=k, lines=step_lines(self),
                      threads=self.threads, mode="persistent lanes" if getattr(
                          self.gen, "persistent", False) else "lockstep gangs",
                      why=getattr(self.gen, "why_lockstep", ""))


class Plan:
    """The steps of one kernel (see the module docstring).  ``host`` maps each
    top-level op that runs on the host to the reason."""

    def __init__(self, fn: Function, options: dict) -> None:
        self.fn = fn
        self.options = options
        #: threads that run the plan first make its drivers (and a twin) once
        self._lock = threading.Lock()
        self._made = False
        #: when its per-lane array code compacts (the ``compaction`` option)
        self.policy = policy.of(options.get("compaction") or "auto")
        self.geo: Geometry = geometry(varying_types(fn), gang_vectors(fn, vector_bits()))
        ops = fn.body.ops[:-1]
        self.host: dict[int, str] = {}
        for op in ops:
            ok, why = lowerable(op)
            if not ok and op.opcode != "const":
                self.host[id(op)] = why
        # Constants are no step: each kernel makes its own, and the host computes
        # those a host op or the result reads.  Captured arrays go first: they
        # depend on nothing, and must not split a phase.
        body = [op for op in ops if op.opcode not in ("const", "global_array")]
        users = users_of(fn)
        gang_local = gang_local_values(fn)
        while True:
            items = cut(body, lambda op: id(op) not in self.host, users)
            runs = [item for item in items if isinstance(item, Run)]
            # a value one gang computed for itself means nothing to the steps after
            crossing = [op for run in runs for op in run.ops
                        if any(r.id in gang_local for r in op.results if r in run.outputs)]
            if not crossing:
                break
            for op in crossing:
                self.host[id(op)] = "a gang's own uniform value is needed after a sync"
        in_runs = {id(o) for run in runs for op in run.ops for o in nested(op)}
        consts = {op.result.id: op for op in ops if op.opcode == "const"}
        on_host = [op for op in ops if op.opcode == "global_array" or op.opcode == "const"
                   and any(id(u) not in in_runs for u in users.get(op.result.id, []))]
        for op in on_host:
            self.host.setdefault(id(op), "a constant that a host step or the result reads")
        # elementwise array chains -> one native loop each, here and in host regions
        # the generated loops build in the background after a call (``background``)
        self.planner = Planner(fn, background.COMPILE_LOOP)
        self.steps: list = self.planner.steps(
            on_host + [Phase(self._remat(item, consts), self) if isinstance(item, Run)
                       else item for item in items], layers=True)
        self._plan = [(step, ()) for step in self.steps]
        for step in self.steps:
            if isinstance(step, Phase):
                self._generate(step)

    @staticmethod
    def _remat(run: Run, consts: dict[int, Op]) -> Run:
        """The run with the constants it reads made inside it instead of passed in."""
        made = [consts[v.id] for v in run.inputs if v.id in consts]
        return Run(made + run.ops, [v for v in run.inputs if v.id not in consts], run.outputs)

    def _generate(self, phase: Phase, lockstep: bool = False) -> None:
        # no per-lane result and nothing that writes or raises: one gang will do
        phase.one_gang = not any(v.varying for v in phase.outputs) and not any(
            o.effect or o.traps for op in phase.ops for o in nested(op))
        phase.cost = lane_cost_ns(phase.ops)
        captured = {op.result.id: op.attrs["array"] for op in self.fn.body.ops
                    if op.opcode == "global_array"}
        gen, text = persistent.generate("hydra_kernel", self.geo, self.options, captured,
                                        phase.ops, phase.inputs, phase.outputs,
                                        phase.one_gang, persistent_ok=not lockstep)
        text = counts.finish(gen, text)  # hydra.profile's counters, where it has any
        # named by its content: the same kernel in another process gets the same name
        # (the disk cache), different kernels in one process never clash
        gen.name = "hydra_" + hashlib.sha256(text.encode()).hexdigest()[:20]
        phase.text = text.replace("@hydra_kernel(", f"@{gen.name}(", 1)
        phase.gen = gen
        if getattr(gen, "persistent", False) and gen.sites:
            phase.twin = None

    def drivers(self) -> None:
        """Make the drivers (their machine code is built at their first run), once."""
        if self._made:
            return
        with self._lock:
            for step in self.steps:
                if isinstance(step, Phase) and step.driver is None:
                    self._driver(step)
            self._made = True

    def _driver(self, step: Phase) -> None:
        kinds = ["array" if isinstance(v.type, ArrayType) else "buf" if v.varying
                 else "scalar" for v in step.inputs] + ["buf"] * len(step.outputs)
        step.driver = Driver(step.text, sorted(step.gen.b.modules), step.gen.name,
                             kinds, self.geo.lanes, bool(self.options.get("cache")),
                             label=self.fn.name, loops=step.gen.has_loops)

    def _twin(self, phase: Phase) -> Phase:
        """The lockstep twin of a persistent phase, made at its first error: persistent
        gangs do not order their errors, so the twin re-runs the phase (which writes
        no array, ``persistent``) to raise the error lockstep order names."""
        with self._lock:
            if phase.twin is None:
                twin = Phase(Run(phase.ops, phase.inputs, phase.outputs), self)
                self._generate(twin, lockstep=True)
                self._driver(twin)
                phase.twin = twin
        return phase.twin

    # --- running ----------------------------------------------------------------------

    def run(self, args: list, lanes: int) -> list:
        fn = self.fn
        self.drivers()
        env: dict[int, object] = {p.id: a for p, a in zip(fn.params, args)}
        # the fused loops this run builds go to the disk cache with the kernel's phases
        caching = loops.CACHE.set(bool(self.options.get("cache")))
        token = policy.enter(self.policy)
        try:
            with np.errstate(all="ignore"):
                host = Host(fn, lanes, self.policy, self.planner)
                if events.RECORDING:  # hydra.profile (issue 30): each step an event
                    for step, _ in self._plan:  # a top-level host step's says why
                        if isinstance(step, OpStep):
                            step.why = self.host.get(id(step.op), "")
                    run_steps_recorded(host, self._plan, env)
                else:
                    run_steps(host, self._plan, env)
        finally:
            policy.leave(token)
            loops.CACHE.reset(caching)
            background.release()
        return [env[v.id] for v in fn.body.terminator.operands]

    def run_phase(self, phase: Phase, env: dict, lanes: int) -> None:
        threads = min(int(self.options.get("threads") or cores()), cores())
        vals = []
        for v in phase.inputs:
            x = env[v.id]
            if isinstance(v.type, ArrayType):
                vals.append(x)
            elif v.varying:
                if not (type(x) is np.ndarray and x.shape == (lanes,)  # the common case
                        and x.dtype == v.type.dtype and x.flags.c_contiguous):
                    x = np.ascontiguousarray(np.broadcast_to(x, (lanes,)), v.type.dtype)
                vals.append(x)
            else:
                vals.append(v.type.dtype.type(x))
        outs = [np.empty(lanes if v.varying else 1, v.type.dtype) for v in phase.outputs]
        err = error_buffer()
        threads = phase.threads = threads_for(lanes, threads, phase.cost)
        phase.driver.run(lanes, vals + outs, err, threads, phase.one_gang)
        if err[0] and phase.twin is not False:
            return self.run_phase(self._twin(phase), env, lanes)
        if err[0]:
            self._raise(phase, err)
        for v, o in zip(phase.outputs, outs):
            env[v.id] = o if v.varying else o[0]

    def _raise(self, phase: Phase, err: np.ndarray):
        kind, lane, site = KINDS[err[1]], int(err[2]), int(err[3])
        op, _ = phase.gen.sites[site]
        if kind == "index" and op.opcode != "check":  # a check op's message is its own
            msg = (f"index {int(err[4])} is out of bounds for axis {int(err[5])} "
                   f"with size {int(err[6])}")
        elif kind == "zerodiv":
            msg = f"integer {'division' if op.opcode == 'floordiv' else 'modulo'} by zero"
        else:
            msg = op.attrs["message"]
        raise RUNTIME_ERRORS[kind](msg, lane, op.loc)
