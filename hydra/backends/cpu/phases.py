"""Splitting a kernel at its sync points into native phases and host steps, and running it.

Takes: predicated SSA whose sync points are marked (``op.attrs["sync"]``).
Guarantees: lockstep semantics (SPEC section 4) with native speed between sync points.
The function body's top-level ops are cut into *steps*:

- a **native phase**: a run of top-level ops with no sync point inside; it becomes one
  LLVM kernel (``codegen``) that runs gang by gang on all cores.  Values it needs from
  earlier steps come in as per-lane buffers or scalars; values later steps need go out
  the same way (constants are re-emitted instead).
- a **host step**: one top-level op that contains a sync point (a cross-lane intrinsic,
  a print, a load that may read another lane's store) or that the code generator does
  not lower.  It runs with all lanes at once through the reference interpreter's op
  rules, so cross-lane reads see every lane's current value and prints come out in lane
  order; a sync point inside varying control flow makes its whole top-level loop or
  ``if`` such a step (the lockstep region runs with all lanes together).

All gangs finish a phase before the next step starts: that is where they meet.
"""

from __future__ import annotations

import hashlib
import numba
import numpy as np

from ...errors import RUNTIME_ERRORS
from ...ir.core import Function, Op, Value
from ...types import ArrayType, ScalarType
from ..numpy_backend import NumpyKernel
from .codegen import KINDS, KernelGen
from .driver import Driver
from .stops import error_buffer
from .vectors import Geometry, Unsupported, geometry


def _walk_inputs(op: Op, defined: set[int], used: list[Value]) -> None:
    for v in op.inputs():
        if v.id not in defined:
            used.append(v)
    for r in op.regions:
        defined.update(a.id for a in r.args)
        for inner in r.ops:
            _walk_inputs(inner, defined, used)
            defined.update(x.id for x in inner.results)


def varying_types(fn: Function) -> list[ScalarType]:
    out = [p.type for p in fn.params if p.varying and isinstance(p.type, ScalarType)]
    for op in fn.walk():
        out += [r.type for r in op.results if r.varying and isinstance(r.type, ScalarType)]
    return out


def gang_local_values(fn: Function) -> set[int]:
    """Uniform values that a gang computes from its own lanes only: ``any`` results and
    whatever depends on them (guarded ``if``s and loops).  Inside a phase each gang
    uses its own; they must not cross to a later step, where they mean all lanes."""
    dep: set[int] = set()
    changed = True
    while changed:
        changed = False
        for op in fn.walk():
            inside = [v for r in op.regions for v in r.args] + [
                v for r in op.regions for o in r.walk() for v in o.results + o.inputs()]
            if (op.opcode == "any" or any(v.id in dep for v in op.inputs())
                    or any(v.id in dep for v in inside)):
                for v in op.results + [a for r in op.regions for a in r.args]:
                    if not v.varying and v.id not in dep:
                        dep.add(v.id)
                        changed = True
    return dep


class Phase:
    """One native kernel: ops, the values it reads and the values it hands on."""

    def __init__(self, ops: list[Op]) -> None:
        self.ops = ops
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        self.gen: KernelGen | None = None
        self.text = ""
        self.driver: Driver | None = None
        self.one_gang = False


class Plan:
    """The steps of one kernel (see the module docstring)."""

    def __init__(self, fn: Function, options: dict) -> None:
        self.fn = fn
        self.options = options
        self.geo: Geometry = geometry(varying_types(fn))
        self.host: set[int] = {id(op) for op in fn.body.ops if op.opcode == "global_array"}
        self.whole_host = False
        self.gang_local = gang_local_values(fn)
        while True:
            try:
                self.steps = self._cut()
                break
            except _Failed as e:
                if e.op is None or id(e.op) in self.host:
                    self.whole_host, self.reason = True, e.reason
                    self.steps = []
                    break
                self.host.add(id(e.op))

    def _cut(self) -> list:
        ops = self.fn.body.ops[:-1]
        # captured arrays first: they depend on nothing, and must not split a phase
        steps: list = [op for op in ops if op.opcode == "global_array"]
        run: list[Op] = []
        for op in ops:
            if op.opcode == "global_array":
                continue
            if id(op) in self.host:
                if run:
                    steps.append(Phase(run))
                    run = []
                steps.append(op)
            else:
                run.append(op)
        if run:
            steps.append(Phase(run))
        consts = {op.result.id: op for op in ops if op.opcode == "const"}
        later: set[int] = {v.id for v in self.fn.body.terminator.operands}
        for step in reversed(steps):  # what each step reads, last to first
            step_ops = step.ops if isinstance(step, Phase) else [step]
            defined: set[int] = set()
            used: list[Value] = []
            for op in step_ops:
                _walk_inputs(op, defined, used)
                defined.update(r.id for r in op.results)
            if isinstance(step, Phase):
                step.outputs = [r for op in step.ops for r in op.results if r.id in later]
                for op in step.ops:
                    if any(r.id in self.gang_local for r in op.results if r in step.outputs):
                        raise _Failed(op, "a gang's own uniform value is needed after a sync")
                remat = {v.id: consts[v.id] for v in used if v.id in consts
                         and v.id not in defined}
                step.ops = [*dict.fromkeys(remat.values()), *step.ops]
                step.inputs = list({v.id: v for v in used if v.id not in remat}.values())
                # no per-lane result and nothing that writes or raises: one gang will do
                step.one_gang = not any(v.varying for v in step.outputs) and not any(
                    o.info.effect or o.info.traps for op in step.ops for o in [op, *op_walk(op)])
                self._generate(step, len(steps))
                used = [v for v in used if v.id not in remat]
            later.update(v.id for v in used)
        return steps

    def _generate(self, phase: Phase, n: int) -> None:
        captured = {op.result.id: op.attrs["array"] for op in self.fn.body.ops
                    if op.opcode == "global_array"}
        gen = KernelGen("hydra_kernel", self.geo, self.options, captured)
        try:
            text = gen.generate(phase.ops, phase.inputs, phase.outputs)
        except Unsupported as e:
            raise _Failed(getattr(gen, "top", None), str(e)) from None
        # named by its content: the same kernel in another process gets the same name
        # (numba's disk cache), different kernels in one process never clash
        gen.name = "hydra_" + hashlib.sha256(text.encode()).hexdigest()[:20]
        phase.text = text.replace("@hydra_kernel(", f"@{gen.name}(", 1)
        phase.gen = gen

    def drivers(self) -> None:
        """Build the numba drivers (lazily, at the first run)."""
        for step in self.steps:
            if isinstance(step, Phase) and step.driver is None:
                kinds = [_kind(v) for v in step.inputs] + ["buf"] * len(step.outputs)
                step.driver = Driver(step.text, sorted(step.gen.b.modules), step.gen.name,
                                     kinds, self.geo.lanes, bool(self.options.get("cache")),
                                     loops=step.gen.has_loops)

    # --- running ----------------------------------------------------------------------

    def run(self, args: list, lanes: int) -> list:
        fn = self.fn
        ref = NumpyKernel(fn, lanes)
        if self.whole_host:
            return ref(args)
        self.drivers()
        env: dict[int, object] = {p.id: a for p, a in zip(fn.params, args)}
        threads = int(self.options.get("threads") or numba.config.NUMBA_NUM_THREADS)
        threads = min(threads, numba.config.NUMBA_NUM_THREADS)
        with np.errstate(all="ignore"):
            for step in self.steps:
                if isinstance(step, Phase):
                    self._run_phase(step, env, lanes, threads)
                else:
                    _host_op(ref, step, env)
        return [env[v.id] for v in fn.body.terminator.operands]

    def _run_phase(self, phase: Phase, env: dict, lanes: int, threads: int) -> None:
        vals = []
        for v in phase.inputs:
            x = env[v.id]
            if isinstance(v.type, ArrayType):
                vals.append(x)
            elif v.varying:
                vals.append(np.ascontiguousarray(np.broadcast_to(x, (lanes,)), v.type.dtype))
            else:
                vals.append(v.type.dtype.type(x))
        outs = [np.empty(lanes if v.varying else 1, v.type.dtype) for v in phase.outputs]
        err = error_buffer()
        phase.driver.run(lanes, vals + outs, err, threads, phase.one_gang)
        if err[0]:
            self._raise(phase, err)
        for v, o in zip(phase.outputs, outs):
            env[v.id] = o if v.varying else o[0]

    def _raise(self, phase: Phase, err: np.ndarray):
        kind, lane, site = KINDS[err[1]], int(err[2]), int(err[3])
        op, _ = phase.gen.sites[site]
        if kind == "index":
            msg = (f"index {int(err[4])} is out of bounds for axis {int(err[5])} "
                   f"with size {int(err[6])}")
        elif kind == "zerodiv":
            msg = f"integer {'division' if op.opcode == 'floordiv' else 'modulo'} by zero"
        else:
            msg = op.attrs["message"]
        raise RUNTIME_ERRORS[kind](msg, lane, op.loc)


class _Failed(Exception):
    def __init__(self, op: Op | None, reason: str) -> None:
        self.op, self.reason = op, reason


def op_walk(op: Op):
    for r in op.regions:
        yield from r.walk()


def _kind(v: Value) -> str:
    if isinstance(v.type, ArrayType):
        return "array"
    return "buf" if v.varying else "scalar"


def _host_op(ref: NumpyKernel, op: Op, env: dict) -> None:
    """One top-level op over all lanes, by the reference interpreter's rules."""
    method = getattr(ref, "op_" + op.opcode, None)
    if method is not None:
        results = method(op, env)
    else:
        results = ref.elementwise(op, [env[v.id] for v in op.operands])
    for r, value in zip(op.results, results):
        env[r.id] = value
