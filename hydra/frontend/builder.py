"""Python AST -> typed structured SSA (the ``ssa`` stage).

Takes a ``ParsedFunction`` that passed ``check_subset`` and the types of the
call's arguments; gives a ``Function`` in structured SSA with every value typed
(NumPy 2 promotion, weak Python scalars) and no uniformity marks yet.

SSA is built directly from the AST, in the spirit of Braun et al. 2013 ("Simple
and Efficient Construction of SSA Form"): the builder keeps, per frame, the
current value of every variable; an ``if`` translates both arms from copies of
that map and its results are the variables that differ (the phis); a loop
carries the variables its body assigns, and its types are found by a fixpoint
(translate, widen the carried types to what the body yields, translate again).
Because the source is structured, no dominance frontiers are needed.

``break``, ``continue`` and ``return`` become flag variables (``$brk``,
``$cont``, ``$ret`` and the return value ``$retval``) that the rest of the
enclosing body tests and the loop condition includes.  After the uniformity
pass, a flag set under a varying condition is varying, and linearization turns
it into exactly the per-lane mask update the SPEC asks for.  Calls to other
Python functions are inlined; recursion is a ``CompileError``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import numpy as np

from ..errors import CompileError, Loc
from ..ir.core import Function, Op, Region, Value
from ..types import BOOL, ArrayType, ScalarType, TupleType, Type, finalize, join
from .binding import parameter_names
from .arrayops import SHAPE_VALUES, SHAPED, ArrayMixin, NeedShapes
from .calls import CallMixin
from .common import Meta, Partial, always_returns, contains, has_return
from .exprs import ExprMixin
from .loops import LoopMixin
from .scalars import ScalarRulesMixin
from .source import ParsedFunction, parse_function
from .subset import STATEMENTS, check_subset
from .unroll import UnrollMixin, build_unrolling


@dataclass(slots=True)
class Frame:
    """One function being translated (the kernel, or a function inlined into it)."""

    parsed: ParsedFunction
    env: dict[str, object]
    prefix: str
    loops: list[tuple[str, str]] = field(default_factory=list)  # (brk, cont) names
    partial: dict[str, Partial] = field(default_factory=dict)
    has_return: bool = False
    bound_at: dict[str, Loc] = field(default_factory=dict)  # each name's latest assignment

    @property
    def ret(self) -> str:
        return f"$ret{self.prefix}"

    @property
    def retval(self) -> str:
        return f"$retval{self.prefix}"


class Builder(LoopMixin, UnrollMixin, CallMixin, ArrayMixin, ScalarRulesMixin, ExprMixin):
    """Translates one kernel (and the functions it calls) into a ``Function``."""

    def __init__(self, parsed: ParsedFunction) -> None:
        self.root = parsed
        self.region = Region()
        self.entry_ops: list[Op] = []
        self.globals_cache: dict[int, Value] = {}
        #: arrays bound by reference (arguments, captured arrays): never joined by value
        self.array_refs: set[int] = set()
        #: per-lane arrays whose size is not a constant -> where they were made
        self.unknown_shapes: dict[int, tuple[Loc, list[str]]] = {}
        #: counters of loops not unrolled -> ``LoopCounter`` (shapes may depend on them)
        self.loop_counters: dict[int, object] = {}
        self.const_ops: dict[int, Op] = {}  # const values -> their ops (exprs.py)
        self.call_stack: list[object] = []
        self.frame: Frame | None = None
        self.counter = 0
        self.param_names_by_id: dict[int, str] = {}
        #: Python int parameters -> {type they meet: where}, checked at the call
        self.python_int_params: dict[str, dict[str, Loc]] = {}
        #: ids of the if/while results that carry the kernel's return value: a lane
        #: whose value they hold has returned and runs nothing more (views.py)
        self.kernel_return_ids: set[int] = set()

    # --- emitting ---------------------------------------------------------------------

    def emit_op(self, opcode: str, operands: list[Value], result_types: list[Type], loc: Loc,
                attrs: dict | None = None, regions: list[Region] | None = None,
                names: list[str] | None = None) -> Op:
        results = [Value(t, loc, (names[i] if names else "")) for i, t in enumerate(result_types)]
        op = Op(opcode, list(operands), results, loc, attrs or {}, regions or [])
        self.region.ops.append(op)
        return op

    def emit(self, opcode: str, operands: list[Value], result_type: Type, loc: Loc,
             attrs: dict | None = None, name: str = "") -> Value:
        return self.emit_op(opcode, operands, [result_type], loc, attrs,
                            names=[name] if name else None).result

    def fresh(self) -> str:
        self.counter += 1
        return str(self.counter)

    # --- entry ------------------------------------------------------------------------

    def build(self, param_types: list[Type]) -> Function:
        node = self.root.node
        names = parameter_names(node)
        loc = self.root.loc(node)
        # A tuple argument is passed as its leaves (params "p_0", "p_1", ...) and seen
        # by the body as a tuple; ``hydra.api`` flattens the caller's tuples the same way.
        params: list[Value] = []
        param_names: list[str] = []
        env = {name: self.param_tree(name, t, loc, params, param_names)
               for name, t in zip(names, param_types)}
        self.param_names_by_id = {p.id: n for p, n in zip(params, param_names)}
        for name, value in (SHAPE_VALUES.get() or {}).items():
            # a uniform int the shapes of per-lane arrays depend on: a constant here
            env[name] = self.const(value, loc, env[name].type)
        self.call_stack.append(self.root.pyfunc)
        body = [ast.Return(node.body, lineno=node.body.lineno, col_offset=node.body.col_offset)] \
            if isinstance(node, ast.Lambda) else node.body
        leaves, tree = self.translate_function(self.root, env, body, loc)
        self.region.ops.append(Op("yield", leaves, [], loc))
        self.region.ops[:0] = self.entry_ops
        fn = Function(self.root.name, params, param_names, self.region, loc)
        fn.notes["result_tree"] = tree
        fn.notes["python_int_params"] = self.python_int_params
        fn.notes["kernel_return_ids"] = self.kernel_return_ids
        _finalize_types(fn)
        return fn

    def param_tree(self, name: str, t: Type, loc: Loc, params: list, names: list):
        if isinstance(t, TupleType):
            return tuple(self.param_tree(f"{name}_{i}", e, loc, params, names)
                         for i, e in enumerate(t.elems))
        v = Value(t, loc, name)
        params.append(v)
        names.append(name)
        return v

    def translate_function(self, parsed: ParsedFunction, env: dict, body: list[ast.stmt],
                           loc: Loc) -> tuple[list[Value], object]:
        """Translate a function body into the current region; return the leaves of its
        result and the tree (structure) that rebuilds it: None, 'leaf', or a tuple."""
        saved = self.frame
        frame = Frame(parsed, env, prefix="" if saved is None else "@" + self.fresh())
        frame.has_return = has_return(body)
        self.frame = frame
        try:
            if frame.has_return:
                env[frame.ret] = self.const(False, loc)
            self.stmts(body)
            if not frame.has_return:
                return [], None
            if frame.retval not in frame.env:
                return [], None
            value = frame.env[frame.retval]
            if value is not None and not always_returns(body):
                raise CompileError(
                    f"{parsed.name} returns a value on some paths and falls off its end "
                    f"(returning None) on others", loc,
                    hint="add a return statement at the end of the function")
            leaves, tree = self.flatten(value, frame.retval, loc)
            return leaves, tree
        finally:
            self.frame = saved

    # --- variables --------------------------------------------------------------------

    def lookup(self, name: str, loc: Loc):
        frame = self.frame
        if name in frame.env:
            if name in frame.partial:
                p = frame.partial[name]
                if p.loop:
                    raise CompileError(
                        f"'{name}' may be unbound here: it is assigned only inside the loop "
                        f"at line {p.missing_at.line}, which may run zero times (Python "
                        f"raises UnboundLocalError there)", loc,
                        hint=f"give '{name}' a value before the loop at line "
                             f"{p.missing_at.line}")
                raise CompileError(
                    f"variable '{name}' is defined on only some paths to this use: it is "
                    f"assigned at line {p.defined_at.line} but not on the path through "
                    f"line {p.missing_at.line}", loc,
                    hint=f"give '{name}' a value before line {p.missing_at.line}")
            return frame.env[name]
        try:
            obj = frame.parsed.resolve_free(name)
        except KeyError:
            raise CompileError(f"name '{name}' is not defined", loc) from None
        return self.from_python(obj, name, loc)

    def assign(self, name: str, value, loc: Loc) -> None:
        if isinstance(value, Value) and not value.name and not name.startswith("$"):
            value.name = name
        self.frame.env[name] = value
        self.frame.partial.pop(name, None)
        self.frame.bound_at[name] = loc

    def flatten(self, value, name: str, loc: Loc) -> tuple[list[Value], object]:
        """Leaves of a (possibly nested) tuple value and its shape."""
        if isinstance(value, tuple):
            leaves, trees = [], []
            for v in value:
                lv, t = self.flatten(v, name, loc)
                leaves += lv
                trees.append(t)
            return leaves, tuple(trees)
        if isinstance(value, Value):
            return [value], "leaf"
        if value is None:
            return [], None
        raise CompileError(f"'{name.lstrip('$')}' holds {self.describe(value)}, which cannot "
                           f"be returned or carried between paths", loc)

    @staticmethod
    def unflatten(leaves: list[Value], tree):
        it = iter(leaves)

        def build(t):
            if t == "leaf":
                return next(it)
            if t is None:
                return None
            return tuple(build(s) for s in t)
        return build(tree)

    # --- joins --------------------------------------------------------------------------

    def shape_of(self, name: str, value, loc: Loc):
        """The join key of a value: a tree of types, or the value itself for arrays and
        compile-time objects (which must then be the same on every path)."""
        if isinstance(value, tuple):
            return tuple(self.shape_of(name, v, loc) for v in value)
        if isinstance(value, Value):
            if isinstance(value.type, ArrayType) and not self.is_array_ref(value):
                return value.type  # a per-lane array value: joined by a select
            return value if isinstance(value.type, ArrayType) else value.type
        return value

    def join_shapes(self, name: str, a, b, loc_a: Loc, loc_b: Loc):
        if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
            return tuple(self.join_shapes(name, x, y, loc_a, loc_b) for x, y in zip(a, b))
        if isinstance(a, Type) != isinstance(b, Type):
            # an argument array on one path, a per-lane array value on another (h = x
            # before a loop that computes h): both join as values
            a, b = (s.type if isinstance(s, Value) and isinstance(s.type, ArrayType)
                    and s.type.shape is not None else s for s in (a, b))
        if isinstance(a, Type) and isinstance(b, Type):
            t = join(a, b)
            if t is not None:
                return t
        elif a is b or a == b:
            return a
        if name == "$expr":  # the two values of ``a and b``, ``a or b``, ``a if c else b``
            raise CompileError(
                f"this expression gives {self.describe_shape(a)} or {self.describe_shape(b)}, "
                f"depending on which operand it yields; hydra needs one type", loc_b,
                hint="give both values one type, e.g. bool(a) and bool(b)")
        shown = name.lstrip("$") if not name.startswith("$retval") else "the return value"
        if not SHAPED.get() and any(isinstance(s, ArrayType) or isinstance(s, Value) and
                                    isinstance(s.type, ArrayType) for s in (a, b)):
            # maybe per-lane array values whose shapes are not known yet: try with shapes
            raise NeedShapes(f"'{shown}' needs array shapes", loc_b)
        if all(isinstance(s, Value) and isinstance(s.type, ArrayType) for s in (a, b)):
            rebound = max(loc_a, loc_b, key=lambda at: at.line)  # the later binding
            raise CompileError(
                f"'{shown}' is {self.describe_shape(a)} on one path and "
                f"{self.describe_shape(b)} on another: a name must refer to one array, "
                f"because hydra binds array names to arrays when it compiles (swapping "
                f"arrays, as in 'h, hn = hn, h' in a loop, is not supported yet)", rebound,
                hint="keep both buffers in one array with a leading axis of 2 and pick the "
                     "current one by the step's parity: buf[i % 2, j] and "
                     "buf[(i + 1) % 2, j]")
        raise CompileError(
            f"'{shown}' is {self.describe_shape(a)} on one path (line {loc_a.line}) and "
            f"{self.describe_shape(b)} on another (line {loc_b.line})", loc_b,
            hint="give the variable one type on every path")

    def describe_shape(self, s) -> str:
        if isinstance(s, tuple):
            return f"a tuple of {len(s)}"
        if isinstance(s, ScalarType):
            name = s.strong().name
            return f"an {name}" if name[0] in "aeiou" else f"a {name}"
        if isinstance(s, Value):
            return f"the array {s.name or '?'}" if isinstance(s.type, ArrayType) else str(s.type)
        if isinstance(s, ArrayType):
            return f"an {s}"
        return self.describe(s)

    def leaves_as(self, value, shape, loc: Loc) -> list[Value]:
        """The leaves of ``value`` converted to the join ``shape`` (emitting casts)."""
        if isinstance(shape, tuple):
            out = []
            for v, s in zip(value, shape):
                out += self.leaves_as(v, s, loc)
            return out
        if isinstance(shape, Type):
            return [self.coerce(value, shape, loc)]
        return []  # an array or compile-time object: the same on every path, no phi

    def rebuild(self, shape, results):
        """Inverse of leaves_as: the joined value from the op's results."""
        if isinstance(shape, tuple):
            return tuple(self.rebuild(s, results) for s in shape)
        if isinstance(shape, Type):
            return next(results)
        return shape

    def joined(self, name: str, shape, results):
        """Variable ``name``'s value after an if or while: rebuilt from the op's
        results, named after it (temporaries, ``$...``, stay unnamed)."""
        value = self.rebuild(shape, results)
        if isinstance(value, Value) and not name.startswith("$"):
            value.name = name
        if name == "$retval":  # the kernel's own, not an inlined helper's ($retval@k)
            self.kernel_return_ids.update(v.id for v in _leaves(value, shape))
        return value

    def binding_loc(self, name: str, value, default: Loc) -> Loc:
        """Where ``name`` got ``value``: the assignment that bound an array name (an
        array argument's value was made at the ``def`` line, not where ``a, b = b, a``
        rebinds it), else where the value was computed."""
        if isinstance(value, Value) and isinstance(value.type, ArrayType) \
                and name in self.frame.bound_at:
            return self.frame.bound_at[name]
        return self.value_loc(value, default)

    def value_loc(self, value, default: Loc) -> Loc:
        if isinstance(value, Value):
            return value.loc
        if isinstance(value, tuple) and value:
            return self.value_loc(value[0], default)
        return default

    # --- structured if ------------------------------------------------------------------

    def build_if(self, cond: Value, then_fn, else_fn, loc: Loc) -> None:
        """Emit an ``if`` whose arms run ``then_fn``/``else_fn`` against copies of the
        frame's variables, then join the variables that differ (the phis). A condition
        known when the kernel compiles runs only the arm it picks, in place."""
        truth = self.static_truth(cond)
        if truth is not None:
            (then_fn if truth else else_fn)()
            return
        frame = self.frame
        before = dict(frame.env)
        before_partial = dict(frame.partial)
        bound_before = dict(frame.bound_at)
        arms, bound = [], {}
        for fn in (then_fn, else_fn):
            region = Region()
            outer, self.region = self.region, region
            frame.env = dict(before)
            frame.partial = dict(before_partial)
            frame.bound_at = dict(bound_before)
            fn()
            arms.append((region, frame.env, frame.partial))
            bound.update(frame.bound_at)
            self.region = outer
        frame.bound_at = bound
        (r_then, env_then, p_then), (r_else, env_else, p_else) = arms
        joined_env, joined_partial = dict(before), {}
        names = [n for n in dict.fromkeys([*env_then, *env_else])]
        phis = []  # (name, shape)
        for name in names:
            a, b = env_then.get(name), env_else.get(name)
            if a is b and name in env_then:
                joined_env[name] = a
                if name in p_then or name in p_else:
                    joined_partial[name] = p_then.get(name) or p_else.get(name)
                continue
            if name not in env_then or name not in env_else:
                present = a if name in env_then else b
                joined_env[name] = present
                if not name.startswith("$"):
                    joined_partial[name] = Partial(self.value_loc(present, loc), loc)
                if not isinstance(present, (Value, tuple)):
                    continue
                shape = self.shape_of(name, present, loc)
                phis.append((name, shape, name in env_then, name in env_else))
                continue
            shape = self.join_shapes(name, self.shape_of(name, a, loc), self.shape_of(name, b, loc),
                                     self.binding_loc(name, a, loc), self.binding_loc(name, b, loc))
            if name in p_then or name in p_else:
                joined_partial[name] = p_then.get(name) or p_else.get(name)
            phis.append((name, shape, True, True))
        yields = [[], []]
        for side, (region, env) in enumerate(((r_then, env_then), (r_else, env_else))):
            outer, self.region = self.region, region
            for name, shape, in_then, in_else in phis:
                present = (in_then, in_else)[side]
                value = env[name] if present else None
                yields[side] += (self.leaves_as(value, shape, loc) if present
                                 else self.undef_leaves(shape, loc))
            region.ops.append(Op("yield", yields[side], [], loc))
            self.region = outer
        types = [v.type for v in yields[0]]
        op = self.emit_op("if", [cond], types, loc, regions=[r_then, r_else])
        results = iter(op.results)
        for name, shape, _, _ in phis:
            joined_env[name] = self.joined(name, shape, results)
        frame.env = joined_env
        frame.partial = joined_partial

    def undef_leaves(self, shape, loc: Loc) -> list[Value]:
        if isinstance(shape, tuple):
            return [v for s in shape for v in self.undef_leaves(s, loc)]
        if isinstance(shape, Type):
            return [self.emit("undef", [], shape, loc)]
        return []

    # --- statements -------------------------------------------------------------------

    def stmts(self, body: list[ast.stmt]) -> None:
        for i, stmt in enumerate(body):
            self.stmt(stmt)
            if isinstance(stmt, (ast.Return, ast.Break, ast.Continue)):
                return  # the rest is unreachable
            rest = body[i + 1:]
            if rest and self.may_exit(stmt):
                guard = self.still_running(self.frame.parsed.loc(rest[0]))
                if guard is not None:
                    self.build_if(guard, lambda: self.stmts(rest), lambda: None,
                                  self.frame.parsed.loc(rest[0]))
                    return

    def may_exit(self, stmt: ast.stmt) -> bool:
        if contains([stmt], ast.Return, into_loops=True):
            return True
        if self.frame.loops:
            return contains([stmt], (ast.Break, ast.Continue), into_loops=False)
        return False

    def still_running(self, loc: Loc) -> Value | None:
        """not ($ret or $brk or $cont): the lanes that go on with the next statement."""
        frame = self.frame
        flags = [frame.ret] if frame.has_return else []
        if frame.loops:
            flags += [f for f in frame.loops[-1] if f]
        live = [frame.env[f] for f in flags if f in frame.env]
        if not live:
            return None
        if any(self.static_truth(f) for f in live):  # a return/break every lane took
            return self.const(False, loc)
        stop = live[0]
        for f in live[1:]:
            stop = self.emit("bitor", [stop, f], BOOL, loc)
        return self.logical_not(stop, loc)

    def stmt(self, node: ast.stmt) -> None:
        handler = STATEMENTS.get(type(node))
        if handler is None:  # check_subset makes this unreachable for user code
            raise CompileError(f"{type(node).__name__} is not supported", self.loc(node))
        getattr(self, handler)(node)

    def loc(self, node: ast.AST) -> Loc:
        return self.frame.parsed.loc(node)

    def stmt_pass(self, node: ast.Pass) -> None:
        pass

    def stmt_expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring or a bare string: no effect
        self.expr(node.value)

    def stmt_assign(self, node: ast.Assign) -> None:
        value = self.expr(node.value)
        for target in node.targets:
            self.store_target(target, value)

    def stmt_annassign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            return
        value = self.expr(node.value)
        wanted = self.annotation_type(node.annotation)
        if wanted is not None and isinstance(value, Value):
            value = self.coerce(value, wanted, self.loc(node))
        self.store_target(node.target, value)

    def stmt_augassign(self, node: ast.AugAssign) -> None:
        loc = self.loc(node)
        if isinstance(node.target, ast.Name):
            current = self.lookup(node.target.id, loc)
            value = self.binop(node.op, current, self.expr(node.value), loc)
            if not self.array_update(current, value, loc):
                self.assign(node.target.id, value, loc)
        elif isinstance(node.target, ast.Subscript):
            array, indices = self.subscript_parts(node.target)
            current = self.load(array, indices, loc)
            value = self.binop(node.op, current, self.expr(node.value), loc)
            self.store(array, indices, value, loc)
        else:
            raise CompileError("this augmented assignment target is not supported", loc)

    def store_target(self, target: ast.expr, value) -> None:
        loc = self.loc(target)
        if isinstance(target, ast.Name):
            self.assign(target.id, value, loc)
        elif isinstance(target, ast.Tuple):
            if not isinstance(value, tuple):
                raise CompileError(f"cannot unpack {self.describe(value)}", loc)
            if len(value) != len(target.elts):
                raise CompileError(f"cannot unpack a tuple of {len(value)} into "
                                   f"{len(target.elts)} names", loc)
            for t, v in zip(target.elts, value):
                self.store_target(t, v)
        elif isinstance(target, ast.Subscript):
            array, indices = self.subscript_parts(target)
            self.store(array, indices, value, loc)
        else:
            raise CompileError("this assignment target is not supported", loc)

    def stmt_if(self, node: ast.If) -> None:
        cond = self.condition(node.test)
        self.build_if(cond, lambda: self.stmts(node.body), lambda: self.stmts(node.orelse),
                      self.loc(node))

    def stmt_assert(self, node: ast.Assert) -> None:
        loc = self.loc(node)
        cond = self.condition(node.test)
        if node.msg is not None:
            if not (isinstance(node.msg, ast.Constant) and isinstance(node.msg.value, str)):
                raise CompileError("an assert message must be a string literal", self.loc(node.msg))
            message = node.msg.value
        else:
            message = "assertion failed: " + ast.unparse(node.test)
        self.emit_op("check", [cond], [], loc, {"kind": "assert", "message": message})

    def stmt_return(self, node: ast.Return) -> None:
        loc = self.loc(node)
        frame = self.frame
        value = self.expr(node.value) if node.value is not None else None
        if isinstance(value, Meta) and value.obj is None:
            value = None
        if value is not None and not isinstance(value, (Value, tuple)):
            raise CompileError(f"cannot return {self.describe(value)}", loc)
        previous = frame.env.get(frame.retval, "absent")
        if previous != "absent" and frame.retval not in frame.partial:
            if (previous is None) != (value is None):
                raise CompileError(f"{frame.parsed.name} returns None on one path and a value "
                                   f"on another", loc)
        frame.env[frame.retval] = value
        frame.partial.pop(frame.retval, None)
        frame.env[frame.ret] = self.const(True, loc)

    def stmt_break(self, node: ast.Break) -> None:
        self.frame.env[self.frame.loops[-1][0]] = self.const(True, self.loc(node))

    def stmt_continue(self, node: ast.Continue) -> None:
        self.frame.env[self.frame.loops[-1][1]] = self.const(True, self.loc(node))

def _finalize_types(fn: Function) -> None:
    """Weak types left over become their Python defaults (int64, float64)."""
    def fix(v: Value) -> None:
        v.type = finalize(v.type)
    for p in fn.params:
        fix(p)
    for op in fn.walk():
        for r in op.results:
            fix(r)
        for region in op.regions:
            for a in region.args:
                fix(a)


def build_function(pyfunc, param_types: list[Type]) -> Function:
    """The ``ssa`` stage of ``pyfunc`` for arguments of ``param_types`` (of a
    ``hydra.grad`` function: its gradient's, ``GradFunction.build``)."""
    grad = getattr(pyfunc, "__hydra_grad__", None)
    if grad is not None:
        return grad.build(param_types)
    parsed = parse_function(pyfunc)
    check_subset(parsed)
    return build_unrolling(lambda: Builder(parsed).build(param_types))


def build_specialized(pyfunc, param_types: list[Type], known: dict | None = None,
                      varying=(), shaped: bool = False, pinned: dict | None = None
                      ) -> tuple[Function, bool, dict]:
    """The ``ssa`` stage as a call compiles it (SPEC section 8): without array shapes
    (``shaped`` False: array types unshaped) until whole-array code needs them, then
    with the shapes of arguments and captured arrays and, as constants, the values
    (``known``, by name) of the uniform ints that shapes depend on.  Returns the
    function, ``shaped`` and those ints (``pinned``); building again with them gives
    the same function.  A shape that stays unknown is a plain ``CompileError`` at the
    user's line (``NeedShapes`` is this loop's signal, never the user's error)."""
    known, pinned = known or {}, dict(pinned or {})
    while True:
        s_token, v_token = SHAPED.set(shaped), SHAPE_VALUES.set(pinned)
        try:
            types = param_types if shaped else [
                t.unshaped() if isinstance(t, ArrayType) else t for t in param_types]
            return build_function(pyfunc, list(types)), shaped, pinned
        except NeedShapes as e:
            new = {p: known[p] for p in e.params if p not in pinned and p not in varying
                   and isinstance(known.get(p), (int, np.integer))}
            if shaped and not new:
                raise e.plain() from None
            shaped, pinned = True, {**pinned, **new}
        finally:
            SHAPED.reset(s_token)
            SHAPE_VALUES.reset(v_token)


def _leaves(value, shape) -> list[Value]:
    """The op results ``rebuild`` took for ``value`` of join ``shape``."""
    if isinstance(shape, tuple):
        return [v for item, s in zip(value, shape) for v in _leaves(item, s)]
    return [value] if isinstance(shape, Type) else []
