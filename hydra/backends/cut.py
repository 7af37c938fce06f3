"""The one cutter: the ops of a region -> native runs and host ops, with live values.

Takes: the ops of one region (in program order), ``native(op)``: the backend's
capability for this op with the regions it owns, ``users``: the ops that read each
value (``users_of``), and optionally ``hoist(op, run)``: may the host compute this op
ahead of the unfinished run, without closing it (a uniform value)?
Guarantees: ``cut`` returns the same ops in an order that keeps every value defined
before it is used, grouped into ``Run``s (maximal stretches of native ops, each to
become one generated kernel) and host ``Op``s.  A run's ``inputs`` (live-ins) are the
values its ops read that are defined outside it, in order of first use; its
``outputs`` (live-outs) the results of its top-level ops that an op outside it
reads.  Running the items in order, each run on all lanes before the next item,
keeps the lockstep order of SPEC section 4: every compiled backend (cpu phases,
cuda phases and segments) cuts with this one function.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

from ..ir.core import Function, Op, Value


@dataclass
class Run:
    """A stretch of native ops and the values that cross its edges."""

    ops: list[Op]
    inputs: list[Value] = field(default_factory=list)
    outputs: list[Value] = field(default_factory=list)


def users_of(fn: Function) -> dict[int, list[Op]]:
    """Value id -> the ops (at any depth) that read it."""
    users: dict[int, list[Op]] = {}
    for op in fn.walk():
        for v in op.inputs():
            users.setdefault(v.id, []).append(op)
    return users


def nested(op: Op) -> Iterator[Op]:
    """``op`` and every op in the regions it owns."""
    yield op
    for region in op.regions:
        yield from region.walk()


def live_ins(ops: list[Op]) -> list[Value]:
    """The values ``ops`` (with their regions) read but do not define, first use first."""
    walked = [o for op in ops for o in nested(op)]
    defined = {r.id for o in walked for r in o.results}
    defined |= {a.id for o in walked for region in o.regions for a in region.args}
    found: dict[int, Value] = {}
    for o in walked:
        for v in o.inputs():
            if v.id not in defined:
                found.setdefault(v.id, v)
    return list(found.values())


def make_run(ops: list[Op], users: dict[int, list[Op]]) -> Run:
    """A run of ``ops`` with its live-ins and live-outs."""
    members = {id(o) for op in ops for o in nested(op)}
    outputs = [r for op in ops for r in op.results
               if any(id(u) not in members for u in users.get(r.id, []))]
    return Run(ops, live_ins(ops), outputs)


def cut(ops: list[Op], native: Callable[[Op], bool], users: dict[int, list[Op]],
        hoist: Callable[[Op, list[Op]], bool] | None = None) -> list:
    """``ops`` as ``Run``s and host ``Op``s (see the module docstring)."""
    items: list = []
    run: list[Op] = []
    for op in ops:
        if hoist is not None and hoist(op, run):
            items.append(op)  # computed by the host now; the run goes on
        elif native(op):
            run.append(op)
        else:
            if run:
                items.append(make_run(run, users))
                run = []
            items.append(op)
    if run:
        items.append(make_run(run, users))
    return items
