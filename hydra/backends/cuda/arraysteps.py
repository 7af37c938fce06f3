"""The host side of the cuda backend's phases: the executor's steps, the common per-lane
array ones written once against the launch's array namespace.

Takes: the items ``phases.plan`` gives a region (phase kernels, and the ops the host
runs between them, in program order) and the launch's namespace ``host.xp``
(``hydra.arraynamespace.choose``: NumPy under the CUDA simulator, CuPy on a GPU,
``Strict`` under ``HYDRA_ARRAY_NAMESPACE=strict``).
Guarantees: ``CudaPlanner.segments(region, items)`` is the region's list of ``(item,
ids dead after it)``, made once per region and kept for later calls: each phase as it
is, each maximal run of host ops as the executor's steps (``CudaPlanner.steps``), whose
dead values are dropped after them as ``steps.run_steps`` drops them.

- ``namespace_step(op)``: the step of a common per-lane array op, computed on ``xp``
  with no transfer, its result left there (``Resident``): elementwise ufuncs and
  casts, reductions over a lane's axes (argmax/argmin too), the products that are one
  GEMM over the lanes, views by uniform indices, reshapes, transposes and copies,
  ``np.zeros`` and kin (``local_array``), selects of arrays, stores at uniform places
  into a lane's own array, and array dimensions.  Each calls the same NumPy function
  on the same values as its host rule (``hydra.executor.arrays``, ``batching``), so on
  the NumPy namespace the bits are the rule's; rows of inactive lanes are computed
  too (no lane observes them, as with the rule's masked ops).  Where a value is not
  as the step expects (an index out of bounds, an undefined arm, a read-only target),
  the host rule runs instead and raises or decides as it does.
- ``ChainStep``: a maximal chain of elementwise ops, as the executor's fusion finds it
  (``planner.schedule``, ``fuse.fusable``: the cpu backend's rule) and placed where it
  places a ``Fused`` step: on a device namespace (CuPy) one kernel ``chains``
  generates, only the values an op outside the chain reads written; on NumPy (the
  simulator) and on ``Strict`` its ops' own steps in order, the bits as op by op.
- ``OnHost``: every other op by its host rule (``host.run_op``): the env hands the
  rule NumPy values, a resident array moved by the namespace's explicit, counted
  ``to_host``; an array the op writes is copied back into its device array in place,
  so views of it see the write.  ``CrossLane``: a cross-lane intrinsic, on the device
  where ``crosslane`` runs it (a real GPU), else by its host rule.
"""

from __future__ import annotations

import numpy as np

from ...arraynamespace import Strict, to_device
from ...effects import effects
from ...batching import REDUCTIONS, UFUNCS, index_tuple, lane_product, shift_axis
from ...executor.opsteps import int_sizes
from ...executor.fuse import Fused
from ...executor.planner import Planner, deaths, schedule, undefined
from ...executor.steps import OpStep, Step, op_label
from ...ir.core import Op
from ...types import ArrayType, ScalarType
from ..cut import users_of
from . import devarrays, launch
from .chains import ChainKernel, wanted


class Resident:
    """A varying value a namespace step made: an array of the launch's namespace."""

    __slots__ = ("array",)

    def __init__(self, array) -> None:
        self.array = array


def as_numba(xp, a):
    """A resident array as a numba device array for a phase kernel: where it is (CuPy,
    through ``__cuda_array_interface__``), or uploaded (NumPy; ``Strict``'s data is the
    simulator's device memory)."""
    if xp is np:
        return launch.upload(a)
    if isinstance(xp, Strict):
        return launch.upload(a.data)
    return devarrays.import_array(a)


def kernel_memory(xp, a):
    """A resident array as a phase kernel takes a per-lane array: device memory it may
    write in place (``Strict``: its NumPy data, which the simulator's launch copies in
    and back)."""
    return a.data if isinstance(xp, Strict) else a


class NamespaceStep(Step):
    """One op computed on ``host.xp`` by ``fn(xp, lanes, operands, env)``."""

    def __init__(self, op: Op, fn) -> None:
        self.op = op
        self.ops = [op]
        self.fn = fn
        self.ids = [v.id for v in op.operands]
        self.varying = [bool(v.varying) for v in op.operands]
        self.rid = op.results[0].id if op.results else None

    def run(self, host, env) -> None:
        try:
            args = [env.device(i, v) for i, v in zip(self.ids, self.varying)]
        except OnHostOnly:
            args = None
        value = _RULE if args is None else self.fn(host.xp, host.lanes, args, env)
        if value is _RULE:
            OnHost.run(self, host, env)
        elif self.rid is not None:
            env.put(self.rid, value)

    def describe(self) -> str:
        return f"namespace step: {op_label(self.op)}"


#: what a step's ``fn`` returns where its host rule must run instead
_RULE = object()


class OnHostOnly(Exception):
    """A value the namespace steps must not take (a read-only per-lane host array):
    the host rule runs the op."""


class OnHost(OpStep):
    """One op by its host rule, on host copies of resident arrays (see the module
    docstring)."""

    def run(self, host, env) -> None:
        env.copies.clear()
        host.run_op(self.op, env)
        env.wrote(self.op)


class CrossLane(OpStep):
    """A cross-lane intrinsic: on the device where ``crosslane`` runs it."""

    def run(self, host, env) -> None:
        if not host.on_device(self.op, env):
            OnHost.run(self, host, env)


def op_step(op: Op) -> Step:
    return CrossLane(op) if op.opcode == "intrinsic" else namespace_step(op) or OnHost(op)


class ChainStep(Step):
    """A chain of elementwise ops (``fuse.Fused``'s chain): on a device namespace (or
    under ``HYDRA_CUDA_CHAIN_KERNELS=1``) one generated kernel (``chains``), its
    ``outputs`` the only values written; else, and where the kernel refuses its
    inputs, each op's own step in order (NumPy: the same calls as op by op)."""

    def __init__(self, chain: Fused, members: list[Step]) -> None:
        self.ops = chain.ops
        self.members = members
        self.kernel = ChainKernel(chain)
        self.text = chain.label()

    def run(self, host, env) -> None:
        xp = host.xp
        if wanted(xp):
            try:
                args = [env.device(v.id, bool(v.varying)) if env.raw(v.id) is not None
                        else None for v in self.kernel.inputs]
            except OnHostOnly:
                args = None
            outs = None if args is None else self.kernel.run(
                xp, host.lanes, args, lambda a: kernel_memory(xp, a))
            if outs is not None:
                for v, o in zip(self.kernel.outputs, outs):
                    env.put(v.id, o)
                return
        for step in self.members:
            step.run(host, env)

    def describe(self) -> str:
        return (f"chain step ({len(self.ops)} elementwise ops, one generated kernel on a "
                f"device namespace): {self.text}")


class CudaPlanner(Planner):
    """The executor's planner with the cuda host side's steps (module docstring)."""

    def __init__(self, fn) -> None:
        super().__init__(fn)
        self._segments: dict[int, list] = {}
        self._written: list[bool] | None = None

    def resident_arguments(self, xp, args: list, env) -> list:
        """On a namespace other than NumPy: each writable per-lane array argument moved
        to the device once (one array passed twice: one device array), so that the
        views and writes of the call land in one place; the (host, ``Resident``) pairs
        to copy back afterwards, those the function may write."""
        if xp is np:
            return []
        if self._written is None:
            self._written = ["w" in mode for mode in effects(self.fn).params]
        moved: dict[int, Resident] = {}
        back = []
        for p, a, written in zip(self.fn.params, args, self._written):
            if p.varying and isinstance(p.type, ArrayType) and isinstance(a, np.ndarray) \
                    and a.flags.writeable:  # (a read-only one: the rules refuse writes)
                value = moved.get(id(a))
                if value is None:
                    value = moved[id(a)] = Resident(to_device(xp, a))
                if written and all(v is not value for _, v in back):
                    back.append((a, value))
                dict.__setitem__(env, p.id, value)
        return back

    def steps(self, items: list, layers: bool = False) -> list[Step]:
        """Each op's step; a chain of two or more elementwise ops that the executor's
        fusion finds (``planner.schedule``), one ``ChainStep``."""
        if self._users is None:
            self._users, self._undef = users_of(self.fn), undefined(self.fn)
        out: list[Step] = []
        for item in schedule(items, self._users, self._undef, None):
            if isinstance(item, Fused) and len(item.ops) > 1:
                out.append(ChainStep(item, [op_step(op) for op in item.ops]))
            elif isinstance(item, Fused):
                out.append(op_step(item.ops[0]))
            else:
                out.append(op_step(item) if isinstance(item, Op) else item)
        return out

    def segments(self, region, items: list, kernel_step) -> list:
        """``items``' steps (a phase as ``kernel_step(phase)``) with their deaths."""
        got = self._segments.get(id(region))
        if got is None:
            out: list = []
            run: list = []
            for item in items[:-1]:  # (the terminator: the region's caller reads it)
                if isinstance(item, Op):
                    run.append(item)
                    continue
                out += self.steps(run)
                run = []
                out.append(kernel_step(item))
            out += self.steps(run)
            got = self._segments[id(region)] = list(zip(out, deaths(region, [
                s.ops for s in out])))
        return got


# --- the namespace steps ----------------------------------------------------------------

def namespace_step(op: Op) -> NamespaceStep | None:
    """The namespace step of ``op``, or None where its host rule runs it."""
    fn = None
    if op.opcode == "array" and len(op.results) == 1 and op.result.varying \
            and _typed_result(op) and any(v.varying for v in op.operands):
        # (a varying result of uniform operands: each lane's own copy, by the rule)
        name = op.attrs["fn"]
        if name in UFUNCS or name == "astype":
            fn = _elementwise(op)
        elif name in REDUCTIONS:
            fn = _reduction(op)
        elif name in ("matmul", "dot"):
            fn = _product(op)
        elif name in ("getitem", "reshape", "transpose", "copy"):
            fn = _view(op)
    elif op.opcode == "array_store" and op.operands[0].varying:
        fn = _store(op)
    elif op.opcode == "local_array":
        fn = _allocate(op)
    elif op.opcode == "select" and isinstance(op.result.type, ArrayType):
        fn = _select(op)
    elif op.opcode == "array_dim":
        fn = _dimension(op)
    return None if fn is None else NamespaceStep(op, fn)


def _typed_result(op: Op) -> bool:
    t = op.result.type
    return isinstance(t, ScalarType) or isinstance(t, ArrayType) and t.shape is not None


def _dtype(op: Op) -> np.dtype:
    t = op.result.type
    return t.dtype.dtype if isinstance(t, ArrayType) else t.dtype


def _typed(value, dtype):
    return value if value.dtype == dtype else value.astype(dtype)


def _elementwise(op: Op):
    """``batching.elementwise_rule``: varying operands ``[N, 1.., *s]``, right-aligned
    against the uniform ones."""
    name, params = op.attrs["fn"], op.attrs["params"]
    dtype = _dtype(op)
    if name == "astype":
        to = np.dtype(params["dtype"])

        def f(xp, a):
            return a.astype(to)
    elif params:
        return None
    else:
        ufunc = UFUNCS[name].__name__

        def f(xp, *args):
            g = getattr(xp, ufunc, None)  # (a namespace without it: the host rule)
            return _RULE if g is None else g(*args)
    vary = [bool(v.varying) for v in op.operands]
    r = max([op.result.type.ndim if isinstance(op.result.type, ArrayType) else 0] +
            [v.type.ndim for v in op.operands if v.varying and isinstance(v.type, ArrayType)])

    def run(xp, n, args, env):
        aligned = [a.reshape((n,) + (1,) * (r - (a.ndim - 1)) + a.shape[1:]) if v else a
                   for a, v in zip(args, vary)]
        out = f(xp, *aligned)
        return out if out is _RULE else _typed(out, dtype)
    return run


def _reduction(op: Op):
    """``batching.reduction_rule``."""
    name, params = op.attrs["fn"], op.attrs["params"]
    if len(op.operands) != 1 or not op.operands[0].varying or \
            set(params) - {"axis", "keepdims"}:
        return None
    axis, keep = params.get("axis"), params.get("keepdims", False)
    dtype = _dtype(op)
    if name in ("argmax", "argmin") and axis is None:
        if keep:
            return None

        def run(xp, n, args, env):
            return _typed(getattr(xp, name)(args[0].reshape(n, -1), axis=1), dtype)
        return run
    axes = shift_axis(axis, op.operands[0].type.ndim)

    def run(xp, n, args, env):
        return _typed(getattr(xp, name)(args[0], axis=axes, keepdims=keep), dtype)
    return run


def _product(op: Op):
    """``batching.matmul_rule``'s cases that are one product over the lanes
    (``batching.lane_product``)."""
    if len(op.operands) != 2 or not all(isinstance(v.type, ArrayType) for v in op.operands):
        return None
    a, b = op.operands
    va, vb = bool(a.varying), bool(b.varying)
    da, db = a.type.ndim, b.type.ndim
    dtype = _dtype(op)
    if da == 0 or db == 0 or op.attrs["fn"] == "dot" and db > 2 or \
            va != vb and (db if va else da) > 2:
        return None

    def run(xp, n, args, env):
        got = lane_product(xp, *args, va, vb, da, db)
        return _RULE if got is None else _typed(got, dtype)
    return run


def _uniform_index(op: Op, ints: list, dims: tuple) -> list | None:
    """Uniform indices made non-negative, or None where one is out of bounds (the host
    rule names it)."""
    out = []
    for i, n in zip(ints, int_sizes(op.attrs["params"]["index"], dims)):
        i = int(i)
        if not -n <= i < n:
            return None
        out.append(i + n if i < 0 else i)
    return out


def _view(op: Op):
    """Views and copies of a lane's own array (``arrays._getitem`` with uniform
    indices, ``batching``'s reshape, transpose and copy rules)."""
    name, params = op.attrs["fn"], op.attrs["params"]
    src = op.operands[0]
    if not (src.varying and isinstance(src.type, ArrayType)) or \
            any(v.varying for v in op.operands[1:]):
        return None
    if name == "getitem":
        def run(xp, n, args, env):
            a = args[0]
            ints = _uniform_index(op, args[1:], a.shape[1:])
            if ints is None:
                return _RULE
            return a[(slice(None),) + index_tuple(params["index"], ints)]
        return run
    if name == "reshape":
        shape = tuple(op.result.type.shape)

        def run(xp, n, args, env):
            return args[0].reshape((n,) + shape)
        return run
    if name == "transpose" and not params:
        axes = (0,) + tuple(range(src.type.ndim, 0, -1))

        def run(xp, n, args, env):
            return xp.transpose(args[0], axes)
        return run
    if name == "copy":
        order = params.get("order", "C")

        def run(xp, n, args, env):
            return args[0].copy(order=order)
        return run
    return None


def _store(op: Op):
    """``a[index] = value`` into a lane's own array at uniform indices
    (``arrays.array_store_rule``): the active lanes' rows take the value."""
    params = op.attrs["params"]
    if any(v.varying for v in op.operands[2:]):
        return None
    sub = tuple(params["shape"])
    value_varying = bool(op.operands[1].varying)
    target = op.operands[0].id
    mid = op.mask.id if op.mask is not None else None

    def run(xp, n, args, env):
        if not env.writable(target):
            return _RULE
        a, value = args[:2]
        ints = _uniform_index(op, args[2:], a.shape[1:])
        if ints is None:
            return _RULE
        idx = (slice(None),) + index_tuple(params["index"], ints)
        if value_varying:
            value = value.reshape((n,) + (1,) * (len(sub) - (value.ndim - 1)) + value.shape[1:])
            if xp is not np:
                value = value.copy()  # it may overlap a (NumPy copies; CuPy need not)
        if mid is not None:
            mask = env.device(mid).reshape((n,) + (1,) * len(sub))
            value = value.astype(a.dtype) if value_varying else \
                xp.asarray(value, dtype=a.dtype)
            value = xp.where(mask, value, a[idx])
        a[idx] = value
        env.wrote(op)
        return None
    return run


def _allocate(op: Op):
    """``np.zeros((3, 4))`` and kin: one ``[N, *dims]`` array, filled."""
    fill = op.attrs["fill"] or 0
    dtype = op.attrs["dtype"]

    def run(xp, n, args, env):
        dims = [int(d) for d in args]
        if any(d < 0 for d in dims):
            return _RULE
        return xp.full((n, *dims), fill, dtype=dtype)
    return run


def _select(op: Op):
    """``c ? a : b`` of arrays (``arrays.select_rule``): whole lane rows."""
    t = op.result.type
    c, a, b = op.operands
    dtype = t.dtype.dtype

    def run(xp, n, args, env):
        if env.raw(a.id) is None or env.raw(b.id) is None:
            return _RULE
        if not c.varying:  # the host knows which: the value as it is
            return env.raw(a.id if bool(env[c.id]) else b.id)
        cond = args[0].reshape((n,) + (1,) * t.ndim)
        return _typed(xp.where(cond, args[1], args[2]), dtype)
    return run


def _dimension(op: Op):
    axis = op.attrs["axis"] + (1 if op.operands[0].varying else 0)

    def run(xp, n, args, env):
        return np.int64(env.shape(op.operands[0].id)[axis])
    return run
