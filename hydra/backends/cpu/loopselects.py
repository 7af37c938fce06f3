"""Loop-carried selects the cpu code generator may drop.

Linearizing a varying loop keeps each carried value of a lane that leaves the loop with
``select c, new, old`` at the end of the body (``c`` true for the lanes that go on).
Where the loop's result for that value is never used after the loop, a lane that left
never has its value observed again: pure operations may run on inactive lanes (SPEC,
DESIGN "Side effects carry their mask"), so the select is dead weight.  It is not free:
in mandelbrot it puts the escape compare on the ``z`` recurrence (a merge-masked add
after the compare instead of an add that runs beside it), which made the loop-carried
chain three cycles longer than hand-written intrinsics' and halved the speed.

``free_selects(ops, outputs)`` finds such selects; the code generator emits ``new`` for
them.  Conditions, checked on the predicated IR of one phase: the ``while`` is varying
(its first carried value is the lane mask); the select's result is used only by the
body's ``yield``, in slot j, and its ``old`` operand is the body's argument j; the
``while``'s result j has no use (nor is it a phase output); and the mask the body yields
is ``c`` or ``bitand`` of ``c`` with something, so every lane with ``c`` off is off
for the rest of the loop.  Lanes with ``c`` on get ``new`` either way.
"""

from __future__ import annotations

from collections import Counter

from ...ir.core import Op, Value
from ..cut import nested


def value_uses(ops: list[Op], outputs: list[Value]) -> Counter:
    """value id -> how many operands (and phase outputs) read it, regions included."""
    uses: Counter = Counter(v.id for v in outputs)
    for top in ops:
        for op in nested(top):
            uses.update(v.id for v in op.operands)
    return uses


def _carried_selects(op: Op):
    """``(j, select, the body's defs)`` for each carried slot j of a varying ``while``
    whose body yields ``select c, new, old`` with ``old`` the body's argument j, and
    whose yielded mask is ``c`` or ``bitand`` of ``c`` with something (a lane with ``c``
    off is off for the rest of the loop)."""
    if op.opcode != "while" or not op.attrs.get("varying"):
        return
    body = op.regions[1]
    yld = body.ops[-1]
    defs = {r.id: o for o in body.ops for r in o.results}
    mask = defs.get(yld.operands[0].id)
    for j, v in enumerate(yld.operands[1:], start=1):
        sel = defs.get(v.id)
        if sel is None or sel.opcode != "select" or sel.operands[2].id != body.args[j].id:
            continue
        c = sel.operands[0]
        if yld.operands[0].id == c.id or (mask is not None and mask.opcode == "bitand"
                                          and any(x.id == c.id for x in mask.operands)):
            yield j, sel, defs


def free_selects(ops: list[Op], outputs: list[Value]) -> set[int]:
    """ids (``id(op)``) of the select ops whose result may be their ``new`` operand."""
    uses = value_uses(ops, outputs)
    return {id(sel) for top in ops for op in nested(top) for j, sel, _ in _carried_selects(op)
            if not uses[op.results[j].id] and uses[sel.result.id] == 1}


def uniform_counters(op: Op) -> dict[int, tuple[int, int]]:
    """Carried slots of a varying ``while`` that count on active lanes alike:
    ``{j: (id of the select, id of the step value)}``.

    A slot qualifies when its initial value is uniform, the body yields ``select c,
    old + step, old`` with a uniform ``step`` (and the mask-out condition of
    ``free_selects``), and the ``before`` region forwards it unchanged.  Then every lane
    still in the loop at iteration t holds ``init + t * step``: a lane once out never
    comes back, and a lane that stays got ``+ step`` each time.  Inside the loop only
    active lanes are observed, so the code generator reads the slot there as one
    uniform scalar counter and keeps the per-lane value only for the loop's result.
    This takes mandelbrot's ``i < max_iter`` off the loop-carried chain (mask -> masked
    increment -> vector compare -> mask: ~8 cycles an iteration longer than the ``z``
    recurrence) and makes it a scalar compare, as hand-written SIMD code does."""
    found = {}
    for j, sel, defs in _carried_selects(op):
        init, before = op.operands[j], op.regions[0]
        cond = before.ops[-1]
        if init.varying or getattr(init.type, "kind", None) not in ("i", "u"):
            continue
        if len(cond.operands) != len(before.args) + 1 \
                or cond.operands[1 + j].id != before.args[j].id:
            continue
        add = defs.get(sel.operands[1].id)
        if add is None or add.opcode != "add" or add.operands[0].id != sel.operands[2].id \
                or add.operands[1].varying:
            continue
        found[j] = (id(sel), add.operands[1].id)
    return found
