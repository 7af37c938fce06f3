"""Simplify: local clean-ups that keep every lane's results.

Takes: any stage (typically predicated SSA).  Guarantees: the same observable
behaviour with fewer ops:

- a ``cast`` to its operand's own type and a ``select`` of one value twice are
  replaced by that value; ``not``, ``bitand``, ``bitor`` and ``select`` with constant
  boolean operands are folded (the frontend's break/return flags start as
  constants, so this removes most of their tests);
- common subexpression elimination: a pure op equal to one that dominates it
  (same opcode, operands and attributes, in its region or an enclosing one) is
  replaced by that one; never a cross-lane intrinsic, whose value depends on the
  active lanes (in the structured form an inner region has fewer);
- an ``if`` on a constant condition is replaced by the arm it takes;
- dead code elimination: pure ops whose results nobody reads are removed; an
  ``if`` result nobody reads is dropped from both arms; a loop-carried value
  that is read by nothing but its own update chain is dropped from the loop.

Ops with side effects, traps (they may raise) or masks are kept.  First, a
``lanesum`` of a weight's gradient is moved to where its terms are made
(``hydra.grad.lanesums``: one GEMM per outer product, a uniform accumulator in a loop).
"""

from __future__ import annotations

from ..grad.lanesums import sink_lanesums
from ..intrinsics import INTRINSICS
from ..ir.core import Function, Op, Region, Value


def simplify(fn: Function) -> Function:
    sink_lanesums(fn)
    while True:
        subst: dict[int, Value] = {}
        changed = _fold_region(fn.body, subst)
        _apply(fn.body, subst)
        changed |= _dce(fn)
        if not changed:
            return fn


def _cse_key(op: Op):
    """A key equal for ops that compute the same value, or None if not a candidate."""
    if op.regions or op.mask is not None or len(op.results) != 1 or not _is_removable(op):
        return None
    if op.opcode in ("undef", "local_array", "entry_mask"):
        return None  # each of these is a distinct value (or distinct memory)
    if op.opcode == "intrinsic" and INTRINSICS[op.attrs["name"]].cross_lane:
        # its value depends on which lanes are active, which the structured form (no
        # mask operand) does not show: equal operands under another mask differ
        return None
    attrs = []
    for k, v in sorted(op.attrs.items()):
        if isinstance(v, float):
            v = (float, repr(v))  # 0.0 == -0.0 in Python, but they are different constants
        try:
            hash(v)
        except TypeError:
            v = id(v)
        attrs.append((k, v))
    return (op.opcode, op.result.type, op.result.varying, tuple(v.id for v in op.operands),
            tuple(attrs))


def _fold_bool(op: Op, consts: dict):
    """The value a boolean op reduces to given constant operands: a Value, a Python
    bool (a new constant), or None."""
    ops = op.operands
    known = [consts.get(v.id) for v in ops]
    if op.opcode == "not" and known[0] is not None:
        return not known[0]
    if op.opcode in ("bitand", "bitor") and op.result.type.kind == "b":
        absorbing = op.opcode == "bitor"  # x | True is True, x & False is False
        for i in (0, 1):
            if known[i] is not None:
                return absorbing if bool(known[i]) == absorbing else ops[1 - i]
    if op.opcode == "select" and known[0] is not None:
        return ops[1] if known[0] else ops[2]
    if op.opcode == "select" and getattr(op.result.type, "kind", None) == "b":
        if known[1] is True and known[2] is False:  # c ? True : False is c
            return ops[0]
    return None


def _merge_selects(op: Op, defs: dict[int, Op], seen: dict) -> bool:
    """``select(a, select(b, x, y), y)`` -> ``select(a & b, x, y)`` if ``a & b`` exists
    (an ``if`` nested in a loop selects twice, and the loop mask already holds both)."""
    inner = defs.get(op.operands[1].id)
    if inner is None or inner.opcode != "select" or inner.operands[2] is not op.operands[2]:
        return False
    a, b = op.operands[0], inner.operands[0]
    for pair in ((a.id, b.id), (b.id, a.id)):
        both = seen.get(("bitand", a.type, a.varying or b.varying, pair, ()))
        if both is not None:
            op.operands = [both, inner.operands[1], op.operands[2]]
            return True
    return False


def _fold_region(region: Region, subst: dict[int, Value], consts=None, seen=None) -> bool:
    consts = dict(consts or {})
    seen = dict(seen or {})
    changed = False
    new_ops: list[Op] = []
    defs: dict[int, Op] = {}
    for op in region.ops:
        _rewire(op, subst)
        for r in op.results:
            defs[r.id] = op
        if op.opcode == "select":
            changed |= _merge_selects(op, defs, seen)
        if op.opcode == "cast" and op.operands[0].type == op.result.type:
            subst[op.result.id] = op.operands[0]
            changed = True
            continue
        if op.opcode == "select" and op.operands[1] is op.operands[2]:
            subst[op.result.id] = op.operands[1]
            changed = True
            continue
        folded = _fold_bool(op, consts) if op.opcode in ("not", "bitand", "bitor", "select") \
            else None
        if isinstance(folded, Value) and folded.type == op.result.type and \
                (op.result.varying or not folded.varying):
            subst[op.result.id] = folded
            changed = True
            continue
        if isinstance(folded, bool):
            op.opcode, op.operands, op.attrs = "const", [], {"value": folded}
            changed = True
        if op.opcode == "const":
            consts[op.result.id] = op.attrs["value"]
        key = _cse_key(op)
        if key is not None:
            if key in seen:
                subst[op.result.id] = seen[key]
                changed = True
                continue
            seen[key] = op.result
        if op.opcode == "if" and op.operands[0].id in consts:
            taken = op.regions[0] if consts[op.operands[0].id] else op.regions[1]
            for inner in taken.ops[:-1]:
                for r in inner.regions:
                    _fold_region(r, subst, consts, seen)
                _rewire(inner, subst)
                new_ops.append(inner)
                if inner.opcode == "const":
                    consts[inner.result.id] = inner.attrs["value"]
            for r, y in zip(op.results, taken.terminator.operands):
                subst[r.id] = _resolve(subst, y)
            changed = True
            continue
        for r in op.regions:
            changed |= _fold_region(r, subst, consts, seen)
        new_ops.append(op)
    region.ops = new_ops
    return changed


def _apply(region: Region, subst: dict[int, Value]) -> None:
    if subst:
        for op in region.walk():
            _rewire(op, subst)


def _rewire(op: Op, subst: dict[int, Value]) -> None:
    """``op`` reading the values ``subst`` replaces its operands and mask by."""
    op.operands = [_resolve(subst, v) for v in op.operands]
    if op.mask is not None:
        op.mask = _resolve(subst, op.mask)


def _resolve(subst: dict[int, Value], v: Value) -> Value:
    while v.id in subst:
        v = subst[v.id]
    return v


def _is_removable(op: Op) -> bool:
    return not (op.effect or op.traps or op.info.terminator or op.mask is not None)


def _dce(fn: Function) -> bool:
    changed = False
    while True:
        used: set[int] = {v.id for op in fn.walk() for v in op.inputs()}
        step = _dce_region(fn.body, used)
        changed |= step
        if not step:
            return changed


def _dce_region(region: Region, used: set[int]) -> bool:
    changed = False
    kept = []
    for op in region.ops:
        if op.opcode == "if":
            changed |= _prune_if(op, used)
        elif op.opcode == "while":
            changed |= _prune_while(op, used)
        for r in op.regions:
            changed |= _dce_region(r, used)
        if op.opcode in ("if", "while"):
            if not op.results and not any(_has_effects(r) for r in op.regions):
                changed = True
                continue
        elif _is_removable(op) and not any(r.id in used for r in op.results):
            changed = True
            continue
        kept.append(op)
    region.ops = kept
    return changed


def _has_effects(region: Region) -> bool:
    return any(not _is_removable(op) and not op.info.terminator for op in region.walk())


def _prune_if(op: Op, used: set[int]) -> bool:
    keep = [i for i, r in enumerate(op.results) if r.id in used]
    if len(keep) == len(op.results):
        return False
    op.results = [op.results[i] for i in keep]
    for region in op.regions:
        term = region.terminator
        term.operands = [term.operands[i] for i in keep]
    return True


def _prune_while(op: Op, used: set[int]) -> bool:
    """Drop carried value i if nothing reads its result, its before-argument (other than
    passing it to the body) or its body-argument (other than computing its own update)."""
    before, body = op.regions
    cond = before.terminator
    n = len(op.results)
    drop = [i for i in range(n) if op.results[i].id not in used
            and cond.operands[i + 1] is before.args[i]  # (its one use in before)
            and _count_uses(before, before.args[i]) == 1
            and _feeds_only_itself(body, body.args[i], i)]
    if not drop:
        return False
    keep = [i for i in range(n) if i not in drop]
    op.operands = [op.operands[i] for i in keep]
    op.results = [op.results[i] for i in keep]
    before.args = [before.args[i] for i in keep]
    body.args = [body.args[i] for i in keep]
    cond.operands = [cond.operands[0]] + [cond.operands[i + 1] for i in keep]
    body.terminator.operands = [body.terminator.operands[i] for i in keep]
    return True


def _count_uses(region: Region, v: Value) -> int:
    return sum(1 for op in region.walk() for x in op.inputs() if x is v)


def _feeds_only_itself(body: Region, arg: Value, i: int) -> bool:
    """Is ``arg`` read only by ops whose results flow only into yield slot ``i``?"""
    # The slice of ops that depend on arg (walked in order, so an op's inputs are
    # tainted before it is reached): removable ops whose results flow only into the
    # slice or into the yield at position i.
    tainted = {arg.id}
    term = body.terminator
    for op in body.walk():
        if op is term or not any(x.id in tainted for x in op.inputs()):
            continue
        if not _is_removable(op) or op.regions:
            return False
        tainted.update(r.id for r in op.results)
    for k, x in enumerate(term.operands):
        if x.id in tainted and k != i:
            return False
    return True
