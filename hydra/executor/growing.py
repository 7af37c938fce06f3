"""Compaction of a loop whose active lanes only grow: the reverse sweep of a varying loop
(``hydra.grad``, issue 28), run on the rows of the lanes whose trip it is.

The reverse of a varying loop (``hydra.grad.transform``'s ``reverse_while``) is a
uniform loop: ``j`` counts down from the largest trip count, and each trip's work runs
for the lanes with ``j < trips`` (a lane joins when ``j`` reaches its own count, and
stays).  Masked, every trip runs over all lanes and keeps the others' values with
selects.  Here the loop runs on a host of the joined lanes' rows only, the way the
forward sweep's compacted loop (``compact``) runs on the lanes still active:

- at the loop's start the lanes are ordered by decreasing trip count (ties in lane
  order: the order of the forward sweep's trip-count sort, so the tape's blocks pop in
  place), and the carried per-lane values are gathered once into that order;
- each trip runs on the first ``a`` rows, ``a`` the number of lanes whose count is above
  the trip's (a growing prefix: a slice of views, no gather), and writes the rows it
  changed back into the carried values; live-ins are gathered for the prefix when it
  grows;
- at the exit the carried rows are scattered back to their lanes.

**Which loops** (``plan``, found once per kernel): a uniform ``while`` with a heavy
per-lane array operation, whose body tests ``c = x < T`` (``x`` the loop's counter, or
the counter times a constant: ``checkpoint=K`` counts segments), ``T`` varying from
outside, and where nothing a lane with ``c`` false does is observable: each carried
per-lane value is yielded as it came or through ``select(c', new, old)`` with ``c'``
implying ``c`` (``c`` itself or a ``bitand`` of it, a loop mask entered under it); every
op with an effect, a trap, a lane-crossing read (``lanesum``, ``any``, ``tape_pop``) or
another way to make a uniform value of per-lane ones runs under such a mask; and no op
reads another lane by index or writes a per-lane array (``compact.on_rows``).  So
running a trip on any rows that include the joined ones gives the masked loop's values
(with at least one row: a trip that no lane runs changes nothing).  Lane sums see the
joined lanes in trip-count order, not lane order: their float bits may differ from the
masked loop's in the last places (the forward sweep's ``compact`` sorts only loops
without cross-lane operations; a gradient's sums are checked against the reference
with a tolerance).  Counted in ``compact.COUNTS`` as "grown".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.core import Op
from ..stop import check as check_stop
from ..types import ArrayType
from .compact import COUNTS, LoopEnv, Plan, constants, heavy, on_rows, scope
from .rules import lane_rows, masked_loop


@dataclass(slots=True)
class Grows:
    """What growing one uniform ``while`` needs, found once per kernel."""

    #: the varying trip counts ``T`` of the test ``x < T``
    key: int
    #: ``x`` is the counter (the first carried value) times this
    scale: int
    #: for the ``LoopEnv`` of the rows (live-ins, the values from outside)
    env_plan: Plan


def plan(h, op: Op) -> Grows | None:
    """The plan of a growing loop ``op`` on host ``h`` (see the module docstring), or
    None (it runs masked)."""
    if op.attrs.get("varying") or h.policy.loop_below <= 0:
        return None
    key = ("grows", id(op))
    if key not in h.loops:
        h.loops[key] = (op, _analyse(op, constants(h)))
    return h.loops[key][1]


def _analyse(op: Op, consts: dict) -> Grows | None:
    before, body = op.regions
    ops = [o for r in op.regions for o in r.walk()]
    if not body.args or body.args[0].varying or not heavy(ops):
        return None
    if list(before.terminator.operands[1:]) != list(before.args) or any(
            r.varying for o in before.ops for r in o.results):
        return None  # the test must pass the carried values on as they are
    defined, outside, live_ins = scope(op)
    test = _test(body, defined, consts)
    if test is None or not all(on_rows(o) for o in ops):
        return None
    c, key, scale = test
    implies = _implying(body, c)
    if implies is None:
        return None
    for a, y in zip(body.args, body.terminator.operands):
        if not a.varying or y is a:
            continue
        sel = _made_by(body, y)
        if sel is None or sel.opcode != "select" or sel.operands[0].id not in implies \
                or sel.operands[2] is not a:
            return None  # a lane that has not joined might change it
    no_stores = not any(o.written_array is not None for o in ops)
    return Grows(key, scale, Plan(live_ins, outside, [], None, no_stores))


def _made_by(region, v) -> Op | None:
    return next((o for o in region.ops if v in o.results), None)


def _test(body, defined: set, consts: dict):
    """(``c``, the id of ``T``, the scale) of the body's test ``x < T``, or None."""
    counter = body.args[0]
    if getattr(counter.type, "kind", "") not in ("i", "u"):
        return None  # (``x`` is counted in integers: ``int(x)`` is exact)
    for o in body.ops:
        if o.opcode != "lt" or not o.result.varying:
            continue
        x, t = o.operands
        if x.varying or not t.varying or t.id in defined or t.type.kind not in "iu":
            continue  # (integer counts: the rows' order by them is exact)
        if x is counter:
            return o.result, t.id, 1
        m = _made_by(body, x)
        if m is not None and m.opcode == "mul" and m.operands[0] is counter:
            k = consts.get(m.operands[1].id)
            if k is not None and int(k.attrs["value"]) > 0:
                return o.result, t.id, int(k.attrs["value"])
    return None


def _implying(body, c) -> set | None:
    """The ids of the masks that imply ``c`` (true only where it is), or None if an op
    that could show a lane with ``c`` false its effect runs under another mask."""
    implies = {c.id}
    for o in body.walk():
        if o.opcode == "bitand" and any(v.id in implies for v in o.operands):
            implies.add(o.result.id)
        if o.opcode == "while" and o.attrs.get("varying") and o.operands[0].id in implies:
            implies.update(r.args[0].id for r in o.regions if r.args)  # its loop masks
        if o.opcode == "while" and o.attrs.get("varying"):
            continue  # (its own mask gates it: its ops are checked one by one)
        shows = (o.effect and o.opcode != "count") or o.traps or o.cross_lane or (
            any(v.varying for v in o.operands) and o.results
            and not any(r.varying for r in o.results)
            and o.opcode not in ("any", "array_dim"))  # (a shape is every row's)
        if o.opcode == "any":
            if o.operands[0].id not in implies:
                return None
        elif shows and (o.mask is None or o.mask.id not in implies):
            return None
    return implies


# --- running ---------------------------------------------------------------------------

def _lanes(value, t, n: int) -> np.ndarray | None:
    """``value`` with one row for each of the ``n`` lanes (a value standing for every
    lane spread), or None (an ``undef``)."""
    if value is None:
        return None
    ndim = t.ndim if isinstance(t, ArrayType) else 0
    if np.ndim(value) > ndim:
        return value
    return np.broadcast_to(value, (n, *np.shape(value)))


def run(h, op: Op, env: dict, g: Grows) -> list:
    """Run the uniform loop ``op`` on its joined lanes' rows (see the module
    docstring); returns its results over all of ``h``'s lanes."""
    if not h.lanes:
        return masked_loop(h, op, env)
    before, body = op.regions
    values = lane_rows(h, [env[v.id] for v in op.operands], op.operands, before.args)
    trips = np.broadcast_to(np.asarray(env[g.key]), (h.lanes,))
    order = np.argsort(-trips.astype(np.int64), kind="stable")  # (counts fit an int64)
    ranked = trips[order]
    vary = [i for i, a in enumerate(before.args) if a.varying]
    changed = [i for i in vary if body.terminator.operands[i] is not body.args[i]]
    state = {}  # carried per-lane values, in ``order``
    for i in vary:
        full = _lanes(values[i], before.args[i].type, h.lanes)
        state[i] = None if full is None else np.take(full, order, axis=0)
    COUNTS["grown"] += 1
    rows = host = cenv = None
    top = 0  # rows that have run a trip: the rest still hold their initial values
    while True:
        check_stop()
        joined = int(np.count_nonzero(ranked > int(values[0]) * g.scale))
        a = max(joined, 1)  # a trip with no lane in it changes no row: one row runs it
        if rows is None or a != len(rows):
            rows = order[:a]
            host = h.compacted(rows)
            host.pass_selects = g.env_plan.no_stores  # (``select(c, new, old)``: new)
            cenv = LoopEnv(env, rows, g.env_plan)
        top = max(top, a)
        for i in vary:
            values[i] = None if state[i] is None else state[i][:a]
        for arg, v in zip(before.args, values):
            cenv[arg.id] = v
        go, *values = host.region(before, cenv)
        if not go:
            break
        for arg, v in zip(body.args, values):
            cenv[arg.id] = v
        values = lane_rows(host, host.region(body, cenv), body.terminator.operands,
                           before.args)
        for i in changed:
            _store(state, i, values[i], a, before.args[i].type, h.lanes)
    out = values
    for i in vary:
        if state[i] is not None:
            full = _lanes(env[op.operands[i].id], before.args[i].type, h.lanes)
            full = np.array(np.broadcast_to(full, state[i].shape)) if full is not None \
                else np.zeros_like(state[i])
            full[order[:top]] = state[i][:top]
            out[i] = full
    return out


def _store(state: dict, i: int, new, a: int, t, lanes: int) -> None:
    """Write a trip's rows of carried value ``i`` (of type ``t``) into ``state[i][:a]``."""
    if new is None:
        return
    old = state[i]
    dtype = np.asarray(new).dtype
    if old is None or old.dtype != dtype:
        made = np.zeros((lanes, *(tuple(t.shape) if isinstance(t, ArrayType) else ())),
                        dtype)
        if old is not None:
            made[:] = old
        state[i] = old = made
    if any(np.may_share_memory(new, s) for s in state.values() if s is not None):
        new = np.array(new)  # (carried in, or in another slot: read it before writing)
    old[:a] = new
