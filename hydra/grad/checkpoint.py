"""Checkpointed loops for ``hydra.grad(f, checkpoint=K)`` (SPEC section 11): memory for
time, as Griewank's checkpointing and JAX's ``remat`` of a scan's body.

Takes: the gradient transformation (``hydra.grad.transform.Transform``) in the middle of
a loop's reverse, with ``checkpoint = K``: its forward sweep pushed the loop's state
only at trips 0, K, 2K, ... (``Transform.recorded_while``), and its reverse counts
segments of K trips (aligned: segment s is trips sK .. sK + K - 1 of every lane).
Guarantees: ``segment`` emits, for the lanes that ran segment s, the pop of its
checkpoint, a recorded re-run of the segment's trips (a loop of the original body from
the checkpoint, ``min(sK + K, trips)`` for each lane: its own count) and that loop's
reverse, exactly as an unsegmented loop's reverse would treat it.  So a lane keeps
``ceil(trips / K)`` checkpoints plus at most K records of the segment being reversed,
and the body's forward work runs once more than without checkpoints.
"""

from __future__ import annotations

from ..ir.core import Op, Region, Value
from ..types import BOOL, INT64
from .analysis import defined


def segment(t, op: Op, s: Value, d_args: list[Value], trips: Value, floats: list[int]
            ) -> tuple[dict, list[Value], set[int]]:
    """The reverse of segment ``s`` of loop ``op`` (see the module docstring): the
    adjoints found (by original id), the adjoints of the state at the checkpoint, and
    the ids that belong to the segment (not outer values)."""
    before, body = op.regions
    tape, _, pushed = t.loops[id(op)]
    e, K, loc = t.e, t.checkpoint, op.loc
    popped = e.op("tape_pop", [], [body.args[i].type for i in pushed],
                  {"tape": tape}).results if pushed else []
    start = e.v("mul", [s, e.const(K, INT64)], INT64)
    bound = e.v("add", [start, e.const(K, INT64)], INT64)
    stop = e.select(e.cmp("lt", bound, trips), bound, trips)
    # the segment as a loop of the original body, in the original function's values
    # (stand-ins bound to what the reverse computed): the transformation records and
    # reverses it like any loop
    init = [Value(a.type, loc, a.name) for a in body.args]
    for k, v in enumerate(init):
        t.env[v.id] = popped[pushed.index(k)] if k in pushed else t.env[op.operands[k].id]
    first, last = Value(INT64, loc, "start"), Value(INT64, loc, "stop")
    t.env[first.id], t.env[last.id] = start, stop
    b_args = [Value(a.type, loc, a.name) for a in before.args] + [Value(INT64, loc, "i")]
    go = Value(BOOL, loc)
    cond = Region(b_args, [Op("lt", [b_args[-1], last], [go], loc),
                           Op("condition", [go, *b_args], [], loc)])
    i, one, i1 = Value(INT64, loc, "i"), Value(INT64, loc), Value(INT64, loc, "i")
    trips_body = Region([*body.args, i], [
        *body.ops[:-1], Op("const", [], [one], loc, {"value": 1}),
        Op("add", [i, one], [i1], loc),
        Op("yield", [*body.terminator.operands, i1], [], loc)])
    results = [Value(r.type, loc, r.name) for r in op.results] + [Value(INT64, loc, "i")]
    loop = Op("while", [*init, first], results, loc, dict(op.attrs), [cond, trips_body])
    saved, t.checkpoint = t.checkpoint, None  # the segment's own tape: every trip
    t.active |= {v.id for v in init + results}
    t.useful |= {v.id for v in results}
    with e.at(loc):
        t.recorded_while(loop, replay=True)
        found: dict = {}
        for k, d in zip(floats, d_args):
            t.accumulate(found, results[k], d)
        t.reverse_while(loop, found)
    t.checkpoint = saved
    d_new = [found.get(init[k].id) or e.zero(body.args[k].type, t.env[init[k].id])
             for k in floats]
    inner = defined(trips_body) | defined(cond) | {v.id for v in init + results}
    return found, d_new, inner | {first.id, last.id}
