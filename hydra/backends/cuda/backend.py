"""The cuda backend: one GPU thread per lane, through numba.cuda.

``compile`` picks one of three strategies (``runner.strategy`` says which):

- **one kernel** (``structured.py``): a function without sync points, per-lane
  arrays of constant shape and scalar results runs as a single launch of its
  structured IR, divergence left to the hardware;
- **segments** (``segments.py``): sync points outside varying control flow: the
  host drives the uniform branches and loops around them, structured kernels run
  everything in between;
- **phases** (``phases.py``): anything else runs its predicated IR from the host,
  lane-local stretches as kernels and sync points between them; so does every
  function with per-lane array operations, which run between the kernels as the
  executor's steps on the launch's array namespace (``arraysteps``).

All three raise the numpy backend's errors (same class, message, lane) from the
kernels' error buffers, and write the caller's arrays in place.  GPU arrays given as
arguments are used where they are (``devarrays``), and a call with one returns its
varying results on the device, as that argument's kind; the phases keep such an array
on the device unless an op the host runs reads it, and run the cross-lane intrinsics
on values already there by ``crosslane``'s kernels (a real GPU).  A runner's
``last_run_stats`` counts its launches and transfers (``Kernel.last_run_stats``).  Without
a GPU, numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) runs the kernels, and
``tests/test_cuda_typing.py`` compiles them for the CUDA target (up to LLVM IR); the
simulator has no PTX: ``dump(..., "ptx")`` says so.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
from numba import config, cuda

from ...effects import effects
from ...errors import HydraError
from ...executor.steps import op_label
from ...ir.core import Function
from ...types import ArrayType, scalar
from ..protocol import PROTOCOLS
from ...arraynamespace import choose as choose_namespace
from . import crosslane, devarrays, launch, phases
from .arraysteps import CudaPlanner
from .segments import Unsuitable, plan_segments
from .structured import PRELUDE, fits, generate


#: the first capacity of a tape store, in records per lane
TAPE_CAPACITY = 16


class OneKernel:
    """Runs a lane-local function as a single kernel launch."""

    def __init__(self, fn: Function, options: dict) -> None:
        self.fn = fn
        self.options = options
        self.errors = launch.ErrorBuffer()
        #: () -> the runner that runs the call again in lockstep (phases) after a
        #: failure, to raise its error
        self.exact = None
        self.code = generate(fn, options)
        self.kernel = None
        found = effects(fn)  # what is copied back: every array a store may reach
        self.written = ["w" in mode for mode in found.params]
        self.globals_written = ["w" in mode or op.attrs["name"] == "hydra_profile"
                                for op, mode in found.captured]  # (hydra.profile's counts)
        #: records per lane of each hydra.grad tape store (grown on overflow)
        self.tape_capacity = TAPE_CAPACITY

    def launch_growing_tapes(self, dev: list, outs: list, lanes: int, args: list) -> None:
        """Launch (and check) the kernel; where a lane's hydra.grad tape was full,
        launch again with four times the capacity (remembered for later calls)."""
        while True:
            stores = [cuda.device_array((self.tape_capacity, lanes), dtype=dtype)
                      for _, dtypes in self.code.tapes for dtype in dtypes]
            launch.launch(self.kernel, lanes, dev + stores + outs + [self.errors.get(lanes)])
            try:
                self.errors.check(lanes, self.code.sites)
                return
            except launch.TapeOverflow:
                if any(w and launch.is_device_array(a)
                       for a, w in zip(args, self.written)):
                    raise HydraError(
                        f"{self.fn.name}: a hydra.grad tape outgrew {self.tape_capacity} "
                        f"records per lane while the kernel wrote a GPU array argument in "
                        f"place, so it cannot run again; pass a NumPy array, or call once "
                        f"with fewer loop trips first") from None
                self.tape_capacity *= 4

    def run(self, args: list, lanes: int) -> list:
        if self.kernel is None:
            self.kernel = launch.build(self.code.source, self.code.entry, self.fn.name,
                                       self.options)
        kind = devarrays.result_kind(args)
        moves = launch.Transfers()
        dev = [moves.array(a, written) if isinstance(p.type, ArrayType) or p.varying
               else launch.scalar_arg(a, p.type.dtype)
               for p, a, written in zip(self.fn.params, args, self.written)]
        dev += [moves.array(a, written) for a, written in zip(self.code.globals,
                                                              self.globals_written)]
        leaves = self.fn.body.terminator.operands
        outs = [cuda.device_array(lanes if v.varying else 1, dtype=v.type.dtype) for v in leaves]
        try:
            self.launch_growing_tapes(dev, outs, lanes, args)
        except HydraError:
            # Lanes that fail at different statements are ordered by source here,
            # not by lockstep time.  The failed launch left the caller's host arrays
            # as they were, so the phases of the predicated IR can run the call
            # again from the same state and fail exactly as the reference does.
            if self.exact is None or kind is not None:
                raise
            self.exact()(args, lanes)
            raise
        moves.finish()
        # a varying result stays on the device where the call gave a GPU array
        return [kind(out) if v.varying and kind is not None else
                launch.to_host(out) if v.varying else launch.to_host(out)[0]
                for v, out in zip(leaves, outs)]


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
    if structured is not None and not has_array_ops(fn):
        lane_local = structured()
        if fits(lane_local) is None:
            return Choice("one kernel", lane_local, one=OneKernel(lane_local, options))
        try:
            plans, cut = plan_segments(lane_local, options)
            return Choice("segments", lane_local, plans=plans, phases=cut)
        except Unsuitable:
            pass
    plans, cut = phases.plan(fn, options)
    return Choice("phases", fn, plans=plans, phases=cut)


def has_array_ops(fn: Function) -> bool:
    """Per-lane array operations run as the executor's steps on the host side of the
    phases (``arraysteps``), so such a function takes the phases strategy."""
    return any(op.opcode in ("array", "array_store") for op in fn.walk())


class CudaBackend:
    """The cuda backend's entry point (see ``hydra.backends``)."""

    protocol = PROTOCOLS["cuda"]
    #: of the phases strategy (the one kernel and segments run everything else)
    lowerable = staticmethod(phases.lowerable)
    #: a launch holds a stream, not cores (``hydra.scheduler``)
    new_stream = staticmethod(launch.new_stream)
    on_stream = staticmethod(launch.on_stream)
    record_event = staticmethod(launch.record_event)

    @staticmethod
    def launch_cores(options: dict, lanes: int | None) -> int:
        return 0

    @staticmethod
    def compile(fn: Function, options: dict, structured=None):
        choice = choose(fn, structured, options)
        if choice.one is None:
            return _phase_runner(choice, options)
        choice.one.exact = functools.cache(
            lambda: _phase_runner(choose(fn, None, options), options))
        return _counted(choice.one.run, choice.strategy)

    @staticmethod
    def dump(fn: Function, stage: str, options: dict, structured=None) -> str:
        """``numba``: the generated kernel source(s); ``ptx``: their PTX (a real GPU
        only); ``steps``: each region's kernels and host steps in order.  Given
        ``structured`` (as ``compile`` is), the kernels the run uses; without it, the
        phases of the predicated ``fn``."""
        if stage not in ("numba", "ptx", "steps"):
            raise HydraError(f"the cuda backend has no stage {stage!r}; it has numba, ptx "
                             f"and steps")
        choice = choose(fn, structured, options)
        if stage == "steps":
            return planned_steps(choice)
        if stage == "numba":
            if choice.one is not None:
                return "# cuda backend: one kernel, one thread per lane\n" + choice.one.code.source
            head = (f"# cuda backend: {choice.strategy}: {len(choice.phases)} kernel(s) of "
                    f"{fn.name}, launched in program order; the host runs the rest:\n")
            on_host = {id(item) for items in choice.plans.values() for item in items}
            for op in choice.fn.walk():
                if id(op) in on_host and not op.info.terminator:
                    line = f" (line {op.loc.line})" if op.loc and op.loc.line > 0 else ""
                    head += f"#   {op.opcode}{line}: {phases.lowerable(op)[1]}\n"
            return head + PRELUDE + "".join("\n\n" + p.text for p in choice.phases)
        if config.ENABLE_CUDASIM:
            raise HydraError("the CUDA simulator (NUMBA_ENABLE_CUDASIM=1) compiles no PTX: "
                             "dump-ir --stage ptx needs a real GPU and the CUDA toolkit")
        return "\n".join(_ptx(*k) for k in kernels(choice))


def planned_steps(choice: Choice) -> str:
    """``dump-ir --stage steps``: each region's phase kernels and host steps, in the
    order they run (``arraysteps.CudaPlanner.segments``)."""
    if choice.one is not None:
        return "# cuda backend: one kernel, no host steps\n"
    planner = CudaPlanner(choice.fn)
    out = [f"# cuda backend: {choice.strategy}: each region's kernels and host steps"]
    regions = [("function body", choice.fn.body)] + [
        (f"{op_label(op)}, region {k}", r) for op in choice.fn.walk()
        for k, r in enumerate(op.regions)]
    for label, region in regions:
        items = choice.plans.get(id(region))
        if items is not None:
            out.append(f"{label}:")
            out += [f"  {step.describe()}"
                    for step, _ in planner.segments(region, items, phases.PhaseStep)]
    return "\n".join(out) + "\n"


def kernels(choice: Choice) -> list[tuple[str, str, list, list]]:
    """Every generated kernel of a choice: (source, entry, parameter (type, varying)
    pairs, output types)."""
    if choice.one is not None:
        code, f = choice.one.code, choice.fn
        params = [(p.type, p.varying) for p in f.params]
        params += [(ArrayType(scalar(a.dtype), a.ndim), False) for a in code.globals]
        params += [(ArrayType(scalar(d), 1), True) for _, ds in code.tapes for d in ds]
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
    kernel = launch.build(source, entry, "ptx", {}).py_func
    ptx, _ = cuda.compile_ptx_for_current_device(kernel, signature(params, outs))
    return f"// {entry}\n{ptx}"


def _phase_runner(choice: Choice, options: dict):
    """The runner of a segments or phases choice."""
    errors = launch.ErrorBuffer()
    planner = CudaPlanner(choice.fn)  # (its plans kept for every call)
    #: (device atomics?) -> ids of the values a host op reads
    host_read: dict = {}

    def call(args: list, lanes: int) -> list:
        kind = devarrays.result_kind(args)
        device_atomics = crosslane.mode() is not None
        if kind is not None and device_atomics not in host_read:
            host_read[device_atomics] = _read_by_host(choice, device_atomics)
        host_args, back = _host_arrays(choice.fn, args, host_read.get(device_atomics, set()))
        try:
            with np.errstate(all="ignore"):
                leaves = phases.PhaseKernel(choice.fn, lanes, choice.plans, errors, options,
                                            planner, choose_namespace("cuda"))(
                    host_args, on_device=kind is not None)
        finally:
            for device, host in back:
                devarrays.count("uploads")
                device.copy_to_device(host)
        return [kind(x) if launch.is_device_array(x) else x for x in leaves] \
            if kind is not None else leaves
    return _counted(call, choice.strategy)


def _counted(call, strategy: str):
    """The runner ``call(args, lanes)``, its launches and transfers counted in its
    ``last_run_stats`` (``Kernel.last_run_stats``)."""
    def run(args: list, lanes: int) -> list:
        with devarrays.recording(devarrays.Stats()) as stats:
            try:
                return call(args, lanes)
            finally:
                run.last_run_stats = stats.as_dict()
    run.strategy = strategy
    run.last_run_stats = {}
    return run


def _read_by_host(choice: Choice, device_atomics: bool) -> set:
    """Ids of the values an op the host runs reads (a phase kernel reads the others,
    so a device array argument among them stays on the device; so does the integer
    array of an ``atomic_add`` where ``crosslane`` runs those)."""
    found = set()
    for items in choice.plans.values():
        for item in items:
            if isinstance(item, phases.Phase) or item.opcode in ("yield", "condition"):
                continue
            if device_atomics and item.opcode == "intrinsic" and \
                    crosslane.atomic_supports(item):
                found.update(v.id for v in item.operands[1:])
                continue
            found.update(v.id for v in item.operands)
            if item.mask is not None:
                found.add(item.mask.id)
    return found


def _host_arrays(fn: Function, args: list, read_by_host: set):
    """Device arrays among ``args`` that a host op reads, copied to the host, and the
    copies to write back afterwards (those the kernel may write); the others stay
    where they are."""
    out, back = [], []
    for p, a, mode in zip(fn.params, args, effects(fn).params):
        if launch.is_device_array(a) and p.id in read_by_host:
            d = devarrays.import_array(a)
            host = launch.to_host(d)
            if "w" in mode:
                back.append((d, host))
            out.append(host)
        else:
            out.append(devarrays.import_array(a) if launch.is_device_array(a) else a)
    return out, back
