"""Cross-lane operations across Dask chunks: the kernel as a chain of graph stages.

A kernel whose only sync points are prints runs as one task per chunk.  A kernel with
top-level reductions (``lanesum``, ``laneprod``, ``lanemin``, ``lanemax``,
``laneany``, ``laneall``, of numbers or elementwise of per-lane arrays, and
``lanesum_outer``, the fused ``lanesum(np.outer(d, x))``), ``broadcast`` or
``prefixsum`` is cut at those ops into stages:

    stage 0 (per chunk) -> partial (per chunk) -> combine tree -> global value
       -> stage 1 (per chunk, with the global value) -> ... -> last stage: ChunkOut

A reduction is a Dask tree reduction in ``dask.array.reduction``'s terms: *chunk* (the
reduction over a chunk's active lanes, with their count), *combine* (groups of
``SPLIT_EVERY`` partials), *aggregate* (the value, or the local call's error when no
lane at all is active); ``broadcast`` combines the same way (the chunk that holds lane
k gives its value).  ``prefixsum`` is a scan: each chunk's exclusive sum plus the
sum of the chunks before it (a small task over the chunk totals).  Integers, bools and
``prefixsum`` of integers equal a local call bit for bit; float sums and products are
summed in another order (see the guide for the tolerance).

The cut is the one cutter's (``hydra.backends.cut``): the runs between staged ops
become functions compiled by the kernel's own backend.  Where a reduction sits under a
varying ``if``, its any-lane guard is inlined first (``unguard``) so that the
reduction is top-level.
Anything else that needs all lanes at once is refused before anything runs: a sync
point inside a loop or a uniform branch (one global round trip per iteration),
``shuffle``/``rotate``, ``broadcast``/``prefixsum`` of per-lane arrays, ``atomic_add``
into an array the kernel also reads (into one it only adds to, each chunk adds into
zeros: see ``call``), and loads that may read another lane's store.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import trees
from ..errors import RUNTIME_ERRORS, HydraError, Loc
from ..intrinsics import INTRINSICS
from ..ir.core import Function, Op, Region, Value
from ..types import ArrayType

#: the lane reductions and how they combine partial results
REDUCTIONS = {n: e.monoid.ufunc for n, e in INTRINSICS.items() if e.monoid is not None}
#: the cross-lane ops of per-lane arrays that run across chunks (``lanesum_outer(d, x)``:
#: the fused ``lanesum(np.outer(d, x))``, summed per chunk as one product)
ARRAY_STAGED = {**REDUCTIONS, "lanesum_outer": np.add}
STAGED = frozenset(REDUCTIONS) | {"prefixsum", "broadcast"}
#: how many partials one combine task takes (dask.array.reduction's split_every)
SPLIT_EVERY = 8


@dataclass(frozen=True)
class Cross:
    """A staged cross-lane op, as the client sees it."""

    name: str
    loc: Loc
    dtype: np.dtype  # of its result
    guarded: bool  # was under a varying if: an unobserved value when no lane is active
    lanes: int  # of the whole call
    shape: tuple = ()  # of its value: a per-lane array's, () for a number


@dataclass
class StagePlan:
    prints: bool
    cross: list[Cross]


def refuse(loc: Loc, what: str, hint: str | None = None):
    """Raise the error for something a call with Dask arrays cannot do."""
    where = f"{loc.file}:{loc.line}: " if loc.line else ""
    text = f"{where}{what} (with Dask arrays)"
    if hint:
        text += f"\nhint: {hint}"
    raise HydraError(text)


def first_error(errors) -> HydraError | None:
    """The error of the lowest failing lane (errors of no lane last)."""
    return min((e for e in errors if e is not None), key=lambda e: (e.lane is None, e.lane or 0),
               default=None)


def plan(fn: Function, lanes: int, added: set[int]) -> StagePlan:
    """The stages of ``fn`` (its guards inlined in place); ``HydraError`` for any sync
    point that cannot run in chunks.  ``added``: ids of the arrays that only take
    ``atomic_add``s (each chunk adds into its own zeros)."""
    unguard(fn)
    top = {id(op) for op in fn.body.ops}
    cross, prints = [], False
    for op in fn.walk():
        prints = prints or op.opcode == "print"
        reason = op.attrs.get("sync")
        if not reason or op.opcode == "print" or op.attrs.get("chunk_local"):
            continue  # (hydra.grad's own trip count: a chunk's lanes are enough)
        name = _name(op)
        if op.opcode == "array" and op.cross_lane and name not in ARRAY_STAGED:
            refuse(op.loc, f"{name} of a per-lane array across Dask chunks is not supported",
                   f"the lane reductions of per-lane arrays are; apply it to numbers "
                   f"({name}(h[0])), or call the kernel with NumPy arrays")
        if name == "atomic_add" and op.operands[0].id in added:
            continue
        if _staged(op) and id(op) in top:
            cross.append(Cross(name, op.loc, dtype_of(op.result.type),
                               bool(op.attrs.get("_unguarded")), lanes,
                               _shape(op.result)))
        elif _staged(op):
            refuse(op.loc, f"{name} inside a loop or a uniform branch: it would need one "
                   f"global round trip across the chunks per iteration",
                   "compute it outside the loop, or call the kernel with NumPy arrays")
        elif name is not None:
            refuse(op.loc, f"{name} across Dask chunks is not supported",
                   "the reductions, prefixsum, broadcast and atomic_add into an array the "
                   "kernel does not read are; or call the kernel with NumPy arrays")
        else:
            refuse(op.loc, f"{reason}: lanes of other chunks run elsewhere",
                   "index shared arrays by lane() when the kernel writes them")
    return StagePlan(prints, cross)


def unguard(fn: Function) -> None:
    """Inline the top-level any-lane guards (``if[guard]``) around staged ops: a chunk
    with no active lane there still takes part in the global reduction (its ops run with
    an all-off mask, which the predicated IR makes harmless)."""
    changed = True
    while changed:
        changed = False
        ops: list[Op] = []
        replace: dict[int, Value] = {}
        for op in fn.body.ops:
            if op.opcode == "if" and op.attrs.get("guard") and any(
                    _staged(o) for o in op.regions[0].walk()) and all(
                    o.opcode in ("undef", "yield") for o in op.regions[1].ops):
                then = op.regions[0]
                for inner in then.walk():
                    inner.attrs["_unguarded"] = True
                ops += then.ops[:-1]
                replace.update({r.id: v for r, v in zip(op.results, then.terminator.operands)})
                changed = True
            else:
                ops.append(op)
        fn.body.ops = ops
        if replace:
            for op in fn.walk():
                op.operands = [replace.get(v.id, v) for v in op.operands]
                if op.mask is not None:
                    op.mask = replace.get(op.mask.id, op.mask)


# --- the combining tasks ----------------------------------------------------------------

def combine(name: str, partials: list) -> tuple:
    """Partials (count, value) of several chunks as one (a lane's failure wins, the
    lowest lane's)."""
    failed = [p[1] for p in partials if p[0] == "failed"]
    if failed:
        return _failed(failed)
    if name == "broadcast":  # (k, first active lane, (value, active) where lane k is)
        firsts = [p[1] for p in partials if p[1] is not None]
        found = [p[2] for p in partials if p[2] is not None]
        return partials[0][0], min(firsts, default=None), found[0] if found else None
    count = sum(p[0] for p in partials)
    values = [p[1] for p in partials if p[0]]
    if not values:
        return 0, None
    return count, ARRAY_STAGED[name].reduce(np.asarray(values))


def _failed(failures: list) -> tuple:
    error = first_error([f.error for f in failures])
    return "failed", next(f for f in failures if f.error is error)


def aggregate(cross: Cross, partial: tuple):
    """The reduction's value from the last partial (the local call's error if no lane at
    all is active, unless the op was under a guard, where the value is never used)."""
    if partial[0] == "failed":
        return partial[1]  # a lane failed before the reduction: the chunks pass it on
    if cross.name == "broadcast":
        return _broadcast(cross, *partial)
    count, value = partial
    if count == 0:
        if cross.guarded or cross.name == "lanesum_outer":  # a sum of no products: zeros
            return np.zeros(cross.shape, cross.dtype)[()]

        def fail(kind, message, lane):
            raise RUNTIME_ERRORS[kind](message, lane, cross.loc)
        value = INTRINSICS[cross.name].reference([np.zeros((0, *cross.shape), cross.dtype)],
                                                 np.zeros(0, bool), 0, fail)
    return np.asarray(value).astype(cross.dtype)[()]


def _broadcast(cross: Cross, k: int, first, found):
    """broadcast's value, or the local call's error (naming the first active lane)."""
    if first is not None and not 0 <= k < cross.lanes:
        raise RUNTIME_ERRORS["index"](f"broadcast: lane index {k} is out of range for "
                                      f"{cross.lanes} lanes", first, cross.loc)
    if first is not None and not found[1]:
        raise RUNTIME_ERRORS["inactive"](f"broadcast reads lane {k}, which is not active",
                                         first, cross.loc)
    value = found[0] if found is not None else 0  # no lane active: never observed
    return np.asarray(value).astype(cross.dtype)[()]


def scan_offsets(totals: list) -> list:
    """Each chunk's offset for prefixsum: the sum of the chunk totals before it."""
    failed = [t[1] for t in totals if t[0] == "failed"]
    if failed:
        return [_failed(failed)[1]] * len(totals)
    values = np.asarray([t[1] for t in totals])
    return list(np.cumsum(values) - values)


# --- on the worker: the stages as runs of the one cutter ---------------------------------

class Program:
    """A kernel cut by the one cutter (``hydra.backends.cut``) at its staged ops: each
    stage is at most one run, compiled by the kernel's own backend as a function of the
    run's live-ins returning its live-outs, so every backend runs its lanes natively."""

    def __init__(self, fn: Function, backend, options: dict) -> None:
        from ..backends.cut import Run, cut, users_of
        unguard(fn)
        self.fn = fn
        items = cut(fn.body.ops[:-1], lambda op: not _staged(op), users_of(fn))
        self.stages: list[list] = [[]]  # per stage: the runs, compiled
        self.cross: list[Op] = []
        for item in items:
            if isinstance(item, Run):
                self.stages[-1].append((item, backend.compile(_function(fn, item), options)))
            elif _staged(item):
                self.cross.append(item)
                self.stages.append([])
            else:  # the cutter keeps every other op in a run
                raise AssertionError(f"host op {item.opcode} outside a run")
        values = list(fn.params)
        for op in fn.walk():
            values += op.results + [a for r in op.regions for a in r.args]
        #: value id -> its position: the same in every process that compiles the kernel
        self.number = {v.id: i for i, v in enumerate(values)}
        self.value_of = dict(enumerate(values))
        #: numbers of the arrays the kernel stores into (copied when a stage resumes)
        self.stored = {self.number[op.written_array.id] for op in fn.walk()
                       if op.written_array is not None
                       and op.written_array.id in self.number}
        # live[k]: what stage k and the ones after it read (the result included)
        live = {v.id for v in fn.body.terminator.operands} | {p.id for p in fn.params}
        self.live: list[set[int]] = []
        for k in range(len(self.cross), -1, -1):
            for run, _ in self.stages[k]:
                live |= {v.id for v in run.inputs}
            if k < len(self.cross):
                live |= {v.id for v in self.cross[k].inputs()}
            self.live.insert(0, set(live))

    def run_stage(self, k: int, env: dict, lanes: int) -> None:
        """Stage ``k`` over one chunk: its runs, natively, on ``env``."""
        for run, runner in self.stages[k]:
            with np.errstate(all="ignore"):
                leaves = runner([env[v.id] for v in run.inputs], lanes)
            env.update((v.id, x) for v, x in zip(run.outputs, leaves))


def _staged(op: Op) -> bool:
    """A cross-lane op that runs across the chunks: the staged intrinsics, and the lane
    reductions of per-lane arrays (elementwise over the lanes); not hydra.grad's own
    chunk-local trip count."""
    if op.attrs.get("chunk_local"):
        return False
    return _name(op) in (STAGED if op.opcode == "intrinsic" else ARRAY_STAGED)


def _name(op: Op) -> str | None:
    """A cross-lane op's name: an intrinsic's, or a lane reduction of per-lane arrays'."""
    if op.opcode == "intrinsic":
        return op.attrs["name"]
    return op.attrs["fn"] if op.opcode == "array" and op.cross_lane else None


def dtype_of(t) -> np.dtype:
    return t.dtype.dtype if isinstance(t, ArrayType) else t.dtype


def _shape(v: Value) -> tuple:
    """The shape of one lane's ``v``: a per-lane array's, () for a number."""
    return tuple(getattr(v.type, "shape", None) or ())


def _function(fn: Function, run) -> Function:
    """A run as a function of its live-ins that returns its live-outs."""
    body = Region([], [*run.ops, Op("yield", list(run.outputs), [], fn.loc)])
    return Function(fn.name, list(run.inputs), [v.name or f"v{v.id}" for v in run.inputs],
                    body, fn.loc, {"result_tree": trees.tuple_of(len(run.outputs))})


def partial(op: Op, env: dict, lanes: int, start: int):
    """A staged op's partial over lanes ``start:start+lanes``, and what the chunk keeps
    for the next stage (prefixsum: its own exclusive sums)."""
    x, *more = [np.broadcast_to(env[v.id], (lanes, *_shape(v))) for v in op.operands
                if op.opcode == "array" or v is op.operands[0]]
    mask = env[op.mask.id] if op.mask is not None else np.ones(lanes, bool)
    mask = np.broadcast_to(mask, (lanes,))
    name = _name(op)
    if name == "lanesum_outer":  # D.T @ X over the active rows, as a local call
        d, x = (a[mask].reshape(int(mask.sum()), a[0].size) for a in (x, *more))
        return (int(mask.sum()), (d.T @ x).astype(dtype_of(op.result.type))), None
    if name == "broadcast":
        k = int(np.asarray(env[op.operands[1].id]).reshape(-1)[0])
        active = np.flatnonzero(mask)
        first = start + int(active[0]) if active.size else None
        here = (x[k - start], bool(mask[k - start])) if start <= k < start + lanes else None
        return (k, first, here), None
    if name == "prefixsum":
        vals = np.where(mask, x, 0).astype(x.dtype if x.dtype != np.bool_ else np.int64)
        sums = np.cumsum(vals)
        total = sums[-1] if lanes else vals.dtype.type(0)
        return (int(mask.sum()), total), sums - vals
    active = x[mask]
    if not len(active):
        return (0, None), None
    return (len(active), REDUCTIONS[name].reduce(active)), None


def resume(op: Op, kept, carried, lanes: int):
    """A staged op's value in one chunk from the global value (or prefix offset)."""
    dtype = dtype_of(op.result.type)
    if _name(op) == "prefixsum":
        return (kept + carried).astype(dtype)
    return np.asarray(carried).astype(dtype)[()]
