"""Kernels with sync points: the predicated IR driven from the host, phase by phase.

Takes: the predicated SSA (every ``if``/``while`` uniform) of any function.
Guarantees: the same results, prints, errors and in-place writes as the numpy
backend.  Each region is cut (``hydra.backends.cut``, with ``lowerable`` as the
capability) into *phases*: maximal runs of lane-local ops with a varying result
(arithmetic, casts, selects, math, lane-private loads and stores, checks) become one
generated kernel, one thread per lane; everything else runs on the host between
phases, in program order, which keeps the lockstep order:
uniform values and control flow (the host drives every ``if``/``while``), the
``any`` of a mask, per-lane array operations (SPEC section 8), prints (lane order per
statement), the loads and stores that are sync points, and the cross-lane intrinsics.
A region's phases and host ops run as the executor's steps by its one runner
(``steps.run_steps``; ``arraysteps.CudaPlanner`` makes them): the common per-lane
array ops on the launch's array namespace, every other host op by its host rule on
the phases' values copied back from the device.  A sync point inside a varying loop
is therefore simply a host-driven loop that launches the loop body's phases each
iteration.

Per-lane values a phase computes stay in device arrays (``OnDevice``) for the
phases after it; the host copies one back only when a host op reads it.  Per-lane
arrays the namespace steps make stay in the namespace (``arraysteps.Resident``) and go
to the phases that use them as device memory; shared arrays and the host rules' arrays
live on the host and travel to each phase that touches them (and back when it writes
them).  ``segments.py`` reuses ``PhaseKernel`` with structured kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...arraynamespace import from_device, to_device, to_host
from ...executor.host import Host
from ...executor.policy import OFF
from ...executor.steps import Step, run_steps
from ...ir.core import BINARY_OPS, UNARY_OPS, Function, Op, Region
from ...types import ArrayType, ScalarType
from ..protocol import PROTOCOLS
from ..cut import Run, cut, nested, users_of
from . import crosslane, devarrays, launch
from .arraysteps import CudaPlanner, OnHostOnly, Resident, as_numba, kernel_memory
from .emit import ErrorSites, Frame, OpEmitter, ident, name
from .structured import PRELUDE

_KERNEL_OPS = BINARY_OPS | UNARY_OPS | {"cast", "select", "math", "load", "store", "check",
                                        "intrinsic"}
#: why the other ops run on the host in this strategy
_HOST = {"if": "control flow: the host drives it", "while": "control flow: the host drives it",
         "local_array": "per-lane arrays live in the launch's array namespace (arraysteps) "
                        "and go to the kernels that use them",
         "entry_mask": "the lanes that run: the host makes the mask",
         "global_array": "a captured array: passed to the kernels that use it",
         # (one kernel keeps it in device memory: ``structured``)
         "tape_push": "hydra.grad's tape: the host keeps it between phases",
         "tape_pop": "hydra.grad's tape: the host keeps it between phases"}


def lowerable(op: Op) -> tuple[bool, str]:
    """Does this op run inside a phase kernel?  If not, why the host runs it."""
    if "sync" in op.attrs:
        return False, f"sync point: {op.attrs['sync']}"
    host_only = PROTOCOLS["cuda"].host_only
    key = f"intrinsic {op.attrs['name']}" if op.opcode == "intrinsic" else \
        f"math {op.attrs['fn']}" if op.opcode == "math" else op.opcode
    if key in host_only or op.opcode in _HOST:
        return False, host_only.get(key) or _HOST[op.opcode]
    if op.opcode in ("store", "check") or op.opcode in _KERNEL_OPS and all(
            r.varying and isinstance(r.type, ScalarType) for r in op.results):
        return True, ""
    return False, "no per-lane result: the host computes it"


def uniform_pure(op: Op) -> bool:
    """A pure op of uniform values only: the host may compute it ahead of the
    kernel run it sits in (its operands never come from a kernel)."""
    return (not op.effect and not op.info.terminator and not op.regions
            and "sync" not in op.attrs and not op.traps
            and all(v.varying is False for v in op.inputs() + op.results))


@dataclass
class Phase:
    """One generated kernel: a run of lane-local ops of one region."""

    ops: list[Op]
    inputs: list
    outputs: list
    source: str
    #: the kernel function alone (``source`` adds the imports and helpers)
    text: str
    sites: ErrorSites
    written: set
    label: str
    kernel: object = None


def make_phase(run: Run, label: str, options: dict, emitter=OpEmitter,
               constants=None) -> Phase:
    """One kernel for a run of the cutter (its ops with the regions they own, if the
    emitter takes them): the run's live-ins are its inputs, its live-outs its outputs."""
    em = emitter(Frame.of(options))
    em.constants.update(constants or {})
    for v in run.inputs:
        em.take(v, f"in_{name(v)}")
    for op in run.ops:
        em.emit(op)
    params = [f"in_{name(v)}" for v in run.inputs] + [f"out_{name(v)}" for v in run.outputs]
    text = em.kernel(label, params, [(f"out_{name(v)}", v) for v in run.outputs])
    written = {o.written_array.id if o.opcode != "count" else o.operands[0].id
               for op in run.ops for o in nested(op)
               if o.written_array is not None or o.opcode == "count"}  # (hydra.profile)
    return Phase(run.ops, run.inputs, run.outputs, PRELUDE + "\n\n" + text, text,
                 em.frame.sites, written, label)


def plan(fn: Function, options: dict) -> tuple[dict[int, list], list[Phase]]:
    """For every region (by id): its items in order, each an ``Op`` run on the host
    or a ``Phase``; and every phase in the order they were cut."""
    users = users_of(fn)
    plans: dict[int, list] = {}
    phases: list[Phase] = []

    def visit(region: Region) -> None:
        # a uniform op joins no kernel; the host computes it ahead of the run it sits in
        items = cut(region.ops, lambda op: lowerable(op)[0], users,
                    lambda op, run: bool(run) and uniform_pure(op))
        for k, item in enumerate(items):
            if isinstance(item, Run):
                continue
            for inner in item.regions:  # (numbered before the run this op closes)
                visit(inner)
            if k and isinstance(items[k - 1], Run):
                label = f"phase{len(phases) + 1}_{ident(fn.name)}"
                phases.append(make_phase(items[k - 1], label, options))
                items[k - 1] = phases[-1]
        plans[id(region)] = items
    visit(fn.body)
    return plans, phases


@dataclass(eq=False, slots=True)
class OnDevice:
    """A per-lane value that lives in a device array; the host copy is made the first
    time a host op reads it."""

    array: object
    host: np.ndarray | None = None

    def on_host(self) -> np.ndarray:
        if self.host is None:
            self.host = launch.to_host(self.array)
        return self.host


class Env(dict):
    """Values by id, as the host rules want them (``env[id]``: host arrays), while
    phases pass device arrays on to each other through ``raw`` and the namespace steps
    (``arraysteps``) take and leave arrays of the launch's namespace ``xp``
    (``device``, ``put``).  Every move between the two is explicit: a resident array a
    host rule reads goes by ``to_host`` (counted), a host array a namespace step reads
    by ``to_device`` (once, until something writes an array)."""

    def __init__(self, items, xp=np) -> None:
        super().__init__(items)
        self.xp = xp
        #: id -> (the host value, the namespace's copy of it), until an array is written
        self.uploaded: dict = {}
        #: id -> (the resident value, its host copy) for the host op now running
        self.copies: dict = {}

    def __getitem__(self, key):
        value = dict.__getitem__(self, key)
        if isinstance(value, OnDevice):
            return value.on_host()
        if isinstance(value, Resident):
            got = self.copies.get(key)
            if got is None or got[0] is not value:  # (a loop's next trip: a new value)
                devarrays.count("host_round_trips")
                got = self.copies[key] = (value, to_host(self.xp, value.array))
            return got[1]
        return value

    def raw(self, key):
        return dict.__getitem__(self, key)

    def pop(self, key, default=None):
        self.uploaded.pop(key, None)
        self.copies.pop(key, None)
        return super().pop(key, default)

    def device(self, key, varying: bool = False):
        """The value as the namespace steps take it: an array of ``xp`` (a uniform
        number as it is).  A per-lane (``varying``) host array moves to the device for
        good, under every id that holds it, so that views and writes after this one
        land in one place; a read-only one stays with the host rules (``OnHostOnly``),
        which refuse writes into it."""
        value = dict.__getitem__(self, key)
        if isinstance(value, Resident):
            return value.array
        if self.xp is np:
            return self[key]
        if isinstance(value, np.ndarray) and not value.ndim:
            return value[()]
        if not isinstance(value, (np.ndarray, OnDevice)):
            return value
        if varying and isinstance(value, np.ndarray):
            if not value.flags.writeable:
                raise OnHostOnly(key)
            moved = Resident(to_device(self.xp, value))
            for k, v in list(self.items()):  # (dict.items: the raw values)
                if v is value:
                    dict.__setitem__(self, k, moved)
            return moved.array
        got = self.uploaded.get(key)
        if got is None or got[0] is not value:  # (a loop's next trip: a new value)
            got = self.uploaded[key] = (value, from_device(self.xp, value.array)
                                        if isinstance(value, OnDevice) else
                                        to_device(self.xp, value))
        return got[1]

    def put(self, key, value) -> None:
        """A namespace step's result: an array of ``xp`` stays resident."""
        if self.xp is not np and value is not None and not isinstance(
                value, (np.ndarray, np.generic, Resident, OnDevice)):
            value = Resident(value)
        dict.__setitem__(self, key, value)

    def writable(self, key) -> bool:
        """May a namespace step write the array ``key`` in place?  (A host array a
        namespace other than NumPy sees only as a copy: its host rule writes it.)"""
        value = dict.__getitem__(self, key)
        if isinstance(value, Resident):
            return True
        return self.xp is np and isinstance(value, np.ndarray) and value.flags.writeable

    def shape(self, key) -> tuple:
        value = dict.__getitem__(self, key)
        return value.array.shape if isinstance(value, (Resident, OnDevice)) else \
            np.shape(value)

    def wrote(self, op: Op) -> None:
        """After ``op`` (which may have written an array: one with regions may have run
        its ops by host rules, as a compacted loop does): a host rule's write of a
        resident array's host copy goes back into the device array, in place (its
        views see it); copies made before the write are dropped."""
        target = op.written_array
        if target is None and not op.regions:  # it wrote nothing
            return
        if target is not None and target.id in self.copies:
            value, host = self.copies[target.id]
            if value is dict.__getitem__(self, target.id):
                value.array[...] = to_device(self.xp, host)
        self.uploaded.clear()
        self.copies.clear()


class PhaseStep(Step):
    """A phase kernel among the host's steps (``arraysteps.CudaPlanner.segments``)."""

    def __init__(self, phase: Phase) -> None:
        self.phase = phase
        self.ops = phase.ops

    def run(self, host, env: Env) -> None:
        host.run_phase(self.phase, env)

    def describe(self) -> str:
        return f"cuda kernel {self.phase.label}"


class PhaseKernel(Host):
    """Runs one predicated function: host ops as the numpy backend does, phases as
    CUDA kernels."""

    def __init__(self, fn: Function, lanes: int, plans: dict[int, list],
                 errors: launch.ErrorBuffer, options: dict,
                 planner: CudaPlanner | None = None, xp=np) -> None:
        # masked over all lanes, never compacted (the compaction option has no effect
        # on cuda): compact.run would run a loop by host rules, off the device
        super().__init__(fn, lanes, OFF, planner or CudaPlanner(fn))
        self.xp = xp
        self.plans = plans
        self.errors = errors
        self.options = options

    def __call__(self, args: list, on_device: bool = False) -> list:
        """The result leaves: NumPy, or with ``on_device`` every varying one a device
        array (a value the host computed is uploaded)."""
        # a varying number given as a GPU array is a per-lane value already on the device
        env = Env(((p.id, OnDevice(a) if p.varying and isinstance(p.type, ScalarType)
                    and launch.is_device_array(a) else a)
                   for p, a in zip(self.fn.params, args)), self.xp)
        back = self.planner.resident_arguments(self.xp, args, env)
        try:
            leaves = self.region(self.fn.body, env)
        finally:  # (writes before an error are the caller's too, as on the reference)
            for host, value in back:
                host[...] = to_host(self.xp, value.array)
        if not on_device:
            return [x.on_host() if isinstance(x, OnDevice) else
                    to_host(self.xp, x.array) if isinstance(x, Resident) else x
                    for x in leaves]
        out = []
        for v, x in zip(self.fn.body.terminator.operands, leaves):
            if isinstance(x, Resident):
                x = as_numba(self.xp, x.array)
            elif isinstance(x, OnDevice):
                x = x.array
            elif v.varying and not launch.is_device_array(x):
                x = self.lanes_on_device(v, env)
            out.append(x)
        return out

    def carried(self, env: Env, v):
        return env.raw(v.id)  # a loop passes it on: it stays where it is

    def region(self, region: Region, env: Env) -> list:
        items = self.plans[id(region)]
        run_steps(self, self.planner.segments(region, items, PhaseStep), env)
        # carried values stay where they are (a loop's phases keep theirs on the
        # device); the host reads only what it needs
        return [env.raw(v.id) for v in items[-1].operands]

    def on_device(self, op: Op, env: Env) -> bool:
        """Run a cross-lane intrinsic by ``crosslane``'s kernels where they apply (real
        hardware, its operand already on the device); False: the host runs it."""
        if crosslane.mode() is None or not op.operands:
            return False
        if crosslane.atomic_supports(op):
            return self.atomic_on_device(op, env)
        if not isinstance(env.raw(op.operands[0].id), OnDevice):
            return False
        kernels = crosslane.supports(op)
        if not kernels and not crosslane.portable(op):
            return False
        others = [env[v.id] if op.attrs["name"] == "broadcast" else self.lanes_on_device(v, env)
                  for v in op.operands[1:]]
        mask = self.mask_on_device(op, env)
        x = env.raw(op.operands[0].id).array
        out = crosslane.run(op, x, others, mask, self.lanes, self.errors) if kernels else \
            crosslane.run_portable(op, x, mask, self.lanes)
        if op.results:
            env[op.result.id] = OnDevice(out) if op.result.varying else out
        return True

    def atomic_on_device(self, op: Op, env: Env) -> bool:
        """``atomic_add`` into an integer array on the device, by device atomics."""
        a = env.raw(op.operands[0].id)
        if isinstance(a, OnDevice) or not launch.is_device_array(a):
            return False  # a host array: the host adds
        _, i, v = op.operands
        crosslane.atomic_add(a, self.lanes_on_device(i, env), self.lanes_on_device(v, env),
                             self.mask_on_device(op, env), self.lanes, op.loc, self.errors)
        return True

    def lanes_on_device(self, v, env: Env):
        """A per-lane value as a device array of N entries (uploaded if the host has it)."""
        x = env.raw(v.id)
        if isinstance(x, OnDevice):
            return x.array
        return launch.upload(np.broadcast_to(np.asarray(x, dtype=v.type.dtype), (self.lanes,)))

    def mask_on_device(self, op: Op, env: Env):
        """The op's active lanes on the device, or None where every lane is active."""
        mask = None if op.mask is None else env.raw(op.mask.id)
        if isinstance(mask, OnDevice):
            return mask.array
        if mask is None:
            return None
        host = np.broadcast_to(np.asarray(mask, dtype=bool), (self.lanes,))
        return None if host.all() else launch.upload(host)

    def run_phase(self, phase: Phase, env: Env) -> None:
        if phase.kernel is None:
            phase.kernel = launch.build(phase.source, phase.label, "phase", self.options)
        moves = launch.Transfers()
        args = []
        for v in phase.inputs:
            x = env.raw(v.id)
            if isinstance(x, Resident) and isinstance(v.type, ArrayType):
                args.append(moves.array(kernel_memory(self.xp, x.array), v.id in phase.written))
            elif isinstance(x, Resident):  # a per-lane number a namespace step made
                env[v.id] = OnDevice(as_numba(self.xp, x.array))
                args.append(env.raw(v.id).array)
            elif isinstance(x, OnDevice):
                args.append(x.array)
            elif isinstance(v.type, ArrayType):
                args.append(moves.array(x, v.id in phase.written))
            elif v.varying:  # uploaded once: later phases find it on the device
                env[v.id] = OnDevice(self.lanes_on_device(v, env), x)
                args.append(env.raw(v.id).array)
            else:
                args.append(launch.scalar_arg(x, v.type.dtype))
        outs = [launch.cuda.device_array(self.lanes if v.varying else 1, dtype=v.type.dtype)
                for v in phase.outputs]
        launch.launch(phase.kernel, self.lanes, args + outs + [self.errors.get(self.lanes)])
        self.errors.check(self.lanes, phase.sites)
        moves.finish()
        if phase.written:  # (copies of what it wrote are stale now)
            env.uploaded.clear()
            env.copies.clear()
        for v, d in zip(phase.outputs, outs):
            env[v.id] = OnDevice(d) if v.varying else launch.to_host(d)[0]
