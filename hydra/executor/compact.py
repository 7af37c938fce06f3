"""Compaction per loop region: a varying loop with heavy per-lane array operations runs
on the rows of its active lanes only (SPEC section 8, ML.md "Masking or compaction").

Masking runs every step of a varying loop over all N rows and keeps the finished lanes'
values with selects; per-operation compaction (``arrays._compacted``) gathers the
active rows around each product and scatters its result, every step.  Here the whole
loop moves to a compacted lane set instead, the way a hand-written shrinking batch does:

- The loop runs masked over all lanes while every lane is active (the host's
  ``policy.loop_below``, ``hydra.executor.policy``).  At the first loop test that
  finds a lane inactive, the carried values of the active lanes are gathered once and
  the loop goes on with a host of those k rows (``Host.compacted``); every lane's loop
  results start as its values at that test (a lane that is inactive there keeps them
  to the end: that is what the masked loop gives it).
- Values from outside the loop (live-ins) are gathered on first use, and a per-lane
  array indexed with uniform indices (``xs[t]``) gathers just the indexed rows, so a
  padded input is never copied whole.
- At each later loop test the lanes that have left store their forwarded values back
  into the full results and are dropped: for free when the active lanes are a prefix of
  the compacted set (a slice of views), else by one gather of the carried rows once
  fewer than ``policy.regather_below`` of the compacted lanes are active.  At the exit the
  remaining rows are scattered back.
- **Trip-count sort**: when the loop test is ``counter < bound`` with a uniform
  counter and a varying bound from outside the loop (``for t in range(n)``), the lanes
  are ordered by decreasing bound at the first compaction, so the active lanes stay a
  prefix and every later shrink is a slice (the length-sorted shrinking batch).  The
  order only matters for speed; it is taken only for loops whose ops cannot observe
  the order of the lanes (no effect, cross-lane op, or an op that can name a lane in an
  error); the others keep the lanes in increasing order (stable compaction).

What observes lane identity keeps the original lanes: ``lane()`` gives the original
index, ``nlanes()`` N, an error names the original lane (with stable order the first
failing lane is still the lowest), cross-lane reductions see the active lanes in lane
order.  **Not compacted** (the precise rule, ``plan``): loops that read another lane
by its index (``broadcast``, ``shuffle``, ``rotate``), and loops that write into a
per-lane array (it may be a view of the caller's array or of a value from outside the
loop, as ``v = xs[t]`` is, and a gathered copy would not alias it).  Stores into shared
arrays (``out[lane(), t] = ...``) compact, and so do hydra.grad's tape pushes (its
blocks are fresh memory that names the original lanes: ``backends.tape``), with the
trip-count sort; the reverse sweep's loop compacts as a growing prefix
(``growing``).  ``COUNTS`` counts what happened, for
tests and benchmarks.
"""

from __future__ import annotations

from collections import ChainMap, Counter
from dataclasses import dataclass

import numpy as np

from ..ir.core import HEAVY_ARRAY_FNS, Op, Region, Value
from ..stop import check as check_stop
from ..types import ArrayType
from .. import events  # hydra.profile (issue 30)
from .arrays import array_rule
from .counting import note_compaction  # hydra.profile (issue 30)
from .rules import lane_rows

#: what happened: "loops" (loops that compacted), "sorted", "prefix" (shrinks by a
#: slice), "gathers" (shrinks by a gather)
COUNTS: Counter = Counter()

_READS_OTHER_LANES = frozenset({"broadcast", "shuffle", "rotate"})
#: effects that key what they keep by the original lane, whatever the rows' order:
#: hydra.grad's tape (``backends.tape``: a block names its lanes)
_BY_LANE = frozenset({"tape_push", "tape_pop"})


@dataclass(slots=True)
class Plan:
    """What compacting one ``while`` op needs, found once per host."""

    #: varying values defined outside the loop that its regions read -> their types
    live_ins: dict
    #: every value defined outside the loop that its regions read (uniform ones too)
    outside: frozenset
    #: (type, how) of the forwarded values (the ``condition``'s operands after ``go``):
    #: how is "lanes" (varying: rows stored back), "final" (uniform: the value at the
    #: exit) or "unread" (a varying result nothing reads: never stored back)
    forwarded: list
    #: the varying loop-invariant bound that orders the lanes by trip count, or None
    key: Value | None
    #: no store of any kind: a select whose mask is all true may pass its value on
    no_stores: bool


def plan(h, op: Op) -> Plan | None:
    """The plan of a varying ``while`` op worth compacting on host ``h``, or None (not
    varying, no heavy operation inside, or excluded by the rule of the docstring)."""
    if not op.attrs.get("varying") or h.policy.loop_below <= 0:
        return None
    cache = h.loops
    if id(op) not in cache:
        if "read" not in cache:
            cache["read"] = {v.id for o in h.fn.walk() for v in o.inputs()}
        cache[id(op)] = (op, _analyse(op, cache["read"], constants(h)))
    return cache[id(op)][1]


def constants(h) -> dict:
    """The function's ``const`` ops by result id (found once per kernel)."""
    if "consts" not in h.loops:
        h.loops["consts"] = {o.result.id: o for o in h.fn.walk() if o.opcode == "const"}
    return h.loops["consts"]


def _analyse(op: Op, read: set, consts: dict) -> Plan | None:
    ops = [o for r in op.regions for o in r.walk()]
    if not heavy(ops):
        return None
    defined, outside, live_ins = scope(op)
    if not all(on_rows(o) for o in ops):
        return None
    forwarded = [(v.type, "final" if not v.varying else "lanes" if r.id in read else "unread")
                 for v, r in zip(op.regions[0].terminator.operands[1:], op.results)]
    order_free = all(_order_free(o, consts) for o in ops)
    key = _trip_key(op.regions[0], defined) if order_free else None
    no_stores = not any(o.written_array is not None for o in ops)
    return Plan(live_ins, outside, forwarded, key, no_stores)


def on_rows(o: Op) -> bool:
    """May ``o`` run on compacted rows?  Not if it reads another lane by its index or
    writes into a per-lane array (see the module docstring)."""
    name = o.attrs.get("name") if o.opcode == "intrinsic" else o.attrs.get("fn")
    if o.opcode in ("intrinsic", "array") and name in _READS_OTHER_LANES:
        return False
    written = o.written_array
    return written is None or not written.varying


def heavy(ops: list) -> bool:
    """Is there a heavy per-lane array operation (a product ...) among ``ops``?"""
    return any(o.opcode == "array" and o.attrs["fn"] in HEAVY_ARRAY_FNS for o in ops)


def scope(op: Op) -> tuple[set, frozenset, dict]:
    """(the ids of the values defined in the loop ``op``'s regions, the ids of those
    from outside that they read, the varying ones of these -> their types)."""
    ops = [o for r in op.regions for o in r.walk()]
    defined = {a.id for r in op.regions for a in r.args}
    for o in ops:
        defined.update(r.id for r in o.results)
        defined.update(a.id for r in o.regions for a in r.args)
    outside = frozenset(v.id for o in ops for v in o.inputs() if v.id not in defined)
    live_ins = {v.id: v.type for o in ops for v in o.inputs()
                if v.varying and v.id not in defined}
    return defined, outside, live_ins


def _order_free(o: Op, consts: dict) -> bool:
    """Gives every lane the same result whatever order the lanes run in: no effect,
    nothing across lanes, no error that names a lane (a gather at uniform indices
    names none, nor an integer ``//`` or ``%`` by a nonzero constant: ``checkpoint=K``'s
    ``trips % K``)."""
    if o.opcode in _BY_LANE:
        return True
    if o.opcode in ("floordiv", "mod") and o.operands[1].id in consts:
        return consts[o.operands[1].id].attrs["value"] != 0
    if (o.effect and o.opcode != "count") or o.cross_lane:  # (count: hydra.profile's)
        return False
    if o.opcode == "array" and o.attrs["fn"] == "getitem":
        return not any(v.varying for v in o.operands[1:])
    return not o.traps


def _trip_key(before: Region, defined: set) -> Value | None:
    """The varying bound ``n`` of a loop test ``counter < n`` (or ``<=``, ``n >``,
    ``n >=``) with a uniform counter, where ``n`` comes from outside the loop: lanes
    with a larger ``n`` stay longer."""
    m_next = before.terminator.operands[1]
    by_id = {r.id: o for o in before.ops for r in o.results}
    mask_op = by_id.get(m_next.id)
    if mask_op is None or mask_op.opcode != "bitand":
        return None
    for c in mask_op.operands:
        test = by_id.get(c.id)
        if test is None or test.opcode not in ("lt", "le", "gt", "ge"):
            continue
        counter, bound = test.operands if test.opcode in ("lt", "le") else test.operands[::-1]
        if not counter.varying and bound.varying and bound.id not in defined:
            return bound
    return None


# --- running ---------------------------------------------------------------------------

def _has_lanes(value, t) -> bool:
    """Whether a varying value holds a lane axis (a uniform value standing for every
    lane may not)."""
    return value is not None and np.ndim(value) > (t.ndim if isinstance(t, ArrayType) else 0)


def _take(value, sel, t):
    if not _has_lanes(value, t):
        return value
    # np.take gathers whole rows about twice as fast as fancy indexing
    return np.take(value, sel, axis=0) if isinstance(sel, np.ndarray) else value[sel]


class LoopEnv(dict):
    """A compacted loop's values.  A live-in is gathered on first use; ``gather_rows``
    indexes a per-lane live-in at uniform indices before gathering, so that ``xs[t]``
    of a padded input gathers ``k`` rows of one step, not ``xs`` whole."""

    def __init__(self, outer: dict, rows: np.ndarray, plan: Plan) -> None:
        super().__init__()
        self.outer = outer
        self.rows = rows
        self.plan = plan
        self.live_ins = plan.live_ins

    def __missing__(self, key):
        if key not in self.plan.outside:  # a loop value read after its last use: a bug
            raise KeyError(key)
        value = self.outer[key]
        if key in self.live_ins:
            value = _take(value, self.rows, self.live_ins[key])
        self[key] = value
        return value

    def gather_rows(self, host, op: Op) -> bool:
        if op.attrs["fn"] != "getitem":  # (np.arange(4.0) has no operand at all)
            return False
        array = op.operands[0]
        if (array.id not in self.live_ins or array.id in self
                or any(v.varying for v in op.operands[1:]) or not op.result.varying):
            return False
        view = ChainMap({}, self)  # the indices are the loop's own values
        view[array.id] = self.outer[array.id]
        if op.mask is not None:  # the op's mask on the outer lanes (bounds errors)
            mask = np.zeros(host.outer.lanes, dtype=bool)
            mask[self.rows] = self[op.mask.id]
            view[op.mask.id] = mask
        whole = array_rule(host.outer, op, view)[0]  # a view of every lane
        self[op.result.id] = _take(whole, self.rows, op.result.type)
        return True

    def lanes_of(self, key):
        """(per-lane live-in ``key`` as the nearest map that holds it has it, the
        positions there of this map's rows), gathering nothing: a loop nested in a
        compacted loop indexes the outer input itself (``xs[t]``), never a gathered
        copy of all of it; (None, None) where this map has it already."""
        env, rows = self, None
        while isinstance(env, LoopEnv) and key in env.live_ins and key not in env:
            rows = env.rows if rows is None else env.rows[rows]
            env = env.outer
        return (None, None) if rows is None else (env[key], rows)

    def shrink(self, keep, rows: np.ndarray) -> "LoopEnv":
        """The env of the lanes ``keep`` (positions in this one's rows): the live-ins
        gathered so far come along, the loop's own values are made again."""
        out = LoopEnv(self.outer, rows, self.plan)
        for key, t in self.live_ins.items():
            if key in self:
                out[key] = _take(self[key], keep, t)
        return out


def _bind(region: Region, values: list, env: dict) -> None:
    for a, v in zip(region.args, values):
        env[a.id] = v


def _shrink(mask, k: int, compacted: bool, policy):
    """(the positions to keep (a slice for a prefix) or None to go on as it is,
    whether every lane it goes on with is active)."""
    if not (isinstance(mask, np.ndarray) and mask.shape == (k,)):
        mask = np.broadcast_to(mask, (k,))
    active = int(np.count_nonzero(mask))
    if active == k:
        return None, True
    if not compacted:
        return (np.flatnonzero(mask), True) if active < policy.loop_below * k else \
            (None, False)
    if mask[:active].all():
        COUNTS["prefix"] += 1
        return slice(0, active), True
    if active < policy.regather_below * k:
        COUNTS["gathers"] += 1
        return np.flatnonzero(mask), True
    return None, False


def _put(out: list, i: int, t, rows, value, lanes: int) -> None:
    """Write the rows ``rows`` of forwarded value ``i`` into the full results."""
    full = out[i]
    if value is None:
        return
    if not _has_lanes(full, t):
        sub = np.shape(value)[1:] if _has_lanes(value, t) else np.shape(value)
        dtype = np.asarray(value).dtype
        full = np.zeros((lanes, *sub), dtype) if full is None else \
            np.broadcast_to(full, (lanes, *sub)).astype(dtype)
        out[i] = full
    full[rows] = value


def run(h, op: Op, env: dict, p: Plan) -> list:
    """Run the varying loop ``op`` as ``rules.masked_loop`` does, compacted (see the module
    docstring); returns its results over all of ``h``'s lanes."""
    before, body = op.regions
    values = lane_rows(h, [env[v.id] for v in op.operands], op.operands, before.args)
    host, cenv = h, env
    rows = None  # the positions in h's lanes of host's lanes, once compacted
    out = None   # the results over h's lanes, once compacted
    while True:
        check_stop()
        _bind(before, values, cenv)
        go, *fwd = host.region(before, cenv)
        fwd = lane_rows(host, fwd, before.terminator.operands[1:],
                        body.args if go else op.results)
        if not go:
            break
        keep, full = _shrink(fwd[0], host.lanes, rows is not None, h.policy)
        if events.RECORDING:  # hydra.profile (issue 30)
            note_compaction(op, keep, rows is not None, host.lanes)
        if keep is not None:
            if rows is None:
                COUNTS["loops"] += 1
                # a value without a lane axis stands for every lane: _put spreads it
                out = [(np.array(v) if _has_lanes(v, t) else v) if how == "lanes" else None
                       for v, (t, how) in zip(fwd, p.forwarded)]
                if p.key is not None and h.policy.sort:
                    keep = _by_trip_count(keep, env[p.key.id])
                rows, cenv = keep, LoopEnv(env, keep, p)
            else:
                gone = slice(keep.stop, None) if isinstance(keep, slice) else \
                    np.flatnonzero(~np.broadcast_to(fwd[0], (host.lanes,)))
                for i, (v, (t, how)) in enumerate(zip(fwd, p.forwarded)):
                    if how == "lanes":
                        _put(out, i, t, rows[gone], _take(v, gone, t), h.lanes)
                rows = rows[keep]
                cenv = cenv.shrink(keep, rows)
            fwd = [_take(v, keep, t) for v, (t, _) in zip(fwd, p.forwarded)]
            host = h.compacted(rows)
            host.pass_selects = p.no_stores
        if rows is not None:
            host.full = body.args[0].id if full else None
        _bind(body, fwd, cenv)
        values = lane_rows(host, host.region(body, cenv), body.terminator.operands,
                           before.args)
    if out is None:
        return fwd
    for i, (v, (t, how)) in enumerate(zip(fwd, p.forwarded)):
        if how == "lanes":
            _put(out, i, t, rows, v, h.lanes)
        elif how == "final":
            out[i] = v  # uniform: its final value, as the masked loop leaves it
    return out


def _by_trip_count(keep: np.ndarray, bound) -> np.ndarray:
    """The active lanes ordered by decreasing loop bound (ties in lane order)."""
    bound = np.asarray(bound)
    if bound.ndim != 1:  # one bound standing for every lane: nothing to order by
        return keep
    key = bound[keep]
    key = key.astype(np.float64) if key.dtype.kind == "f" else key.astype(np.int64)
    COUNTS["sorted"] += 1
    return keep[np.argsort(-key, kind="stable")]
