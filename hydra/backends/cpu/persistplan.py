"""Which phases run as persistent lanes, and their split around the loop (``plan``).

Takes: a phase's ops, inputs and outputs (``phases``), before any code is made.
Guarantees: ``plan`` returns a ``Shape`` (the ops before the loop, split into those run
once and those run per refilled slot, the loop, the ops after it, with the values whose
uniformity changes cloned as varying) where the phase is eligible, else the reason it
keeps lockstep gangs; ``persistent.PersistentGen`` makes the code of a ``Shape``.

**Eligibility** (``plan``; otherwise the phase runs the lockstep way of ``codegen``, and
the first line of its LLVM says why):

1. Exactly one top-level ``while``, a varying one whose condition is ``any`` of its
   loop mask (its first carried value and'ed with the test), and no other.
2. The phase is lane-local, as every phase is: no cross-lane intrinsic and no print
   (sync points, host steps: ``codegen.lowerable`` refuses them); its stores go to
   per-lane arrays or to shared arrays at exactly ``lane()`` on the first axis (checked
   again here), so no lane observes another lane's store, and the order in which lanes
   run is not observable through memory.
3. Uniform values that count the loop's trips: a carried value the loop changes is
   uniform only because all lanes enter together; here each slot holds its own (it
   becomes varying, with everything computed from it).  Where such a value decides a
   branch (an ``if`` or an inner loop's condition), is an array, or is a phase output,
   the phase is not eligible.
4. A uniform value that a gang computes from its own lanes (an ``any`` and what depends
   on it) must not flow from ``pre`` into the loop or ``post``: slots refilled at
   different times would see another refill's value.  Inside one trip such values
   (guards, inner loops) mean what they mean in lockstep, for the slots active then.
5. **Errors.**  SPEC section 6 and ``stops`` promise the earliest error in lockstep
   order (trip, statement, lowest lane).  Slots at different trips do not meet their
   errors in that order, and a gang that failed could not simply leave (a lane it has
   not started may fail earlier in lockstep time).  So a persistent phase with error
   sites (bounds checks, integer division by a variable, ``assert``) only notes *that*
   a lane failed and stops; the host then runs the phase again as lockstep gangs (its
   *twin*, ``phases.Plan._twin``, built at the first error) and raises the error that
   one finds.  That is exact only if the first run changed nothing the phase reads, so
   a phase with error sites and a store keeps lockstep gangs.
6. A loop whose condition compares a *counter* (a carried value the body steps by a
   uniform amount, per lane or not: ``for i in range(a, b)``, Mandelbrot's ``i <
   max_iter``) keeps lockstep gangs.  Its trip count is fixed by values at its start,
   which neighbouring lanes usually share, and lockstep keeps a uniform counter in one
   scalar register (``loopselects.uniform_counters``) where slots need a vector:
   Mandelbrot ran 6.7 ms lockstep, 10.1 ms persistent.  This is a heuristic: it
   decides speed, never results.
7. The phase has a per-lane output or a store (``one_gang`` phases run one gang).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir.core import Op, Region, Value
from ...types import ScalarType
from ..cut import nested
from .ganglocal import gang_local_values

_COMPARES = ("lt", "le", "gt", "ge", "eq", "ne")


@dataclass
class Shape:
    """A phase split around its loop, with the values whose marks change (see ``plan``)."""

    hoisted: list[Op]  # uniform ops of ``pre`` that depend on no lane: run once
    pre: list[Op]  # the rest of ``pre``: run for each refilled slot
    loop: Op
    post: list[Op]
    inputs: list[Value]
    outputs: list[Value]


def _walk(ops: list[Op]):
    for op in ops:
        yield from nested(op)


def _counting(loop: Op, ops: list[Op]) -> tuple[set[int], str]:
    """Ids of the uniform values that count the loop's trips (rule 3), or a reason."""
    before, body = loop.regions
    cond, yld = before.terminator, body.terminator
    flip: set[int] = set()
    for j, a in enumerate(before.args):
        if a.varying:
            continue
        if cond.operands[1 + j].id == a.id and yld.operands[j].id == body.args[j].id:
            continue  # never changes in the loop: the same on every slot
        flip |= {a.id, body.args[j].id, loop.results[j].id}
    changed = bool(flip)
    while changed:
        changed = False

        def add(vs) -> None:
            nonlocal changed
            for v in vs:
                if not v.varying and v.id not in flip:
                    flip.add(v.id)
                    changed = True
        for op in _walk(ops):
            if op.opcode != "any" and any(v.id in flip for v in op.inputs()):
                add(op.results)
            if op.opcode == "while":
                b, d = op.regions
                add(a for a, v in zip(b.args, op.operands) if v.id in flip)
                add(a for a, v in zip(b.args, d.terminator.operands) if v.id in flip)
                for a, r, v in zip(d.args, op.results, b.terminator.operands[1:]):
                    if v.id in flip:
                        add([a, r])
            elif op.opcode == "if":
                for r in op.regions:
                    add(x for x, v in zip(op.results, r.terminator.operands) if v.id in flip)
    for op in _walk(ops):
        values = op.results + [a for r in op.regions for a in r.args]
        if any(v.id in flip and not isinstance(v.type, ScalarType) for v in values):
            return flip, "an array depends on the loop's trip count"
        if op.opcode == "if" and op.operands[0].id in flip:
            return flip, "a branch depends on the loop's trip count"
        if op.opcode == "while" and op is not loop \
                and op.regions[0].terminator.operands[0].id in flip:
            return flip, "an inner loop's condition depends on the loop's trip count"
    return flip, ""


def _stepped(loop: Op) -> set[int]:
    """Ids of the ``before`` arguments the loop steps by a uniform amount (``i += 1``,
    a ``for`` loop's index): counters, per lane or not."""
    before, body = loop.regions
    found = set()
    for o in body.walk():
        if o.opcode in ("add", "sub") and not o.operands[1].varying:
            for j, a in enumerate(body.args):
                if o.operands[0].id == a.id:
                    found.add(before.args[j].id)
    return found


def _clone(ops: list[Op], flip: set[int],
           subst: dict[int, Value] | None = None) -> tuple[list[Op], dict[int, Value]]:
    """The ops with the values in ``flip`` replaced by varying copies (same ids) and
    the uses of the values in ``subst`` by their substitutes."""
    vmap: dict[int, Value] = {}
    subst = subst or {}

    def v_(v: Value) -> Value:
        while v.id in subst:
            v = subst[v.id]
        if v.id in flip and v.id not in vmap:
            vmap[v.id] = Value(v.type, v.loc, v.name, True, v.id)
        return vmap.get(v.id, v)

    def op_(op: Op) -> Op:
        regions = [Region([v_(a) for a in r.args], [op_(o) for o in r.ops])
                   for r in op.regions]
        return Op(op.opcode, [v_(v) for v in op.operands], [v_(v) for v in op.results],
                  op.loc, op.attrs, regions, v_(op.mask) if op.mask is not None else None)
    return [op_(op) for op in ops], {**vmap, **{k: v_(v) for k, v in subst.items()}}


def _unguard(ops: list[Op], subst: dict[int, Value]) -> list[Op]:
    """``ops`` with each guard ``if`` that holds a loop replaced by its then-arm (its
    results by what the arm yields).  A guard only skips an arm that no lane runs, so
    running the arm always is the same program; a loop behind an early ``return`` or
    an ``if`` becomes top-level this way."""
    out = []
    for op in ops:
        arm = op.regions[0].ops if op.opcode == "if" and op.attrs.get("guard") else []
        if any(o.opcode == "while" for o in _walk(arm)):
            out += _unguard(arm[:-1], subst)
            subst.update({r.id: v for r, v in zip(op.results, arm[-1].operands)})
        else:
            out.append(op)
    return out


def plan(ops: list[Op], inputs: list[Value], outputs: list[Value],
         one_gang: bool) -> Shape | str:
    """The phase split for persistent lanes, or why it keeps lockstep gangs (the rules
    of the module docstring; rule 5's error sites are known once the code is made)."""
    if one_gang:
        return "one gang runs it"
    subst: dict[int, Value] = {}
    flat = _unguard(ops, subst)
    if subst:
        ops, vmap = _clone(flat, set(), subst)
        outputs = [vmap.get(v.id, v) for v in outputs]
    loops = [i for i, op in enumerate(ops) if op.opcode == "while"]
    if len(loops) != 1:
        return "no top-level loop" if not loops else "more than one top-level loop"
    at = loops[0]
    loop = ops[at]
    before = loop.regions[0]
    cond = before.terminator
    defs = {r.id: o for o in before.ops for r in o.results}
    test = defs.get(cond.operands[0].id)
    if not loop.attrs.get("varying") or test is None or test.opcode != "any" \
            or len(cond.operands) < 2 or test.operands[0].id != cond.operands[1].id:
        return "the loop is not a varying loop"
    mask = defs.get(cond.operands[1].id)
    if mask is None or mask.opcode != "bitand" or before.args[0].id not in (
            mask.operands[0].id, mask.operands[1].id):
        return "the loop's mask is not its carried mask and a condition"
    lane_ids: set[int] = set()
    for op in _walk(ops):
        if op.opcode == "intrinsic" and op.attrs["name"] == "lane":
            lane_ids.add(op.result.id)
        elif op.opcode == "cast" and op.operands[0].id in lane_ids:
            lane_ids.add(op.result.id)
        arr = op.written_array
        if arr is not None and not arr.varying and (
                op.opcode != "store" or op.operands[1].id not in lane_ids):
            return "a store to a shared array at other than lane()"
    flip, why = _counting(loop, ops)
    if why:
        return why
    counters = flip | _stepped(loop)
    if any(o.opcode in _COMPARES and any(v.id in counters for v in o.operands)
           for o in before.walk()):
        return "a counter bounds the loop's trips"
    if any(v.id in flip for v in outputs):
        return "a uniform output depends on the loop's trip count"
    local = gang_local_values(Region([], ops))
    later = {v.id for op in ops[at:] for o in nested(op) for v in o.inputs()}
    later |= {v.id for v in outputs}
    for op in ops[:at]:
        if any(r.id in local and r.id in later for r in op.results):
            return "a gang's own uniform value flows into the loop"
    ops, vmap = _clone(ops, flip)
    hoisted, pre, made = [], [], {v.id for v in inputs if not v.varying}
    for op in ops[:at]:
        if not op.regions and op.mask is None and op.opcode not in ("any", "entry_mask") \
                and not any(r.varying for r in op.results) \
                and all(v.id in made for v in op.operands) and not op.effect:
            hoisted.append(op)
            made |= {r.id for r in op.results}
        else:
            pre.append(op)
    if any(not v.varying and v.id not in made for v in outputs):
        return "a uniform output computed per gang"
    return Shape(hoisted, pre, ops[at], ops[at + 1:], inputs,
                 [vmap.get(v.id, v) for v in outputs])
