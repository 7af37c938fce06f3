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
import functools
from dataclasses import dataclass, field

from .. import trees
from ..errors import CompileError, Loc
from ..ir.core import Function, Op, Region, Value
from ..types import BOOL, Type, finalize
from .binding import parameter_names
from .arraycalls import MoreArrayMixin
from .fancy import FancyIndexMixin
from .arrayops import SHAPE_VALUES, ArrayMixin
from .calls import CallMixin
from .containers import ContainerMixin, Struct
from .common import Meta, Partial, always_returns, contains, has_return
from .compare import CompareMixin
from .exprs import ExprMixin
from .idioms import IdiomMixin
from .indexing import IndexMixin
from .joins import JoinMixin
from .loops import LoopMixin
from .scalars import ScalarRulesMixin
from .source import ParsedFunction
from .subset import STATEMENTS
from .unroll import UnrollMixin


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


class Builder(LoopMixin, UnrollMixin, CallMixin, ArrayMixin, MoreArrayMixin, FancyIndexMixin,
              ScalarRulesMixin, ContainerMixin, IdiomMixin, CompareMixin, IndexMixin, JoinMixin,
              ExprMixin):
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
        #: NumPy's read-only views (np.diag of a matrix) and views of them: a store into
        #: one is a CompileError, where NumPy raises (arraycalls.py)
        self.readonly_ids: set[int] = set()
        #: counters of loops not unrolled -> ``LoopCounter`` (shapes may depend on them)
        self.loop_counters: dict[int, object] = {}
        self.const_ops: dict[int, Op] = {}  # const values -> their ops (exprs.py)
        self.call_stack: list[object] = []
        self.frame: Frame | None = None
        self.counter = 0
        self.param_names_by_id: dict[int, str] = {}
        #: Python int parameters -> {type they meet: where}, checked at the call
        self.python_int_params: dict[str, dict[str, Loc]] = {}
        #: a container argument's leaf parameters -> its parameter, and -> their paths
        self.param_owners: dict[str, str] = {}
        self.param_paths: dict[str, str] = {}
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
        # A container argument is passed as its leaves (params "p_0", "p_W1", ...) and
        # seen by the body as a container; ``hydra.arguments`` flattens the caller's the
        # same way.
        params: list[Value] = []
        param_names: list[str] = []
        env = {name: self.param_tree(name, t, loc, params, param_names)
               for name, t in zip(names, param_types)}
        self.param_names_by_id = {p.id: n for p, n in zip(params, param_names)}
        for name, value in (SHAPE_VALUES.get() or {}).items():
            # a uniform int the shapes of per-lane arrays depend on: a constant here (a
            # container's int leaves are made constants by param_tree)
            if name in env:
                env[name] = self.const(value, loc, env[name].type)
        leaves, tree = self.translate_function(self.root, env, loc, self.root.pyfunc)
        self.region.ops.append(Op("yield", leaves, [], loc))
        self.region.ops[:0] = self.entry_ops
        fn = Function(self.root.name, params, param_names, self.region, loc)
        fn.notes.update(result_tree=tree, python_int_params=self.python_int_params,
                        param_owners=self.param_owners, param_paths=self.param_paths,
                        kernel_return_ids=self.kernel_return_ids)
        _finalize_types(fn)
        return fn

    def translate_function(self, parsed: ParsedFunction, env: dict, loc: Loc, key,
                           partial: dict | None = None) -> tuple[list[Value], object]:
        """Translate a function's body (a lambda's: its ``return``) into the current
        region, with ``key`` on the call stack (recursion); return the leaves of its
        result and the ``trees.TreeDef`` that rebuilds it."""
        node = parsed.node
        body = [ast.Return(node.body, lineno=node.body.lineno, col_offset=node.body.col_offset)] \
            if isinstance(node, ast.Lambda) else node.body
        saved = self.frame
        self.call_stack.append(key)
        frame = Frame(parsed, env, prefix="" if saved is None else "@" + self.fresh(),
                      partial=dict(partial or {}))
        frame.has_return = has_return(body)
        self.frame = frame
        try:
            if frame.has_return:
                env[frame.ret] = self.const(False, loc)
            self.stmts(body)
            if not frame.has_return or frame.retval not in frame.env:
                return [], trees.NONE
            value = frame.env[frame.retval]
            if value is not None and not always_returns(body):
                raise CompileError(
                    f"{parsed.name} returns a value on some paths and falls off its end "
                    f"(returning None) on others", loc,
                    hint="add a return statement at the end of the function")
            return self.flatten(value, frame.retval, loc)
        finally:
            self.frame = saved
            self.call_stack.pop()

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
        stop = functools.reduce(lambda x, y: self.emit("bitor", [x, y], BOOL, loc), live)
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
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, Struct) and value.kind in ("list", "namedtuple"):
                value = value.items
            if not isinstance(value, tuple):
                raise CompileError(f"cannot unpack {self.describe(value)}", loc)
            if len(value) != len(target.elts):
                raise CompileError(f"cannot unpack a tuple of {len(value)} into "
                                   f"{len(target.elts)} names", loc)
            for t, v in zip(target.elts, value):
                self.store_target(t, v)
        elif isinstance(target, ast.Attribute):
            self.read_only_target(target, loc)
            raise CompileError("this assignment target is not supported", loc)
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
        if value is not None and not isinstance(value, (Value, tuple, Struct)):
            raise CompileError(f"cannot return {self.describe(value)}", loc)
        previous = frame.env.get(frame.retval, "absent")
        if previous != "absent" and frame.retval not in frame.partial \
                and (previous is None) != (value is None):
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
    for op in fn.walk():
        for v in [*op.results, *(a for region in op.regions for a in region.args)]:
            v.type = finalize(v.type)
    for p in fn.params:
        p.type = finalize(p.type)


