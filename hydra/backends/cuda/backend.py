"""The cuda backend: one GPU thread per lane, through numba.cuda.

``compile`` picks one of three strategies (``runner.strategy`` says which):

- **one kernel** (``structured.py``): a function without sync points, per-lane
  arrays of constant shape and scalar results runs as a single launch of its
  structured IR, divergence left to the hardware;
- **segments** (``segments.py``): sync points outside varying control flow: the
  host drives the uniform branches and loops around them, structured kernels run
  everything in between;
- **phases** (``phases.py``): anything else runs its predicated IR from the host,
  lane-local stretches as kernels and sync points between them.

All three raise the numpy backend's errors (same class, message, lane) from the
kernels' error buffers, and write the caller's arrays in place.  Nothing here has
run on a real GPU yet: the simulator runs the kernels, and
``tests/test_cuda_typing.py`` compiles them for the CUDA target (up to LLVM IR).  With
``NUMBA_ENABLE_CUDASIM=1`` everything runs on numba's CUDA simulator, which has no
PTX: ``dump(..., "ptx")`` says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import cuda

from ...effects import effects
from ...errors import HydraError
from ...ir.core import Function
from ...types import ArrayType, scalar
from ..protocol import PROTOCOLS
from ...executor.arrays import refuse_array_ops
from . import launch, phases
from .segments import Unsuitable, plan_segments
from .structured import PRELUDE, fits, generate


def _on_simulator() -> bool:
    from numba import config
    return bool(config.ENABLE_CUDASIM)


class OneKernel:
    """Runs a lane-local function as a single kernel launch."""

    strategy = "one kernel"

    def __init__(self, fn: Function, options: dict) -> None:
        self.fn = fn
        self.options = options
        self.errors = launch.ErrorBuffer()
        #: runs the call again in lockstep (phases) after a failure, to raise its error
        self.exact = None
        self.code = generate(fn, options.get("boundscheck", True))
        self.kernel = None
        found = effects(fn)  # what is copied back: every array a store may reach
        self.written = ["w" in mode for mode in found.params]
        self.globals_written = ["w" in mode for _, mode in found.captured]

    def __call__(self, args: list, lanes: int) -> list:
        if self.kernel is None:
            self.kernel = launch.build(self.code.source, self.code.entry, self.fn.name,
                                       self.options)
        moves = launch.Transfers()
        dev = []
        for p, a, written in zip(self.fn.params, args, self.written):
            if isinstance(p.type, ArrayType) or p.varying:
                dev.append(moves.array(a, written))
            else:
                dev.append(launch.scalar_arg(a, p.type.dtype))
        for array, written in zip(self.code.globals, self.globals_written):
            dev.append(moves.array(array, written))
        leaves = self.fn.body.terminator.operands
        outs = [cuda.device_array(lanes if v.varying else 1, dtype=v.type.dtype) for v in leaves]
        launch.launch(self.kernel, lanes, dev + outs + [self.errors.get(lanes)])
        try:
            self.errors.check(lanes, self.code.sites)
        except HydraError:
            # Lanes that fail at different statements are ordered by source here,
            # not by lockstep time.  The failed launch left the caller's host arrays
            # as they were, so the phases of the predicated IR can run the call
            # again from the same state and fail exactly as the reference does.
            if self.exact is None or any(launch.is_device_array(a) for a in args):
                raise
            self.exact(args, lanes)
            raise
        moves.finish()
        results = []
        for v, out in zip(leaves, outs):
            host = launch.to_host(out)
            results.append(host if v.varying else host[0])
        return results


@dataclass
class Choice:
    """The strategy for one specialization and what it runs."""

    strategy: str
    fn: Function
    one: OneKernel | None = None
    plans: dict | None = None
    phases: list = field(default_factory=list)


def choose(fn: Function, structured, options: dict) -> Choice:
    """One kernel if the function is lane-local, else structured segments if its
    sync points are all at the top level, else phases of the predicated IR."""
    boundscheck = options.get("boundscheck", True)
    if structured is not None:
        lane_local = structured()
        if fits(lane_local) is None:
            return Choice("one kernel", lane_local, one=OneKernel(lane_local, options))
        try:
            plans, cut = plan_segments(lane_local, boundscheck)
            return Choice("segments", lane_local, plans=plans, phases=cut)
        except Unsuitable:
            pass
    plans, cut = phases.plan(fn, boundscheck)
    return Choice("phases", fn, plans=plans, phases=cut)


class CudaBackend:
    """The cuda backend's entry point (see ``hydra.backends``)."""

    protocol = PROTOCOLS["cuda"]
    #: of the phases strategy (the one kernel and segments run everything else)
    lowerable = staticmethod(phases.lowerable)

    @staticmethod
    def compile(fn: Function, options: dict, structured=None):
        refuse_array_ops(fn, "cuda")
        choice = choose(fn, structured, options)
        if choice.one is None:
            return _phase_runner(choice, options)
        predicated: list = []

        def exact(args: list, lanes: int) -> None:
            if not predicated:
                plans, _ = phases.plan(fn, options.get("boundscheck", True))
                predicated.append(_phase_runner(Choice("phases", fn, plans=plans), options))
            predicated[0](args, lanes)
        choice.one.exact = exact
        return choice.one

    @staticmethod
    def dump(fn: Function, stage: str, options: dict, structured=None) -> str:
        """``numba``: the generated kernel source(s); ``ptx``: their PTX (a real GPU
        only).  Given ``structured`` (as ``compile`` is), the kernels the run uses;
        without it, the phases of the predicated ``fn``."""
        if stage not in ("numba", "ptx"):
            raise HydraError(f"the cuda backend has no stage {stage!r}; it has numba and ptx")
        refuse_array_ops(fn, "cuda")
        choice = choose(fn, structured, options)
        if stage == "numba":
            if choice.one is not None:
                return "# cuda backend: one kernel, one thread per lane\n" + \
                    choice.one.code.source
            head = (f"# cuda backend: {choice.strategy}: {len(choice.phases)} kernel(s) of "
                    f"{fn.name}, launched in program order; the host runs the rest:\n")
            on_host = {id(item) for items in choice.plans.values() for item in items}
            for op in choice.fn.walk():
                if id(op) in on_host and not op.info.terminator:
                    line = f" (line {op.loc.line})" if op.loc and op.loc.line > 0 else ""
                    head += f"#   {op.opcode}{line}: {phases.lowerable(op)[1]}\n"
            return head + PRELUDE + "".join("\n\n" + p.text for p in choice.phases)
        if _on_simulator():
            raise HydraError("the CUDA simulator (NUMBA_ENABLE_CUDASIM=1) compiles no PTX: "
                             "dump-ir --stage ptx needs a real GPU and the CUDA toolkit")
        return "\n".join(_ptx(*k) for k in kernels(choice))


def kernels(choice: Choice) -> list[tuple[str, str, list, list]]:
    """Every generated kernel of a choice: (source, entry, parameter (type, varying)
    pairs, output types)."""
    if choice.one is not None:
        code, f = choice.one.code, choice.fn
        params = [(p.type, p.varying) for p in f.params]
        params += [(ArrayType(scalar(a.dtype), a.ndim), False) for a in code.globals]
        return [(code.source, code.entry, params,
                 [v.type for v in f.body.terminator.operands])]
    return [(p.source, p.label, [(v.type, v.varying) for v in p.inputs],
             [v.type for v in p.outputs]) for p in choice.phases]


def signature(params: list, outs: list) -> tuple:
    """The numba argument types a kernel is launched with: N, its parameters (a
    varying scalar as an array of lanes, a varying array with a leading lane axis),
    its outputs, the error buffer."""
    from numba import types as nt
    from numba.np.numpy_support import from_dtype

    def array(t, ndim):
        return nt.Array(from_dtype(t.dtype), ndim, "A")
    sig = [nt.int64]
    for t, varying in params:
        if isinstance(t, ArrayType):
            sig.append(array(t.dtype, t.ndim + (1 if varying else 0)))
        else:
            sig.append(array(t, 1) if varying else from_dtype(t.dtype))
    sig += [array(t, 1) for t in outs]
    sig.append(nt.Array(nt.int64, 2, "C"))
    return tuple(sig)


def _ptx(source: str, entry: str, params: list, outs: list) -> str:
    """PTX of one generated kernel (a real GPU and the CUDA toolkit only)."""
    namespace: dict = {}
    exec(compile(source, entry, "exec"), namespace)
    ptx, _ = cuda.compile_ptx_for_current_device(namespace[entry], signature(params, outs))
    return f"// {entry}\n{ptx}"


def _phase_runner(choice: Choice, options: dict):
    """The runner of a segments or phases choice."""
    errors = launch.ErrorBuffer()

    def run(args: list, lanes: int) -> list:
        host_args, back = _host_arrays(args)
        try:
            with np.errstate(all="ignore"):
                return phases.PhaseKernel(choice.fn, lanes, choice.plans, errors,
                                          options)(host_args)
        finally:
            for device, host in back:
                device.copy_to_device(host)
    run.strategy = choice.strategy
    return run


def _host_arrays(args: list):
    """Device arrays among ``args`` copied to the host (the phases' host ops need
    them there) and the copies to write back afterwards."""
    out, back = [], []
    for a in args:
        if launch.is_device_array(a):
            d = launch.as_device(a)
            host = d.copy_to_host()
            back.append((d, host))
            out.append(host)
        else:
            out.append(a)
    return out, back
