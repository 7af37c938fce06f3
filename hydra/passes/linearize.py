"""Linearization: structured SSA with varying branches -> predicated SSA.

Takes: a function marked by ``analyze_uniformity``.
Guarantees (checked by ``verify(fn, predicated=True)``): no ``if`` or ``while``
depends on a varying value; every op with a side effect or that may trap carries
the mask of the lanes that execute it; the function's results are unchanged for
every lane.

Follows partial linearization (Karrenberg & Hack, CGO 2011; Moll & Hack, PLDI
2018), which on structured IR is a local rewrite per op:

- a **uniform** ``if`` or ``while`` stays a branch / loop: all active lanes take it
  together, under the mask they came with;
- a **varying** ``if c`` becomes both arms in sequence, the then-arm under
  ``m & c`` and the else-arm under ``m & ~c``, each behind an ``any(mask)`` guard
  (a uniform ``if``) so an arm that no lane takes costs nothing, with a
  ``select`` per result at the join;
- a **varying** ``while`` becomes a loop that repeats while *any* lane is active.
  Its loop mask is carried (``m' = m & c`` where the condition is evaluated).  A
  carried value that is varying inside the loop and used after it is frozen for
  lanes that have left (``x' = select(m, x_new, x)`` at the end of the body); one
  that is uniform inside the loop stays a scalar, and each lane's copy of it is
  captured when the lane leaves (``L = select(m & ~c, x, L)``): temporal divergence.

``break``/``continue``/``return`` arrive as flag variables (see the frontend), so
after this pass they are exactly mask updates.  The flags that leave a loop
(``attrs["exit_flags"]``: break, return) are false on every active lane, so inside the
loop they are the constant False; a lane that sets one drops out of the loop mask at
the end of that iteration, its live-outs taken there, and simplify then removes the
flag from the loop's carried values.  Arms that hold only a handful of
pure ops get no ``any`` guard: the guard would cost more than the ops.
"""

from __future__ import annotations

from ..errors import CompileError, Loc
from ..ir.core import Function, Op, Region, Value
from ..types import BOOL, ArrayType

_SMALL_ARM = 8


def linearize(fn: Function) -> Function:
    lin = _Linearizer({v.id for op in fn.walk() for v in op.inputs()})
    entry = Op("entry_mask", [], [Value(BOOL, fn.loc, "m", varying=True)], fn.loc)
    fn.body.ops = [entry] + lin.region_ops(fn.body, entry.result)
    return fn


def _worth_guarding(region: Region) -> bool:
    count = 0
    for op in region.walk():
        if op.opcode in ("yield", "const", "undef", "count"):  # (a profile's count: no cost)
            continue
        if op.needs_mask or op.regions:
            return True
        count += 1
    return count > _SMALL_ARM


class _Linearizer:
    def __init__(self, used: set[int]) -> None:
        self.used = used  # ids of the values some op reads
        self.subst: dict[int, Value] = {}
        self.out: list[Op] = []

    def v(self, value: Value) -> Value:
        return self.subst.get(value.id, value)

    def new(self, opcode: str, operands: list[Value], type_, loc: Loc, varying: bool,
            name: str = "", **attrs) -> Value:
        result = Value(type_, loc, name, varying=varying)
        self.out.append(Op(opcode, operands, [result], loc, dict(attrs)))
        return result

    def region_ops(self, region: Region, mask: Value) -> list[Op]:
        """The linearized ops of ``region`` executed under ``mask``."""
        saved, self.out = self.out, []
        for op in region.ops:
            op.operands = [self.v(x) for x in op.operands]
            if op.opcode == "if" and op.operands[0].varying:
                self.varying_if(op, mask)
            elif op.opcode == "while" and op.regions[0].terminator.operands[0].varying:
                self.varying_while(op, mask)
            else:
                # a uniform loop's break/return flags are ordinary uniform values
                op.attrs.pop("exit_flags", None)
                if op.needs_mask:
                    op.mask = mask
                for r in op.regions:
                    r.ops = self.region_ops(r, mask)
                self.out.append(op)
        ops, self.out = self.out, saved
        return ops

    # --- if ---------------------------------------------------------------------------

    def varying_if(self, op: Op, mask: Value) -> None:
        loc = op.loc
        cond = op.operands[0]
        not_cond = self.new("not", [cond], BOOL, loc, True)
        then_vals, else_vals = [
            self.arm(region, self.new("bitand", [mask, c], BOOL, loc, True, f"m.{label}"), loc)
            for region, c, label in zip(op.regions, (cond, not_cond), ("then", "else"))]
        for r, a, b in zip(op.results, then_vals, else_vals):
            if a is b:
                self.subst[r.id] = a
                continue
            if isinstance(r.type, ArrayType) and r.type.shape is None:
                raise CompileError(
                    f"'{r.name or 'this variable'}' holds a different array on different lanes "
                    f"after this if", loc, hint="choose between arrays with a uniform condition")
            sel = Value(r.type, r.loc, r.name, varying=True)
            self.out.append(Op("select", [cond, a, b], [sel], loc))
            self.subst[r.id] = sel

    def arm(self, region: Region, arm_mask: Value, loc: Loc) -> list[Value]:
        """Run an arm under its mask; return the values it yields (or undefs where an
        any-guard skipped it)."""
        if len(region.ops) == 1:  # only the yield
            return [self.v(x) for x in region.terminator.operands]
        if not _worth_guarding(region):
            inner = self.region_ops(region, arm_mask)
            term = inner.pop()
            self.out += inner
            return term.operands
        inner = Region([], self.region_ops(region, arm_mask))
        yielded = inner.terminator.operands
        saved, self.out = self.out, []
        undefs = [self.new("undef", [], y.type, loc, y.varying) for y in yielded]
        skipped = Region([], [*self.out, Op("yield", undefs, [], loc)])
        self.out = saved
        guard = self.new("any", [arm_mask], BOOL, loc, False)
        results = [Value(y.type, y.loc, y.name, varying=y.varying or False) for y in yielded]
        self.out.append(Op("if", [guard], results, loc, {"guard": True}, [inner, skipped]))
        return results

    # --- while ------------------------------------------------------------------------

    def varying_while(self, op: Op, mask: Value) -> None:
        loc = op.loc
        before, body = op.regions
        used = [i for i, r in enumerate(op.results) if r.id in self.used]
        # A value varying inside the loop is frozen for lanes that left by selecting with
        # the loop mask, so it is its own result; a value uniform inside the loop stays a
        # scalar and gets a per-lane live-out copy, taken as each lane leaves.
        frozen = [i for i in used if body.args[i].varying]
        live = [i for i in used if i not in frozen]
        live_init = [self.new("undef", [], op.results[i].type, loc, True) for i in live]

        def fresh_args(region: Region) -> tuple[Value, list[Value]]:
            m = Value(BOOL, loc, "m.loop", varying=True)
            lives = [Value(op.results[i].type, loc, op.results[i].name, varying=True)
                     for i in live]
            region.args = [m, *region.args, *lives]
            return m, lives

        flags = op.attrs.pop("exit_flags", [])
        false = self.new("const", [], BOOL, loc, False, value=False) if flags else None
        m_before, lives_before = fresh_args(before)
        for k in flags:  # an active lane has not broken out or returned (yet)
            self.subst[before.args[1 + k].id] = false  # (before has its mask argument now)
            self.subst[body.args[k].id] = false
        ops = self.region_ops(before, m_before)
        cond_op = ops.pop()
        saved, self.out = self.out, ops
        c = cond_op.operands[0]
        passed = cond_op.operands[1:]
        for k in flags:  # pass the flag on unchanged, so that simplify can drop it
            passed[k] = before.args[1 + k]
        not_c = self.new("not", [c], BOOL, loc, True)
        exiting = self.new("bitand", [m_before, not_c], BOOL, loc, True, "m.exit")
        new_lives = [self.new("select", [exiting, passed[i], lives_before[k]],
                              op.results[i].type, loc, True, op.results[i].name)
                     for k, i in enumerate(live)]
        m_next = self.new("bitand", [m_before, c], BOOL, loc, True, "m.loop")
        go = self.new("any", [m_next], BOOL, loc, False)
        self.out.append(Op("condition", [go, m_next, *passed, *new_lives], [], loc))
        before.ops, self.out = self.out, saved

        m_body, lives_body = fresh_args(body)
        body.ops = self.region_ops(body, m_body)
        term = body.ops.pop()
        yielded = term.operands
        m_stay, lives_out = m_body, lives_body
        saved, self.out = self.out, body.ops  # the end of the body
        if flags:
            # Lanes that set an exit flag leave the loop mask here, at the end of the
            # iteration, and their live-out values are taken now; the flag itself need
            # not travel around the loop.
            leave = yielded[flags[0]]
            for k in flags[1:]:
                leave = self.new("bitor", [leave, yielded[k]], BOOL, loc, True)
            leaving = self.new("bitand", [m_body, leave], BOOL, loc, True, "m.leave")
            not_leave = self.new("not", [leave], BOOL, loc, True)
            m_stay = self.new("bitand", [m_body, not_leave], BOOL, loc, True, "m.loop")
            lives_out = [self.new("select", [leaving, yielded[i], lives_body[k]],
                                  op.results[i].type, loc, True, op.results[i].name)
                         for k, i in enumerate(live)]
        for i in frozen:
            yielded[i] = self.new("select", [m_body, yielded[i], body.args[1 + i]],
                                  op.results[i].type, loc, True, op.results[i].name)
        body.ops, self.out = self.out, saved
        term.operands = [m_stay, *yielded, *lives_out]
        body.ops.append(term)

        final_mask = Value(BOOL, loc, "m.done", varying=True)
        carried = [Value(r.type, r.loc, r.name, varying=r.varying) for r in op.results]
        final_lives = [Value(op.results[i].type, loc, op.results[i].name, varying=True)
                       for i in live]
        for i, v in zip(live, final_lives):
            self.subst[op.results[i].id] = v
        for i in frozen:
            self.subst[op.results[i].id] = carried[i]
        op.operands = [mask, *op.operands, *live_init]
        op.results = [final_mask, *carried, *final_lives]
        op.attrs["varying"] = True
        self.out.append(op)
