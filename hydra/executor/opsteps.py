"""Precomputed host steps of per-lane array ops: the per-call Python cost.

Takes: one op that runs on the host, and the backend's native loop compiler (or None).
Guarantees: ``quick(op, compile_loop)`` is None or a ``steps.Quick`` step that puts
the same values into ``env`` as ``host.run_op`` would, for the common cheap ops of
per-lane array code (views by static slices and uniform indices, reshapes, transposes,
copies, constants, reductions, elementwise ops that do not fuse, ops on uniform arrays
only).  Everything the host rule re-derives on every call (the rule to use, index
tuples, shifted axes, the result dtype, lane-axis alignment) is worked out once here;
a uniform index out of bounds goes to ``host.run_op``, which raises the error (or, on
no active lane, reads index 0) exactly as before.  Reductions are ``reductions``',
products ``products``'.  A digits-CNN step runs ~55
such ops, each ~3-10 us through the general rules.
"""

from __future__ import annotations

import numpy as np

from ..batching import (ELEMENTWISE, FRESH, PER_LANE, REDUCTIONS, index_tuple, int_axes,
                        shift_axis)
from ..ir.core import LANE_ARRAY_FNS, Op
from ..types import ArrayType, ScalarType
from .fuse import loop_ready, shape_of
from .products import product_step
from .reductions import axis_reduction, reduction_step
from .smallsort import sort_step
from .windowsteps import avg_pool_grad_step, pool_grad_step
from .steps import Quick, converter

#: array functions with a generated native loop of their own (given the backend's loop
#: compiler; each maker returns None for inputs its loop does not take)
NATIVE_STEPS = {"sort": sort_step, "argsort": sort_step,
                "max_pool2d_grad": pool_grad_step, "avg_pool2d_grad": avg_pool_grad_step}


def quick(op: Op, compile_loop=None) -> Quick | None:
    """The precomputed step of ``op``, or None where the host rule runs it.
    ``compile_loop``: the backend's compiler of generated loops (``planner``)."""
    if op.opcode == "const" and not op.result.varying:
        value = op.result.type.dtype.type(op.attrs["value"])
        rid = op.result.id

        def const(host, env):
            env[rid] = value
        return Quick(op, const)
    if op.opcode == "intrinsic":
        return reduction_step(op)
    if op.opcode != "array" or len(op.results) != 1:
        return None
    fn, params = op.attrs["fn"], op.attrs["params"]
    if fn in LANE_ARRAY_FNS:
        return reduction_step(op)
    if fn in ("matmul", "dot"):
        return product_step(op, compile_loop)
    native = NATIVE_STEPS.get(fn)
    if native is not None and compile_loop is not None and \
            (step := native(op, compile_loop)) is not None:
        return step
    r = op.result
    rt = r.type
    if not isinstance(rt, (ArrayType, ScalarType)) or \
            isinstance(rt, ArrayType) and rt.shape is None:
        return None
    dtype = rt.dtype.dtype if isinstance(rt, ArrayType) else rt.dtype
    ids = [v.id for v in op.operands]
    vary = [bool(v.varying) for v in op.operands]
    rid = r.id
    make = None
    if fn == "getitem":
        make = _getitem(op)
    elif fn == "reshape" and vary == [True]:
        shape = tuple(rt.shape)

        def make(host, env):
            return env[ids[0]].reshape((host.lanes,) + shape)
    elif fn == "transpose" and vary == [True]:
        axes = (0,) + tuple(range(rt.ndim, 0, -1))

        def make(host, env):
            return env[ids[0]].transpose(axes)
    elif fn == "stack" and compile_loop is not None and all(vary) and len(vary) <= 32 \
            and isinstance(rt, ArrayType) and all(
                isinstance(v.type, ArrayType) and v.type.dtype == rt.dtype
                for v in op.operands):  # not a stack of numbers
        make = _stack(op, ids, dtype, compile_loop)
    elif fn == "copy" and vary == [True]:
        order = params.get("order", "C")  # a.copy(): C; np.copy(a): a's axis order

        def make(host, env):
            return np.array(env[ids[0]], copy=True, order=order)
    elif not any(vary) and r.varying and fn not in FRESH and isinstance(rt, ArrayType):
        pass  # an array the kernel writes (uniformity): the host rule copies it per lane
    elif not any(vary) and fn not in FRESH and op.mask is None:
        make = _uniform(fn, params, ids, dtype, bool(r.varying))
    elif vary == [True] and (reduce := axis_reduction(op)) is not None:
        make = reduce
    elif r.varying and fn in REDUCTIONS and fn not in ("argmax", "argmin") and vary == [True]:
        f = PER_LANE[fn]
        axis = shift_axis(params.get("axis"), op.operands[0].type.ndim)
        keep = params.get("keepdims", False)
        typed = converter(dtype)

        def make(host, env):
            return typed(f(env[ids[0]], axis=axis, keepdims=keep))
    elif r.varying and fn in ELEMENTWISE and op.mask is None and isinstance(rt, ArrayType):
        make = _elementwise(op, fn, params, ids, dtype)
    if make is None:
        return None

    def step(host, env):
        env[rid] = make(host, env)
    return Quick(op, step)


def _uniform(fn, params, ids, dtype, varying: bool):
    """An op on uniform values only: computed once per call, as ``batched`` does."""
    f = PER_LANE[fn]
    typed = converter(dtype)

    def make(host, env):
        out = typed(f(*[env[i] for i in ids], **params))
        return out if out.ndim or varying else out[()]
    return make


def _stack(op: Op, ids: list, dtype, compile_loop):
    """``np.stack`` of per-lane arrays as one generated copy loop (``fuse``), specialized
    on the inputs' per-lane strides: NumPy copies the rows of strided views (the nine
    shifted windows of an im2col) one short row at a time."""
    shape = tuple(op.operands[0].type.shape)
    k = len(ids)
    axis = op.attrs["params"].get("axis", 0) % (len(shape) + 1)
    out = tuple(op.result.type.shape)
    kernels: dict = {}

    def make(host, env):
        arrays = [env[i] for i in ids]
        if any(a is None or a.ndim != len(shape) + 1 for a in arrays):
            host.run_op(op, env)  # a uniform array a select passed through
            return env[op.result.id]
        key = tuple(a.strides[1:] for a in arrays)
        kern = kernels.get(key)
        if kern is None:
            if len(kernels) >= 4 or any(x % dtype.itemsize for st in key for x in st):
                return np.stack(arrays, axis=axis + 1)
            per = [tuple(x // dtype.itemsize for x in st) for st in key]
            kern = kernels[key] = compile_loop(stack_source(shape, k, axis, per))
        result = np.empty((host.lanes,) + out, dtype)
        if not loop_ready(compile_loop, kern, [host.lanes, result, *arrays]):  # building
            return np.stack(arrays, axis=axis + 1)
        kern(host.lanes, result, *arrays)
        return result
    return make


def _elementwise(op: Op, fn, params, ids, dtype):
    """An elementwise op that does not fuse (exp, tanh, ...): its varying operands
    aligned to the result's rank once, as ``batching.elementwise_rule`` does."""
    f = PER_LANE[fn]
    typed = converter(dtype)
    rank = op.result.type.ndim
    pads = [(1,) * (rank - len(shape_of(v))) + shape_of(v) if v.varying else None
            for v in op.operands]

    def make(host, env):
        lanes = host.lanes
        return typed(f(*[env[i] if p is None else env[i].reshape((lanes,) + p)
                         for i, p in zip(ids, pads)], **params))
    return make


def int_sizes(spec, dims: tuple) -> list[int]:
    """The size of the axis each ``("int",)`` item of an index spec indexes."""
    return [dims[axis] for axis in int_axes(spec, len(dims))]


def in_bounds(env: dict, ids: list, sizes: list) -> list | None:
    """The uniform indices ``ids`` made non-negative, or None where one is out of bounds
    for its axis' size (``sizes``): the host rule then raises the error, or reads index
    0 where no lane is active."""
    got = []
    for i, n in zip(ids, sizes):
        k = int(env[i])
        if k < -n or k >= n:
            return None
        got.append(k + n if k < 0 else k)
    return got


def _getitem(op: Op):
    """A view by static slices and uniform integer indices (bounds checked here; an
    index out of bounds goes to the host rule, which raises or reads index 0)."""
    array, *ints = op.operands
    if any(v.varying for v in ints) or not isinstance(array.type, ArrayType) \
            or array.type.shape is None or (op.result.varying and not array.varying):
        return None
    spec = op.attrs["params"]["index"]
    sizes = int_sizes(spec, tuple(array.type.shape))
    lead = (slice(None),) if array.varying else ()
    aid, iids = array.id, [v.id for v in ints]
    if not iids:
        idx = lead + index_tuple(spec, [])

        def view(host, env):
            return env[aid][idx]
        return view

    def make(host, env):
        got = in_bounds(env, iids, sizes)
        if got is None:
            host.run_op(op, env)  # its error (or index 0)
            return env[op.result.id]
        return env[aid][lead + index_tuple(spec, got)]
    return make


# --- np.stack of per-lane arrays: one native copy ---------------------------------------

def stack_source(shape: tuple, k: int, axis: int, strides: list[tuple]) -> str:
    """The loops of ``np.stack`` of ``k`` per-lane arrays of shape ``shape`` at ``axis``
    into a fresh C-ordered ``[N, *out]`` array; ``strides``: each input's per-lane
    element strides (constants: the kernel is specialized on them)."""
    out = shape[:axis] + (k,) + shape[axis:]
    cs = [int(np.prod(out[d + 1:], dtype=np.int64)) for d in range(len(out))]
    ostr = cs[:axis] + cs[axis + 1:]  # per input axis, its stride in the output
    lane = int(np.prod(out, dtype=np.int64))
    ins = [f"a{j}" for j in range(k)]
    lines = [f"def fused(n, o0, {', '.join(ins)}):"]
    lines += [f"    a{j}s = a{j}.strides[0] // a{j}.itemsize" for j in range(k)]
    lines.append("    for i0 in range(n):")
    # a short last axis is spelled out, all loads before all stores: the store of one
    # element between two loads (the loop's order) keeps LLVM from packing them (the
    # output might alias an input); the spelled-out run packs into vector moves
    short = bool(shape) and 0 < shape[-1] <= STACK_SPELLED
    for j in range(k):
        cur, ocur = f"i0 * a{j}s", f"i0 * {lane} + {j * cs[axis]}"
        ind = "        "
        for d, size in enumerate(shape[:-1] if short else shape):
            lines.append(f"{ind}for i{d + 1} in range({size}):")
            ind += "    "
            cur = f"{cur} + i{d + 1} * {strides[j][d]}"
            ocur = f"{ocur} + i{d + 1} * {ostr[d]}"
        if not short:
            lines.append(f"{ind}_st(o0, {ocur}, _ld(a{j}, {cur}))")
            continue
        last = len(shape) - 1
        lines += [f"{ind}v{q} = _ld(a{j}, {cur} + {q * strides[j][last]})"
                  for q in range(shape[-1])]
        lines += [f"{ind}_st(o0, {ocur} + {q * ostr[last]}, v{q})" for q in range(shape[-1])]
    return "\n".join(lines) + "\n"


#: ``np.stack`` spells out a last axis of at most this many elements (``stack_source``)
STACK_SPELLED = 16
