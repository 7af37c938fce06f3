"""Sync points only at the top level: structured kernels between them.

Takes: the structured IR (a fresh copy, which this module may change) of a
function whose sync points all sit at the top level of its body, outside any
``if``/``while``.  Guarantees: a plan for ``phases.PhaseKernel`` in which every
maximal run of top-level ops without a sync point - varying loops and branches
included - is one *segment* kernel of the structured IR (one thread per lane, the
hardware handles divergence), and the sync points run on the host between them,
as in the predicated strategy.  This keeps a loop-heavy kernel followed by a
``lanesum`` at two launches instead of one launch per loop iteration.

The structured IR has no masks: a top-level sync point runs on every lane, so this
module gives them the entry mask (an ``entry_mask`` op put first in the body),
and it moves the captured arrays (``global_array``) to the top of the body so
that the host can pass them to the segments that use them.
"""

from __future__ import annotations

from ...ir.core import Function, Op, Value
from ...types import BOOL, ScalarType
from .phases import Phase, make_phase, uniform_pure, uses_of
from .emit import ident
from .structured import StructuredEmitter, fits


class Unsuitable(Exception):
    """The function needs the predicated strategy."""


def _prepare(fn: Function) -> None:
    body = fn.body
    captured = []
    for op in list(fn.walk()):
        if op.opcode == "global_array":
            captured.append(op)
    for region_op in list(fn.walk()):
        for region in region_op.regions:
            region.ops = [op for op in region.ops if op.opcode != "global_array"]
    top = [op for op in body.ops if op.opcode != "global_array"]
    loc = fn.loc
    entry = Value(BOOL, loc, "entry", varying=True)
    for op in top:
        if "sync" in op.attrs and op.mask is None:
            op.mask = entry
    body.ops = [Op("entry_mask", [], [entry], loc)] + captured + top


def plan_segments(fn: Function, boundscheck: bool = True) -> tuple[dict, list[Phase]]:
    """The plan of ``fn`` (its body only) or ``Unsuitable``."""
    why = fits(fn)
    if why is None or not why.startswith("sync point"):
        raise Unsuitable(why or "lane-local: one kernel")
    for op in fn.body.ops:
        if any("sync" in inner.attrs for region in op.regions for inner in region.walk()):
            raise Unsuitable("a sync point inside control flow")
    _prepare(fn)
    uses = uses_of(fn)
    constants = {op.result.id: op.attrs["value"] for op in fn.walk() if op.opcode == "const"}
    items: list = []
    phases: list[Phase] = []
    run: list[Op] = []
    pending: set[int] = set()  # values the unfinished run defines

    def close() -> None:
        label = f"segment{len(phases) + 1}_{ident(fn.name)}"
        phase = make_phase(run, uses, label, boundscheck, StructuredEmitter, constants)
        if not all(isinstance(v.type, ScalarType) for v in phase.outputs):
            raise Unsuitable("a segment hands on a value that is not a scalar")
        phases.append(phase)
        items.append(phase)
        run.clear()
        pending.clear()

    for op in fn.body.ops:
        if "sync" in op.attrs or op.info.terminator or op.opcode in ("entry_mask",
                                                                      "global_array"):
            if run:
                close()
            items.append(op)
        elif uniform_pure(op) and not pending.intersection(v.id for v in op.inputs()):
            items.append(op)  # a uniform value: the host computes it ahead
        else:
            run.append(op)
            pending.update(r.id for r in op.results)
    return {id(fn.body): items}, phases
