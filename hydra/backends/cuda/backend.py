"""The cuda backend: one GPU thread per lane, through numba.cuda.

``compile`` picks one of two strategies:

- **one kernel** (``structured.py``): a function without sync points, per-lane
  arrays of constant shape and scalar results runs as a single launch of its
  structured IR, divergence left to the hardware;
- **phases** (``phases.py``): anything else runs its predicated IR from the host,
  lane-local stretches as kernels and sync points between them.

Both raise the numpy backend's errors (same class, message, lane) from the
kernels' error buffers, and write the caller's arrays in place.  With
``NUMBA_ENABLE_CUDASIM=1`` everything runs on numba's CUDA simulator, which has no
PTX: ``dump(..., "ptx")`` says so.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ...errors import HydraError
from ...ir.core import Function
from ...types import ArrayType
from . import launch, phases
from .emit import HELPERS
from .structured import PRELUDE, fits, generate




def _on_simulator() -> bool:
    from numba import config
    return bool(config.ENABLE_CUDASIM)


class OneKernel:
    """Runs a lane-local function as a single kernel launch."""

    def __init__(self, fn: Function, boundscheck: bool) -> None:
        self.fn = fn
        self.code = generate(fn, boundscheck)
        self.kernel = None
        stored = {op.operands[0].id for op in fn.walk() if op.opcode == "store"}
        self.written = [p.id in stored for p in fn.params]
        self.globals_written = [op.result.id in stored for op in fn.walk()
                                if op.opcode == "global_array"]

    def __call__(self, args: list, lanes: int) -> list:
        if self.kernel is None:
            self.kernel = launch.build(self.code.source, self.code.entry, self.fn.name)
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
        err = launch.error_buffer(lanes)
        launch.launch(self.kernel, lanes, dev + outs + [err])
        # a failed launch leaves the caller's host arrays as they were
        self.code.sites.raise_first(err.copy_to_host())
        moves.finish()
        results = []
        for v, out in zip(leaves, outs):
            host = out.copy_to_host()
            results.append(host if v.varying else host[0])
        return results


class CudaBackend:
    """The cuda backend's entry point (see ``hydra.backends``)."""

    name = "cuda"
    options: tuple[str, ...] = ("boundscheck",)

    @staticmethod
    def compile(fn: Function, options: dict, structured=None):
        boundscheck = options.get("boundscheck", True)
        if structured is not None:
            lane_local = structured()
            if fits(lane_local) is None:
                return OneKernel(lane_local, boundscheck)
        plans, _ = phases.plan(fn, boundscheck)

        def run(args: list, lanes: int) -> list:
            host_args, back = _host_arrays(args)
            try:
                with np.errstate(all="ignore"):
                    return phases.PhaseKernel(fn, lanes, plans)(host_args)
            finally:
                for device, host in back:
                    device.copy_to_device(host)
        return run

    @staticmethod
    def dump(fn: Function, stage: str, options: dict, structured=None) -> str:
        """``numba``: the generated kernel source(s); ``ptx``: their PTX (a real GPU
        only).  Given ``structured`` (as ``compile`` is), a lane-local function shows
        the one kernel it runs as; otherwise the phases of the predicated ``fn``."""
        if stage not in ("numba", "ptx"):
            raise HydraError(f"the cuda backend has no stage {stage!r}; it has numba and ptx")
        boundscheck = options.get("boundscheck", True)
        if stage == "numba" and structured is not None:
            lane_local = structured()
            if fits(lane_local) is None:
                return "# cuda backend: one kernel, one thread per lane\n" + \
                    generate(lane_local, boundscheck).source
        _, cut = phases.plan(fn, boundscheck)
        if stage == "numba":
            head = (f"# cuda backend: the {len(cut)} phase kernel(s) of {fn.name}, launched "
                    f"in program order; host code runs the rest\n")
            return head + PRELUDE + HELPERS + "".join("\n\n" + p.text for p in cut)
        if _on_simulator():
            raise HydraError("the CUDA simulator (NUMBA_ENABLE_CUDASIM=1) compiles no PTX: "
                             "dump-ir --stage ptx needs a real GPU and the CUDA toolkit")
        return "\n".join(_ptx(p) for p in cut)


def _ptx(phase) -> str:
    """PTX of one phase kernel for its argument types (a real GPU only)."""
    from numba import types as nt
    sig = [nt.int64]
    for v in phase.inputs:
        t = v.type
        if isinstance(t, ArrayType):
            sig.append(nt.Array(nt.from_dtype(t.dtype.dtype), t.ndim + (1 if v.varying else 0),
                                "A"))
        elif v.varying:
            sig.append(nt.Array(nt.from_dtype(t.dtype), 1, "C"))
        else:
            sig.append(nt.from_dtype(t.dtype))
    sig += [nt.Array(nt.from_dtype(v.type.dtype), 1, "C") for v in phase.outputs]
    sig.append(nt.Array(nt.int64, 2, "C"))
    namespace: dict = {}
    exec(compile(phase.source, phase.label, "exec"), namespace)
    ptx, _ = cuda.compile_ptx_for_current_device(namespace[phase.label], tuple(sig))
    return f"// {phase.label}\n{ptx}"


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
