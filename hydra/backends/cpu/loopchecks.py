"""Range checks on a loop's induction variable, decided once per gang before the loop.

``for i in range(start, stop)`` with a varying ``start`` or ``stop`` is a varying
``while`` whose slot ``i`` steps by a constant, and a lane is in the loop only while
``i < stop``.  A ``check`` in the loop body whose condition bounds an affine function of
``i`` (``np.uint32(2 * i)`` with a Python-int ``i``: ``0 <= 2 * i <= 2**32 - 1``, NumPy
2's OverflowError) then holds on every trip of a lane iff it holds at the lane's first
and last possible ``i``: an affine function is monotonic, and wrapping int64 arithmetic
gives the exact value wherever that lies in the int64 range.  The code generator tests
that once per gang, before the loop (``safe``), and skips the check inside the loop
when it holds; otherwise the check runs as before, so errors and their order do not
change.  In mc-pi-block (bench/mcpiblock.py) the two checks were 8 int64 compares, 4
k-register ors and 2 branches of each trip.

``induction_checks(op, defs)`` finds them: ``{id(check op): Range}``.  Conditions: the
``while`` is varying; slot j forwards unchanged through ``before``, whose mask is the
loop mask ``bitand`` ``lt(slot, bound)`` with ``bound`` defined outside the loop; the
body yields ``add(slot, step)`` in slot j with a constant ``step > 0``; the check is a
top-level op of the body under the body's own mask; its condition is a ``bitand`` tree
of ``ge/gt/le/lt`` of one int64 value against constants, and that value is built from
the slot and int64 constants by ``add``, ``sub`` and ``mul``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir.core import Op, Value
from ..cut import nested

_MIN, _MAX = -(2 ** 63), 2 ** 63 - 1
_FLIP = {"ge": "le", "gt": "lt", "le": "ge", "lt": "gt"}


@dataclass
class Range:
    """Lanes whose first ``i`` (``init``) is at least ``lo`` and whose ``bound`` is at
    most ``hi_bound`` never fail the check (``lo``/``hi_bound`` None: no limit)."""

    init: Value
    bound: Value
    lo: int | None
    hi_bound: int


def _const(v: Value, defs: dict):
    op = defs.get(v.id)
    if op is not None and op.opcode == "const" and v.type.name == "int64":
        return int(op.attrs["value"])
    return None


def _affine(v: Value, slot: Value, defs: dict, depth: int = 0):
    """``(a, b)`` with ``v == a * slot + b`` (exact integers), or None."""
    if v.id == slot.id:
        return 1, 0
    c = _const(v, defs)
    if c is not None:
        return 0, c
    op = defs.get(v.id)
    if op is None or depth > 8 or v.type.name != "int64" or op.opcode not in (
            "add", "sub", "mul"):
        return None
    x, y = (_affine(o, slot, defs, depth + 1) for o in op.operands)
    if x is None or y is None:
        return None
    if op.opcode == "add":
        return x[0] + y[0], x[1] + y[1]
    if op.opcode == "sub":
        return x[0] - y[0], x[1] - y[1]
    if x[0] and y[0]:
        return None  # slot * slot
    return x[0] * y[1] + y[0] * x[1], x[1] * y[1]


def _interval(v: Value, defs: dict, lo=None, hi=None, depth: int = 0):
    """``(value, lo, hi)``: ``v`` (a bool) is ``lo <= value <= hi``, or None."""
    op = defs.get(v.id)
    if op is None or depth > 8:
        return None
    if op.opcode == "bitand":
        got = None
        for o in op.operands:
            r = _interval(o, defs, lo, hi, depth + 1)
            if r is None or (got is not None and r[0].id != got[0].id):
                return None
            got = r
            lo, hi = r[1], r[2]
        return got
    if op.opcode not in _FLIP:
        return None
    a, b = op.operands
    name = op.opcode
    if _const(a, defs) is not None:
        a, b, name = b, a, _FLIP[name]
    c = _const(b, defs)
    if c is None or a.type.name != "int64":
        return None
    if name in ("ge", "gt"):
        lo = max(lo if lo is not None else _MIN, c + (name == "gt"))
    else:
        hi = min(hi if hi is not None else _MAX, c - (name == "lt"))
    return a, lo, hi


def _slot_range(a: int, b: int, lo, hi) -> tuple[int | None, int | None]:
    """The slot values ``i`` with ``lo <= a * i + b <= hi`` (None: unbounded)."""
    def ceil(p, q):
        return -((-p) // q)
    if a > 0:
        return (None if lo is None else ceil(lo - b, a)), (None if hi is None else (hi - b) // a)
    return (None if hi is None else ceil(hi - b, a)), (None if lo is None else (lo - b) // a)


def inductions(op: Op, defs: dict) -> dict[int, int]:
    """``{slot j: step}`` of a varying ``while``: slots forwarded unchanged through
    ``before`` whose body yields ``add(slot, step)`` with a constant ``step > 0`` (so at
    trip t every lane, active or not, holds ``init + t * step``)."""
    if op.opcode != "while" or not op.attrs.get("varying"):
        return {}
    before, body = op.regions
    cond, yld = before.ops[-1], body.ops[-1]
    found = {}
    for j in range(1, len(before.args)):
        slot = body.args[j]
        if slot.type.name != "int64" or cond.operands[1 + j].id != before.args[j].id:
            continue
        step_op = defs.get(yld.operands[j].id)
        if step_op is None or step_op.opcode != "add" or step_op.operands[0].id != slot.id:
            continue
        step = _const(step_op.operands[1], defs)
        if step is not None and step > 0:
            found[j] = step
    return found


def narrow_casts(op: Op, defs: dict) -> dict[int, tuple[int, int, int]]:
    """``{id(cast op): (slot j, a, b)}``: casts in ``op``'s body of ``a * slot + b`` to
    a 32-bit integer.  Truncation commutes with wrapping add and multiply,
    so the code generator computes them from a 32-bit copy of the slot that steps
    beside it (mc-pi-block's ``np.uint32(2 * i)``: no int64 -> int32 packing a trip)."""
    found = {}
    for j in inductions(op, defs):
        slot = op.regions[1].args[j]
        if not slot.varying:
            continue
        for o in op.regions[1].walk():
            if o.opcode != "cast" or o.operands[0].type.name != "int64" \
                    or getattr(o.result.type, "kind", "") not in ("i", "u") \
                    or o.result.type.bits != 32:
                continue
            ab = _affine(o.operands[0], slot, defs)
            if ab and ab[0]:
                found[id(o)] = (j, *ab)
    return found


def induction_checks(op: Op, defs: dict) -> dict[int, Range]:
    """The checks of ``op``'s body that a test before the loop may decide."""
    steps = inductions(op, defs)
    if not steps:
        return {}
    before, body = op.regions
    cond = before.ops[-1]
    inside = {a.id for r in op.regions for a in r.args}
    inside |= {x.id for o in nested(op) for x in o.results}
    mask = defs.get(cond.operands[1].id)
    found: dict[int, Range] = {}
    for j, step in steps.items():
        slot = body.args[j]
        bound = None
        if mask is not None and mask.opcode == "bitand" \
                and mask.operands[0].id == before.args[0].id:
            lt = defs.get(mask.operands[1].id)
            if lt is not None and lt.opcode == "lt" and lt.operands[0].id == before.args[j].id \
                    and lt.operands[1].id not in inside:
                bound = lt.operands[1]
        if bound is None:
            continue
        for chk in body.ops:
            if chk.opcode != "check" or chk.mask is None or chk.mask.id != body.args[0].id:
                continue
            got = _interval(chk.operands[0], defs)
            ab = got and _affine(got[0], slot, defs)
            if not ab or not ab[0]:
                continue
            ilo, ihi = _slot_range(ab[0], ab[1], got[1], got[2])
            # the last i is below bound, and i + step must not wrap
            hi_bound = min(_MAX - step + 1, _MAX if ihi is None else ihi + 1)
            if (ilo is not None and ilo > _MAX) or hi_bound < _MIN:
                continue
            found[id(chk)] = Range(op.operands[j], bound,
                                   None if ilo is None or ilo <= _MIN else ilo, hi_bound)
    return found
