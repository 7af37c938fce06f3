"""The cpu backend's entry point: compile (plan + drivers) and dump (llvm, asm, numba,
and the planned steps).

Its options and stages are declared in ``hydra.backends.PROTOCOLS["cpu"]``: ``threads``
(default all cores), ``fastmath`` (contraction and reassociation; off so results
match the reference bit for bit), ``boundscheck`` (default on), ``cache`` (the kernels'
object files on disk; see ``hydra.backends.machinecode``), ``exactmath`` (math functions as one libm
call per lane, NumPy's bits exactly, instead of the inline vector functions of
``vecmath``, which are within ``vecmath.ULP``).  It takes the predicated IR.
"""

from __future__ import annotations

import llvmlite.binding as llvm

from ...executor.steps import OpStep, Quick, op_label
from ...ir.core import Function
from ..protocol import PROTOCOLS, cores
from .codegen import lowerable
from .driver import PARALLEL_GANGS
from ..machinecode.engine import init_llvm
from .phases import Phase, Plan


class CpuBackend:
    """Explicit SIMD through llvmlite, all cores (see ``hydra.backends``)."""

    protocol = PROTOCOLS["cpu"]
    lowerable = staticmethod(lowerable)

    @staticmethod
    def compile(fn: Function, options: dict, structured=None):
        return Plan(fn, dict(options)).run

    @staticmethod
    def launch_cores(options: dict, lanes: int | None) -> int:
        """Its threads, or one where the run is too small for the parallel driver."""
        if lanes is not None and lanes < PARALLEL_GANGS:
            return 1
        total = cores()
        return max(1, min(int(options.get("threads") or total), total))

    @staticmethod
    def dump(fn: Function, stage: str, options: dict, structured=None) -> str:
        plan = Plan(fn, dict(options))
        if stage == "steps":
            return planned_steps(plan)
        out = []
        for step in plan.steps:
            if not isinstance(step, (Phase, Quick, OpStep)):  # a fused chain, a layer
                out.append(f"; {step.describe()}\n")
                continue
            if not isinstance(step, Phase):  # one host op, precomputed or by its rule
                op = step.ops[0]
                line = f" (line {op.loc.line})" if op.loc and op.loc.line > 0 else ""
                out.append(f"; host step (all lanes at once): {op.opcode}{line}: "
                           f"{plan.host[id(op)]}\n")
                continue
            if stage == "llvm":
                out.append(step.text)
            elif stage == "asm":
                out.append(asm(step))
            elif stage == "numba":
                plan.drivers()
                out.append(step.driver.source)
            else:
                raise ValueError(f"the cpu backend has no stage {stage!r}")
        return "\n".join(out)


def planned_steps(plan: Plan) -> str:
    """The steps a call runs, in order (``dump-ir --stage steps``): native phases, fused
    chains, precomputed host steps and host rules, then the steps planned for each loop
    or branch region that runs on the host and has any besides host rules.  (A
    compacted loop's regions are planned again for its rows: ``executor.rowsteps``.)"""
    def lines(steps: list, indent: str) -> list[str]:
        out = []
        for k, step in enumerate(steps):
            text = step.describe()
            if isinstance(step, OpStep) and id(step.op) in plan.host:
                text += f": {plan.host[id(step.op)]}"
            out.append(f"{indent}{k}. {text}")
        return out
    out = [f"steps of {plan.fn.name}:", *lines(plan.steps, "  ")]
    names = {"if": ("then", "else"), "while": ("before", "body")}
    for op in plan.fn.walk():
        for name, region in zip(names.get(op.opcode, ()), op.regions):
            steps = plan.planner.steps(region.ops[:-1])
            if not all(isinstance(s, OpStep) for s in steps):
                out.append(f"{name} of {op_label(op)}, on the host:")
                out += lines(steps, "  ")
    return "\n".join(out) + "\n"


def asm(phase: Phase) -> str:
    """Optimized x86 assembly of a phase kernel, as numba's codegen makes it."""
    from numba.core import compiler_lock
    from numba.core.registry import cpu_target
    init_llvm()
    codegen = cpu_target.target_context.codegen()
    with compiler_lock.global_compiler_lock:
        lib = codegen.create_library("hydra_asm")
        for text in [phase.text, *sorted(phase.gen.b.modules)]:
            lib.add_llvm_module(llvm.parse_assembly(text))
        lib.finalize()
        return lib.get_asm_str()
