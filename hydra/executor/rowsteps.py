"""The steps of a compacted loop's regions, planned for its rows: the Python cost of a
step of a ragged loop.

Takes: a loop or branch region that a host of compacted rows runs (``compact.run``,
``Host.compacted``), with the region's steps for all lanes (``planner``: fused chains,
``Quick`` steps, ``OpStep``s).
Guarantees: ``plan_rows(region, steps)`` is a list of ``(step, ids dead after it)``
whose steps put the same values into the loop's env as the host of the rows would op
by op (``Host.run_op``), with the per-step work of the general path worked out once
per kernel (a ragged RNN runs ~200 steps of ~8 ops each; the general path cost ~50 us
a step, the GEMMs of 64 lanes ~20 us):

- ``xs[t]`` (a per-lane array from outside the loop at uniform indices): the index is
  checked against the static shape once per step and the compacted rows of the view
  ``xs[:, t]`` are gathered with one ``np.take``; the general path builds the mask of
  the outer lanes and an overlay env to index every lane's view first.
- an ``array`` op masked by the loop's own mask while every row is active
  (``host.full``, which ``compact.run`` sets when the mask the body gets is all true):
  its batching rule directly, as ``arrays.array_rule`` decides for an all-true mask
  (no per-op compaction), without looking at the mask.
- a select on that mask: its first value, as ``Host._passes`` gives (a fused chain of
  just that select is taken as the select: the chain would copy every row).
- fused chains and the other precomputed steps run as they are (their fallbacks go
  through the host of the rows); every other op goes to ``host.run_op`` (lane ids, row
  gathers at varying indices, errors naming the original lane).
- memory (``_Memory``): ``xs[t]`` rows and ``U @ x`` products that only feed ops
  making fresh arrays go into buffers reused every step (and kept per thread between
  calls), and a unary ufunc (``np.tanh``) over a fused chain's fresh result that dies
  there writes over it: the same loops over the same values, without a fresh array.

An index out of bounds, a live-in already gathered whole, or a mask that is not all
true take the general path, which raises the same error (file, line, original lane)
or computes the same values; nothing here changes a bit of any result (a policy with
``plan_steps=False`` runs the ops one by one, for comparison).  Counted in
``compact.COUNTS``: "passed", "unmasked", "taken", "in place".
"""

from __future__ import annotations

import threading

import numpy as np

from ..batching import ELEMENTWISE, PER_LANE, batched, index_tuple
from ..ir.core import LANE_ARRAY_FNS, Op
from ..types import ArrayType, ScalarType
from .compact import COUNTS
from .fuse import Fused
from .opsteps import in_bounds, int_sizes
from .scalars import BINARY, COMPARE
from .steps import OpStep, Quick, Step


def plan_rows(region, root_steps: list[Step], deaths) -> list:
    """The planned steps of ``region`` on compacted rows (see the module docstring),
    each with the region's values that die after it (``deaths``, the planner's, of
    the steps' groups of ops)."""
    mask = region.args[0].id if region.args else None
    groups = [list(s.ops) for s in root_steps]
    mem = _Memory(region, root_steps, groups)
    return list(zip([_step(s, mask, mem) for s in root_steps], deaths(region, groups)))


#: array ops that read their operands and make a fresh result (never a view of one)
_CONSUMERS = frozenset({"matmul", "dot", *ELEMENTWISE})


class _Memory:
    """Where a step may write without a fresh array (a ragged RNN step otherwise makes
    five arrays of up to 2 MB, and freed at once, the heap's top goes back to the
    system and comes back as fresh pages: ~4,500 page faults a call):

    - ``scratch``: results that no other step keeps (not the region's result, every
      reader an op that makes a fresh array of its own): they may live in one buffer
      that every step of the loop reuses;
    - ``fresh``: results that are a new array no one else holds (a fused chain without
      a select) and that their one reader may overwrite (``np.tanh(x, out=x)``)."""

    def __init__(self, region, root_steps: list, groups: list) -> None:
        term = {v.id for v in region.terminator.operands}
        readers: dict[int, list] = {}
        for ops in [*groups, [region.terminator]]:
            for op in ops:
                consumes = op.opcode == "array" and op.attrs["fn"] in _CONSUMERS
                for v in op.inputs():
                    readers.setdefault(v.id, []).append(op if consumes else None)
                for o in (o for r in op.regions for o in r.walk()):
                    for v in o.inputs():
                        readers.setdefault(v.id, []).append(None)
        self.readers = readers
        made = {r.id for ops in groups for op in ops for r in op.results}
        self.scratch = {v for v in made if v not in term and readers.get(v)
                        and all(u is not None for u in readers[v])}
        self.fresh = {o.result.id for s in root_steps if isinstance(s, Fused)
                      and not any(op.opcode == "select" for op in s.ops)
                      for o in s.ops} - term

    def overwritable(self, op: Op, v) -> bool:
        """Whether ``op`` may write its result over operand ``v``."""
        return v.id in self.fresh and self.readers.get(v.id) == [op]


#: the scratch buffers of each thread, by (op, value): kept between calls, so that a
#: call does not fault in fresh pages for them (~3.5 us a 4 KiB page on a VM: 5 MB of
#: buffers cost a ragged RNN call ~4 ms), each as large as the most rows seen; at most
#: ``KEEP`` of them and ``KEEP_BYTES`` in all (a new one past either limit drops the
#: others, with those of kernels no longer alive)
_SCRATCH = threading.local()
KEEP = 32
KEEP_BYTES = 128 << 20


def _rows(key: tuple, k: int, shape: tuple, dtype):
    """The first ``k`` rows of this thread's buffer ``key`` (made, or made larger, here)."""
    bufs = getattr(_SCRATCH, "bufs", None)
    if bufs is None:
        bufs = _SCRATCH.bufs = {}
    buf = bufs.get(key)
    if buf is None or len(buf) < k or buf.shape[1:] != shape or buf.dtype != dtype:
        size = k * int(np.prod(shape)) * np.dtype(dtype).itemsize
        if len(bufs) >= KEEP or size + sum(b.nbytes for b in bufs.values()) > KEEP_BYTES:
            bufs.clear()
        buf = bufs[key] = np.empty((k,) + shape, dtype)
    return buf[:k]


#: the ops whose steps on rows are this module's own (``_op_step``), not the all-lanes
#: step: indexing (``xs[t]`` of a live-in gathers its rows first) and products (unmasked
#: while every row is active, into scratch rows)
_ON_ROWS = frozenset({"getitem", "matmul", "dot"})


def _step(item: Step, mask: int | None, mem: _Memory) -> Step:
    if isinstance(item, Fused):
        ops = item.ops
        if len(ops) == 1 and ops[0].opcode == "select":
            return _op_step(ops[0], mask, mem)
        return item
    if isinstance(item, Quick) and not (item.op.opcode == "array"
                                        and item.op.attrs["fn"] in _ON_ROWS):
        return _in_place(item.op, item, mem) or item
    return _op_step(item.ops[0], mask, mem)


def _in_place(op: Op, item: Quick, mem: _Memory) -> Quick | None:
    """A unary ufunc (``np.tanh``) over a fresh array that dies here: into that array
    (the same loop over the same values: the same bits)."""
    f = PER_LANE.get(op.attrs.get("fn"))
    t = op.result.type
    if not (op.opcode == "array" and isinstance(f, np.ufunc) and f.nin == 1
            and len(op.operands) == 1 and not op.attrs["params"] and op.mask is None
            and isinstance(t, ArrayType)
            and op.operands[0].type == t and mem.overwritable(op, op.operands[0])):
        return None
    xid, rid, shape, dtype = op.operands[0].id, op.result.id, tuple(t.shape), t.dtype.dtype

    def in_place(host, env):
        x = env[xid]
        if type(x) is np.ndarray and x.dtype == dtype and x.shape[1:] == shape \
                and len(x) == host.lanes and x.flags.c_contiguous and x.flags.writeable:
            COUNTS["in place"] += 1
            env[rid] = f(x, out=x)
        else:
            item.run(host, env)
    return Quick(op, in_place)


def _op_step(op: Op, mask: int | None, mem: _Memory) -> Step:
    made = None
    if op.opcode in BINARY or op.opcode in COMPARE or op.opcode == "any":
        made = _scalar(op)
    elif mask is not None and op.opcode == "select":
        made = _select(op, mask)
    elif op.opcode == "array" and op.attrs["fn"] == "getitem":
        made = _gather(op, op.result.id in mem.scratch)
    elif mask is not None and op.opcode == "array" and op.mask is not None \
            and op.mask.id == mask and op.attrs["fn"] not in LANE_ARRAY_FNS \
            and op.result.varying and any(v.varying for v in op.operands):
        made = _unmasked(op, mask, op.result.id in mem.scratch)
    return Quick(op, made) if made is not None else OpStep(op)


def _scalar(op: Op):
    """A number op of the loop test or counter (``t < n``, ``m & c``, ``t + 1``,
    ``any``): its host rule's NumPy call, without the rule's dispatch."""
    t = op.result.type
    if not (isinstance(t, ScalarType) and all(isinstance(v.type, ScalarType)
                                              for v in op.operands)):
        return None
    ids, rid = [v.id for v in op.operands], op.result.id
    if op.opcode == "any":
        def any_(host, env):
            x = env[ids[0]]
            env[rid] = np.bool_(x.any() if type(x) is np.ndarray else np.any(x))
        return any_
    f = BINARY.get(op.opcode)
    kw = {"dtype": t.dtype} if f is not None else {}
    f = f or COMPARE[op.opcode]
    a, b = ids

    def number(host, env):
        env[rid] = host.shape(op, f(env[a], env[b], **kw))
    return number


def _select(op: Op, mask: int):
    c, a, _ = op.operands
    if c.id != mask or not c.varying or not a.varying:
        return None
    aid, rid = a.id, op.result.id

    def select(host, env):
        value = env[aid]
        if host.full == mask and host.pass_selects and value is not None:
            COUNTS["passed"] += 1
            env[rid] = value  # every row takes the first
        else:
            host.run_op(op, env)
    return select


def _unmasked(op: Op, mask: int, scratch: bool):
    """An array op under the loop's mask with every row active: the batching rule
    (``U @ x`` into a reused buffer where its result is scratch)."""
    fn, params, t = op.attrs["fn"], op.attrs["params"], op.result.type
    ids = [v.id for v in op.operands]
    vary = [bool(v.varying) for v in op.operands]
    rid = op.result.id
    gemm = scratch and _u_at_x(op)
    box = (id(op), rid)

    def unmasked(host, env):
        if host.full != mask or host.policy.op_below > 1.0:
            host.run_op(op, env)  # (a setting above 1 compacts even a full mask)
            return
        COUNTS["unmasked"] += 1
        if gemm:
            u, x = env[ids[0]], env[ids[1]]
            if type(x) is np.ndarray and x.ndim == 2 and len(x) == host.lanes:
                # matmul_rule's one GEMM X @ U.T, written into the buffer: NumPy
                # calls the same BLAS routine on the same operands
                env[rid] = np.matmul(x, u.T, out=_rows(box, host.lanes, gemm, x.dtype))
                return
        env[rid] = batched(fn, [env[i] for i in ids], vary, host.lanes, t, params)
    return unmasked


def _u_at_x(op: Op):
    """The per-lane shape of ``U @ x`` (uniform matrix, per-lane vector, one float
    dtype), or None."""
    if op.attrs["fn"] not in ("matmul", "dot") or len(op.operands) != 2:
        return None
    u, x = op.operands
    t = op.result.type
    if u.varying or not x.varying or not all(isinstance(v.type, ArrayType) and v.type.shape
                                             is not None for v in (u, x, op.result)):
        return None
    if u.type.ndim != 2 or x.type.ndim != 1 or \
            not u.type.dtype == x.type.dtype == t.dtype or t.dtype.name not in ("float32",
                                                                                  "float64"):
        return None
    return tuple(t.shape)


def _gather(op: Op, scratch: bool):
    """``xs[t]``: the compacted rows of one view of a per-lane live-in (into a reused
    buffer where the result is scratch)."""
    array, *ints = op.operands
    if any(v.varying for v in ints) or not array.varying or not op.result.varying \
            or not isinstance(array.type, ArrayType) or array.type.shape is None:
        return None
    spec = op.attrs["params"]["index"]
    sizes = int_sizes(spec, tuple(array.type.shape))
    nd = array.type.ndim + 1
    aid, iids, rid = array.id, [v.id for v in ints], op.result.id
    shape, box = tuple(op.result.type.shape), (id(op), rid)

    def gather(host, env):
        whole, rows = env.lanes_of(aid)
        if whole is None or getattr(whole, "ndim", 0) != nd:
            host.run_op(op, env)  # not a live-in, gathered whole already, or no lane axis
            return
        got = in_bounds(env, iids, sizes)
        if got is None:
            host.run_op(op, env)  # its error (or index 0 where no lane is active)
            return
        view = whole[(slice(None),) + index_tuple(spec, got)]
        COUNTS["taken"] += 1
        if scratch and view.shape[1:] == shape:
            # rows (positions: a LoopEnv's rows are an array) are valid: "clip" takes
            # them as they are, unbuffered
            out = _rows(box, len(rows), shape, view.dtype)
            env[rid] = np.take(view, rows, axis=0, out=out, mode="clip")
        else:
            env[rid] = np.take(view, rows, axis=0)
    return gather
