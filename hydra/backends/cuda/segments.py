"""Sync points outside varying control flow: structured kernels between them.

Takes: the structured IR (a fresh copy, which this module may change) of a
function whose sync points sit only at the top level or inside *uniform*
``if``/``while`` (never inside varying control flow).  Guarantees: a plan for
``phases.PhaseKernel`` in which the host drives those uniform branches and loops
and runs the sync points, and every maximal run of other ops between them -
varying loops and branches included - is one *segment* kernel of the structured
IR (one thread per lane, the hardware handles divergence), cut by
``hydra.backends.cut``.  This keeps a loop-heavy kernel followed by a ``lanesum``
at two launches instead of one launch per loop iteration.

The structured IR has no masks: a sync point outside varying control flow runs on
every lane, so this module gives them the entry mask (an ``entry_mask`` op put first in the body),
and it moves the captured arrays (``global_array``) to the top of the body so
that the host can pass them to the segments that use them.
"""

from __future__ import annotations

from ...ir.core import Function, Op, Value
from ...types import BOOL, ScalarType
from ..cut import Run, cut, users_of
from .phases import Phase, make_phase, uniform_pure
from .emit import ident
from .structured import StructuredEmitter, fits


class Unsuitable(Exception):
    """The function needs the predicated strategy."""


def _uniform_control(op: Op) -> bool:
    """An ``if``/``while`` every lane takes alike: the host can drive it."""
    if op.opcode == "if":
        return op.operands[0].varying is False
    if op.opcode == "while":
        return op.regions[0].terminator.operands[0].varying is False
    return False


def _host_driven(fn: Function) -> list[Op]:
    """The ops the host runs itself: sync points and the uniform control flow around
    them (``Unsuitable`` if a sync point sits in varying control flow)."""
    found = []

    def visit(ops) -> None:
        for op in ops:
            if "sync" in op.attrs:
                found.append(op)
            elif any("sync" in inner.attrs for region in op.regions for inner in region.walk()):
                if not _uniform_control(op):
                    raise Unsuitable("a sync point inside varying control flow")
                found.append(op)
                for region in op.regions:
                    visit(region.ops)
    visit(fn.body.ops)
    return found


def _prepare(fn: Function, host: list[Op]) -> None:
    body = fn.body
    captured = [op for op in fn.walk() if op.opcode == "global_array"]
    for region in [body] + [r for op in fn.walk() for r in op.regions]:
        region.ops = [op for op in region.ops if op.opcode != "global_array"]
    entry = Value(BOOL, fn.loc, "entry", varying=True)
    for op in host:
        if "sync" in op.attrs and op.mask is None:
            op.mask = entry  # every enclosing branch is uniform: all lanes are here
    body.ops = [Op("entry_mask", [], [entry], fn.loc)] + captured + body.ops


def plan_segments(fn: Function, options: dict) -> tuple[dict, list[Phase]]:
    """The plan of ``fn`` (its body and the regions the host drives) or
    ``Unsuitable``."""
    if fits(fn) is None:
        raise Unsuitable("lane-local: one kernel")
    why = fits(fn, segments=True)
    if why is not None:
        raise Unsuitable(why)
    constants = {op.result.id: op.attrs["value"] for op in fn.walk() if op.opcode == "const"}
    host = _host_driven(fn)
    _prepare(fn, host)
    host_ids = {id(op) for op in host}
    users = users_of(fn)
    plans: dict[int, list] = {}
    phases: list[Phase] = []

    def native(op: Op) -> bool:
        return not (id(op) in host_ids or op.info.terminator
                    or op.opcode in ("entry_mask", "global_array"))

    def hoist(op: Op, run: list[Op]) -> bool:
        """A uniform value that does not depend on the unfinished run: the host
        computes it ahead."""
        pending = {r.id for o in run for r in o.results}
        return uniform_pure(op) and not any(v.id in pending for v in op.inputs())

    def visit(region) -> None:
        items = cut(region.ops, native, users, hoist)
        for k, item in enumerate(items):
            if isinstance(item, Run):
                label = f"segment{len(phases) + 1}_{ident(fn.name)}"
                phase = make_phase(item, label, options, StructuredEmitter, constants)
                if not all(isinstance(v.type, ScalarType) for v in phase.outputs):
                    raise Unsuitable("a segment hands on a value that is not a scalar")
                phases.append(phase)
                items[k] = phase
            else:
                for inner in item.regions:
                    visit(inner)
        plans[id(region)] = items
    visit(fn.body)
    return plans, phases
