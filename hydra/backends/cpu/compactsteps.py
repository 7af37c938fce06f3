"""Planned steps of a compacted loop's regions (cpu backend): the Python cost of a step.

Takes: a loop or branch region that ``compact.CompactHost`` runs on a compacted lane
set, with the root host's steps for it (``fuse.region_plans``: fused chains,
``hoststeps.Quick`` steps, ops).
Guarantees: ``steps(host, region, root_steps)`` is a list of callables
``step(host, env)`` that put the same values into the loop's env as
``CompactHost._run`` / the root steps would, op by op, with the per-step work of the
general path worked out once per call of the kernel (a ragged RNN runs ~200 steps of
~8 ops each; the general path cost ~50 us a step, the GEMMs of 64 lanes ~20 us):

- ``xs[t]`` (a per-lane array from outside the loop at uniform indices): the index is
  checked against the static shape once per step and the compacted rows of the view
  ``xs[:, t]`` are gathered with one ``np.take``; the general path builds the mask of
  the outer lanes and an overlay env to index every lane's view first.
- an ``array`` op masked by the loop's own mask while every row is active
  (``CompactHost.full``, which ``compact.run`` sets when the mask the body gets is
  all true): its batching rule directly, as ``hostarrays.array_rule`` decides for an
  all-true mask (no per-op compaction), without looking at the mask.
- a select on that mask: its first value, as ``CompactHost._passes`` gives (a fused
  chain of just that select is taken as the select: the chain would copy every row).
- fused chains and the precomputed steps that neither gather rows nor observe lane
  identity run as they are; every other op goes to ``CompactHost._run`` (lane ids,
  row gathers at varying indices, errors naming the original lane).

An index out of bounds, a live-in already gathered whole, or a mask that is not all
true take the general path, which raises the same error (file, line, original lane)
or computes the same values; nothing here changes a bit of any result.
"""

from __future__ import annotations

import numpy as np

from ...batching import batched, index_tuple
from ...ir.core import LANE_ARRAY_FNS, Op
from ...types import ArrayType
from .. import hostarrays
from ..compact import _deaths
from .hoststeps import int_sizes


def steps(host, region, root_steps: list) -> list:
    """The planned steps of ``region`` on compacted hosts of ``host``'s loop, each with
    the region's values that die after it (``compact._deaths``: dropped at once, so
    that the next step's arrays reuse their memory); cached in the hosts' shared
    ``_compact_plans``."""
    cache = host._compact_plans
    key = ("steps", id(region))
    got = cache.get(key)
    if got is None:
        mask = region.args[0].id if region.args else None
        groups = [list(getattr(s, "ops", None) or [getattr(s, "op", s)]) for s in root_steps]
        planned = [_step(s, mask) for s in root_steps]
        got = cache[key] = (region, list(zip(planned, _deaths(region, groups))))
    return got[1]


#: precomputed steps that must not run as they are on compacted rows: indexing
#: (``xs[t]`` of a live-in gathers rows first), reductions across lanes and stacks
#: (their fallbacks run the host rules on a host that does not name the original lane)
_AS_OPS = frozenset({"getitem", "stack", *LANE_ARRAY_FNS})


def _step(item, mask: int | None):
    ops = getattr(item, "ops", None)  # a fused chain
    if ops is not None:
        if len(ops) == 1 and ops[0].opcode == "select":
            return _op_step(ops[0], mask)

        def fused(host, env):
            item.run(env, host.lanes)
        return fused
    op = getattr(item, "op", None)  # a precomputed host step
    if op is not None:
        if op.opcode == "const" or op.opcode == "array" and op.attrs["fn"] not in _AS_OPS:
            def quick(host, env):
                item.run(env, host.lanes)
            return quick
        return _op_step(op, mask)
    return _op_step(item, mask)


def _general(op: Op):
    def general(host, env):
        host._run(op, env)
    return general


def _op_step(op: Op, mask: int | None):
    made = None
    if mask is not None and op.opcode == "select":
        made = _select(op, mask)
    elif op.opcode == "array" and op.attrs["fn"] == "getitem":
        made = _gather(op)
    elif mask is not None and op.opcode == "array" and op.mask is not None \
            and op.mask.id == mask and op.attrs["fn"] not in LANE_ARRAY_FNS \
            and op.result.varying and any(v.varying for v in op.operands):
        made = _unmasked(op, mask)
    return made or _general(op)


def _select(op: Op, mask: int):
    c, a, _ = op.operands
    if c.id != mask or not c.varying or not a.varying:
        return None
    aid, rid = a.id, op.result.id

    def select(host, env):
        value = env[aid]
        if host.full == mask and host.pass_selects and value is not None:
            env[rid] = value  # every row takes the first
        else:
            host._run(op, env)
    return select


def _unmasked(op: Op, mask: int):
    """An array op under the loop's mask with every row active: the batching rule."""
    fn, params, t = op.attrs["fn"], op.attrs["params"], op.result.type
    ids = [v.id for v in op.operands]
    vary = [bool(v.varying) for v in op.operands]
    rid = op.result.id

    def unmasked(host, env):
        if host.full != mask or hostarrays.COMPACT_BELOW > 1.0:
            host._run(op, env)  # (a setting above 1 compacts even a full mask)
            return
        env[rid] = batched(fn, [env[i] for i in ids], vary, host.lanes, t, params)
    return unmasked


def _gather(op: Op):
    """``xs[t]``: the compacted rows of one view of a per-lane live-in."""
    array, *ints = op.operands
    if any(v.varying for v in ints) or not array.varying or not op.result.varying \
            or not isinstance(array.type, ArrayType) or array.type.shape is None:
        return None
    spec = op.attrs["params"]["index"]
    sizes = int_sizes(spec, tuple(array.type.shape))
    nd = array.type.ndim + 1
    aid, iids, rid = array.id, [v.id for v in ints], op.result.id

    def gather(host, env):
        whole = env.outer[aid] if aid in env.live_ins and aid not in env else None
        if whole is None or getattr(whole, "ndim", 0) != nd:
            host._run(op, env)  # not a live-in, gathered whole already, or no lane axis
            return
        got = []
        for i, n in zip(iids, sizes):
            k = int(env[i])
            if k < -n or k >= n:
                host._run(op, env)  # its error (or index 0 where no lane is active)
                return
            got.append(k + n if k < 0 else k)
        view = whole[(slice(None),) + index_tuple(spec, got)]
        rows = env.rows
        env[rid] = np.take(view, rows, axis=0) if isinstance(rows, np.ndarray) else view[rows]
    return gather
