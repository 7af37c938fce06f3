"""Loops for the builder: ``while`` and ``for ... in range(...)`` become ``while`` ops.

The carried variables are the names the loop assigns (plus the break/return flags
and the hidden range counter); their types are found by a fixpoint: translate the
loop, widen each carried type to the join of what enters and what the body
yields, and translate again until nothing widens.  A condition is evaluated only
for lanes that have not left the loop with ``break`` or ``return``.
"""

from __future__ import annotations

import ast
import functools

from ..errors import CompileError, Loc
from ..ir.core import Op, Region, Value
from ..types import BOOL, ScalarType, join
from .arrayops import is_array
from .common import Meta, Partial, assigned_names, has_return, loop_exits
from .containers import Struct, is_node


class LoopMixin:
    """Loop translation; mixed into ``Builder``."""

    # --- loops --------------------------------------------------------------------------

    def stmt_while(self, node: ast.While) -> None:
        self.build_loop(node.body, self.loc(node), lambda: self.condition(node.test), None)

    def stmt_for(self, node: ast.For) -> None:
        loc = self.loc(node)
        it = node.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                and it.func.id == "range"):
            array = self.expr(it)
            if is_array(array):
                return self.for_rows(node, array, loc)
            if is_node(array):  # a tuple, list, dict, enumerate(...), zip(...): unrolled
                return self.for_items(node, self.iteration_items(array, loc), loc)
        start, stop, step = self.range_args(node.iter)
        if self.unrolled_for(node, (start, stop, step), loc):
            return
        record = self.counter_of(node, (start, stop, step), loc)
        counter = f"$i{self.frame.prefix}.{self.fresh()}"
        self.frame.env[counter] = start
        step_const = self.constant_value(step)
        if step_const == 0:
            raise CompileError("range() arg 3 must not be zero", self.loc(node.iter))
        if step_const is None:
            nonzero = self.emit("ne", [step, self.coerce(self.const(0, loc), step.type, loc)],
                                BOOL, loc)
            self.emit_op("check", [nonzero], [], loc,
                         {"kind": "value", "message": "range() arg 3 must not be zero"})

        def cond() -> Value:
            i = self.frame.env[counter]
            if step_const is not None:
                return self.emit("lt" if step_const > 0 else "gt", [i, stop], BOOL, loc)
            zero = self.coerce(self.const(0, loc), step.type, loc)
            up = self.emit("gt", [step, zero], BOOL, loc)
            below = self.emit("lt", [i, stop], BOOL, loc)
            above = self.emit("gt", [i, stop], BOOL, loc)
            return self.emit("select", [up, below, above], BOOL, loc)

        def before_body() -> None:
            i = self.frame.env[counter]
            self.loop_counters[i.id] = record  # a shape that depends on it: unroll
            self.store_target(node.target, i)
            self.frame.env[counter] = self.emit("add", [i, step], i.type, loc)

        first, last = self.constant_value(start), self.constant_value(stop)
        once = None not in (first, last, step_const) and (
            first < last if step_const > 0 else first > last)
        self.build_loop(node.body, loc, cond, before_body, extra_carried=[counter],
                        assigns=assigned_names([node]), runs_once=once)
        del self.frame.env[counter]

    def for_rows(self, node: ast.For, array, loc: Loc) -> None:
        """``for row in a``: ``for k in range(len(a)): row = a[k]`` (a's leading axis)."""
        name = f"$rows{self.frame.prefix}.{self.fresh()}"
        k = f"$row{self.frame.prefix}.{self.fresh()}"
        self.frame.env[name] = array
        n = self.array_attribute(array, "shape", loc)[0]
        self.frame.env[k + ".n"] = n

        def at(x):
            return ast.copy_location(x, node.iter)
        row = at(ast.Assign([node.target], at(ast.Subscript(
            at(ast.Name(name, ast.Load())), at(ast.Name(k, ast.Load())), ast.Load()))))
        rng = at(ast.Call(at(ast.Name("range", ast.Load())),
                          [at(ast.Name(k + ".n", ast.Load()))], []))
        self.stmt_for(ast.copy_location(ast.For(at(ast.Name(k, ast.Store())), rng,
                                                [row, *node.body], []), node))

    def range_args(self, it: ast.expr) -> tuple[Value, Value, Value]:
        loc = self.loc(it)
        ok = isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and not it.keywords
        if ok:
            try:
                ok = self.lookup(it.func.id, loc) == Meta(range)
            except CompileError:
                ok = False
        if not ok:
            raise CompileError("for loops iterate over range(...) only", loc,
                               hint="write for i in range(len(a)) and index a[i]")
        args = [self.expr(a) for a in it.args]
        if not 1 <= len(args) <= 3 or not all(isinstance(a, Value) for a in args):
            raise CompileError("range() takes 1 to 3 integer arguments", loc)
        for a in args:
            if not isinstance(a.type, ScalarType) or a.type.kind not in "iub":
                raise CompileError(f"range() arguments must be integers, not {a.type}", loc)
        if len(args) == 1:
            args = [self.const(0, loc), args[0]]
        if len(args) == 2:
            args.append(self.const(1, loc))
        t = functools.reduce(lambda t, a: join(t, a.type) or t, args[1:], args[0].type)
        if t.kind == "b":
            t = join(t, self.const(0, loc).type)
        return tuple(self.coerce(a, t, loc) for a in args)  # type: ignore[return-value]

    def build_loop(self, body: list[ast.stmt], loc: Loc, cond_fn, before_body,
                   extra_carried: list[str] = (), assigns: list[str] | None = None,
                   runs_once: bool = False) -> None:
        """Emit a ``while`` op: carried variables found syntactically, their types by a
        fixpoint over retranslations of the loop.  ``runs_once``: the body surely runs
        (``range(c)`` with a constant c > 0), so what it assigns is defined after it."""
        frame = self.frame
        has_break, has_continue = loop_exits(body)
        tag = frame.prefix + "." + self.fresh()
        brk, cont = (f"$brk{tag}" if has_break else ""), (f"$cont{tag}" if has_continue else "")
        if brk:
            frame.env[brk] = self.const(False, loc)
        names = list(assigns if assigns is not None else assigned_names(body))
        if has_return(body):
            names += [frame.ret, frame.retval]
        names += [brk] if brk else []
        names += list(extra_carried)
        entry_env, entry_partial = dict(frame.env), dict(frame.partial)
        shapes: dict[str, object] = {}
        for n in names:
            if n in entry_env and isinstance(entry_env[n], (Value, tuple, Struct)):
                v = entry_env[n]
                # a container's items start pinned to their values (not carried): those
                # the body leaves alone stay so, uniform if they were (see pin_same)
                shapes[n] = self.pin_same(v, v, self.shape_of(n, v, loc)) if is_node(v) \
                    else self.shape_of(n, v, loc)
        for _attempt in range(20):
            frame.env, frame.partial = dict(entry_env), dict(entry_partial)
            carried = list(shapes)
            init = [x for n in carried for x in (
                self.leaves_as(entry_env[n], shapes[n], loc) if n in entry_env
                else self.undef_leaves(shapes[n], loc))]
            types = [v.type for v in init]
            before = Region([Value(t, loc) for t in types])
            self.bind(carried, shapes, before.args, entry_env, loc)
            outer, self.region = self.region, before
            stop = [frame.env[f] for f in (frame.ret if frame.ret in shapes else None,
                                           brk or None) if f]
            c = self.and_not_stopped(cond_fn, stop, loc) if stop else cond_fn()
            before.ops.append(Op("condition", [c, *before.args], [], loc))
            body_region = Region([Value(t, loc) for t in types])
            self.region = body_region
            self.bind(carried, shapes, body_region.args, entry_env, loc)
            frame.loops.append((brk, cont))
            if cont:
                frame.env[cont] = self.const(False, loc)
            if before_body is not None:
                before_body()
            self.stmts(body)
            frame.loops.pop()
            widened = dict(shapes)
            for n in names:
                if n not in frame.env or not isinstance(frame.env[n], (Value, tuple, Struct)):
                    continue
                s = self.shape_of(n, frame.env[n], loc)
                if n in entry_env:
                    s = self.pin_same(frame.env[n], entry_env[n], s)
                widened[n] = s if n not in widened else self.join_shapes(
                    n, widened[n], s, self.value_loc(entry_env.get(n), loc),
                    self.binding_loc(n, frame.env[n], loc))
            if widened != shapes:
                shapes = widened
                self.region = outer
                continue
            yields = [x for n in carried for x in self.leaves_as(frame.env[n], shapes[n], loc)]
            body_region.ops.append(Op("yield", yields, [], loc))
            self.region = outer
            owners = [n for n in carried for _ in self.leaf_types(shapes[n])]  # by leaf
            op = self.emit_op("while", init, types, loc, regions=[before, body_region],
                              attrs={"exit_flags": [k for k, n in enumerate(owners)
                                                    if n in (brk, frame.ret)]})
            frame.env, frame.partial = dict(entry_env), dict(entry_partial)
            results = iter(op.results)
            for n in carried:
                value = frame.env[n] = self.joined(n, shapes[n], results)
                if n not in entry_env and not n.startswith("$") and not runs_once:
                    frame.partial[n] = Partial(self.value_loc(value, loc), loc, loop=True)
            if brk:
                del frame.env[brk]
            return
        raise CompileError("the types of the loop's variables do not settle", loc)

    def bind(self, carried, shapes, args, entry_env, loc) -> None:
        it = iter(args)
        for n in carried:
            value = self.rebuild(shapes[n], it)
            self.frame.env[n] = value
            if isinstance(value, Value) and not n.startswith("$"):
                value.name = n
            if n not in entry_env and not n.startswith("$"):
                self.frame.partial[n] = Partial(loc, loc, loop=True)

    def and_not_stopped(self, cond_fn, stop: list[Value], loc: Loc) -> Value:
        """not (break or return) and cond, with cond evaluated only where it is needed:
        a lane that broke out must not evaluate (and maybe trap in) the condition."""
        stopped = functools.reduce(lambda x, y: self.emit("bitor", [x, y], BOOL, loc), stop)
        go = self.emit("not", [stopped], BOOL, loc)
        return self.if_value(go, cond_fn, lambda: self.const(False, loc), loc)
