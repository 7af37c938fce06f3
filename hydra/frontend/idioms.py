"""Python idioms a per-example function is written with, for the builder.

- builtins: ``enumerate`` and ``zip`` of tuples and containers (for unrolled loops),
  ``sum`` of a tuple or of a generator (``sum(w[i] * x[i] for i in range(n))``: a loop,
  unrolled where its bounds are constants), ``divmod``, ``pow`` and ``round(x, n)``;
- ``x in (1, 2, 3)`` (an ``or`` of ``==``), ``"W" in p`` for a dict, ``p is None`` and
  ``is not None`` (decided when the kernel compiles: ``None`` is static), ``==`` of
  static strings;
- nested ``def`` and ``lambda`` inside a kernel, inlined where they are called; they
  read the enclosing function's variables as they are at the call (Python's late
  binding), and what they assign is their own (``nonlocal`` is refused by the subset);
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass


from ..errors import CompileError, CompileTypeError, Loc
from ..ir.core import Value
from ..types import BOOL, INT64, ScalarType
from .common import Meta
from .containers import Struct, is_node, items_of
from .source import ParsedFunction
from .unroll import MAX_TRIPS


@dataclass(eq=False, slots=True)
class LocalFunction:
    """A ``def`` or ``lambda`` inside a kernel: its node, the function it is written in,
    the frame whose variables it reads and its defaults (evaluated at the ``def``)."""

    node: ast.FunctionDef | ast.Lambda
    parsed: ParsedFunction
    frame: object
    defaults: dict

    @property
    def __name__(self) -> str:
        return getattr(self.node, "name", "<lambda>")


def _sequence(v, what: str, loc: Loc) -> tuple:
    if isinstance(v, tuple) or isinstance(v, Struct) and v.kind in ("list", "namedtuple"):
        return items_of(v)
    if isinstance(v, Struct) and v.kind == "dict":
        return tuple(Meta(k) for k in v.names)
    raise CompileError(f"{what} takes tuples, lists or dicts in a kernel (it is unrolled), "
                       f"not this value", loc,
                       hint="for a loop over numbers use for i in range(n)")


class IdiomMixin:
    """Python idioms; mixed into ``Builder``."""

    # --- builtins ----------------------------------------------------------------------

    def call_idiom(self, fn, args, kwargs, loc: Loc):
        """``enumerate``, ``zip``, ``sum``, ``divmod``, ``pow``."""
        name = fn.__name__
        if name == "enumerate":
            start = kwargs.pop("start", args[1] if len(args) > 1 else self.const(0, loc))
            first = self.constant_value(start)
            if kwargs or not args or not isinstance(first, int):
                raise CompileError("enumerate() takes a tuple and a constant start", loc)
            items = _sequence(args[0], "enumerate()", loc)
            return tuple((self.const(first + k, loc), x) for k, x in enumerate(items))
        if name == "zip":
            if kwargs:
                raise CompileError("zip() keyword arguments are not supported", loc)
            seqs = [_sequence(a, "zip()", loc) for a in args]
            return tuple(zip(*seqs))
        if name == "sum":
            start = kwargs.pop("start", args[1] if len(args) > 1 else self.const(0, loc))
            if kwargs or len(args) not in (1, 2):
                raise CompileError("sum() takes an iterable and a start value", loc)
            acc = start
            for x in _sequence(args[0], "sum()", loc):
                acc = self.binop(ast.Add(), acc, x, loc)
            return acc
        if kwargs:
            raise CompileError(f"{name}() keyword arguments are not supported", loc)
        if name == "divmod" and len(args) == 2:
            return (self.arith("floordiv", args[0], args[1], loc),
                    self.arith("mod", args[0], args[1], loc))
        if name == "pow" and len(args) == 2:
            return self.arith("pow", args[0], args[1], loc)
        if name == "pow":
            raise CompileError("pow() with a modulus is not supported", loc,
                               hint="write pow(x, y) % m (it wraps at 64 bits, as NumPy does)")
        raise CompileError(f"{name}() takes two numbers", loc)

    def round_digits(self, x, ndigits, loc: Loc) -> Value:
        """``round(x, n)`` of a float as NumPy rounds its scalars: ``rint(x * 10**n) /
        10**n`` (``rint(x / 10**-n) * 10**-n`` for a negative n)."""
        n = self.constant_value(ndigits)
        if not isinstance(n, int) or not isinstance(x, Value) \
                or not isinstance(x.type, ScalarType):
            raise CompileError("round(x, n) takes a number and an integer constant", loc)
        if x.type.kind != "f":
            return x  # round of an int with digits: the int (n >= 0), as NumPy
        scale = self.const(10.0 ** abs(n), loc, x.type)
        if n >= 0:
            y = self.emit("math", [self.arith("mul", x, scale, loc)], x.type, loc, {"fn": "rint"})
            return self.arith("truediv", y, scale, loc)
        y = self.emit("math", [self.arith("truediv", x, scale, loc)], x.type, loc, {"fn": "rint"})
        return self.arith("mul", y, scale, loc)

    def sum_generator(self, gen: ast.GeneratorExp, start, loc: Loc):
        """``sum(e for t in it)``: over a container or a range of constants, unrolled;
        over another range, a loop that adds up (``t`` stays the generator's own)."""
        if len(gen.generators) != 1 or gen.generators[0].ifs or gen.generators[0].is_async:
            raise CompileError("sum() of a generator takes one 'for' with no 'if'", loc,
                               hint="write the loop: s = 0.0; for ...: s += ...")
        comp = gen.generators[0]
        frame = self.frame
        saved = {n: (frame.env.get(n, _ABSENT), frame.partial.get(n))
                 for n in _names(comp.target)}
        acc = f"$sum{frame.prefix}.{self.fresh()}"
        frame.env[acc] = start

        def at(x):
            return ast.copy_location(x, gen)
        add = at(ast.Assign([at(ast.Name(acc, ast.Store()))], at(ast.BinOp(
            at(ast.Name(acc, ast.Load())), ast.Add(), gen.elt))))
        loop = at(ast.For(comp.target, comp.iter, [add], []))
        if self.constant_range(comp.iter) is not None:
            for k in self.constant_range(comp.iter):
                self.store_target(comp.target, self.const(k, loc))
                self.stmt(add)
        else:
            self.stmt(loop)
        result = frame.env.pop(acc)
        frame.partial.pop(acc, None)
        for n, (value, partial) in saved.items():
            if value is _ABSENT:
                frame.env.pop(n, None)
            else:
                frame.env[n] = value
            frame.partial.pop(n, None)
            if partial is not None:
                frame.partial[n] = partial
        return result

    def constant_range(self, it: ast.expr) -> range | None:
        """``range(...)`` of constants with at most ``MAX_TRIPS`` trips, else None."""
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                and it.func.id == "range" and not it.keywords and 1 <= len(it.args) <= 3):
            return None
        bounds = [self.constant_value(self.expr(a)) for a in it.args]
        if not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds) \
                or bounds[2:] == [0]:
            return None
        r = range(*bounds)
        return r if len(r) <= MAX_TRIPS else None

    def expr_genexp(self, node: ast.GeneratorExp):
        raise CompileError("generator expressions are only supported as the argument of "
                           "sum()", self.loc(node),
                           hint="write a for loop, or sum(... for i in range(n))")

    # --- comparisons -------------------------------------------------------------------

    def compare_special(self, op: ast.cmpop, left, right, loc: Loc):
        """``is``, ``is not``, ``in``, ``not in``, and ``==``/``!=`` of static values;
        None where ``op`` is an ordinary comparison of numbers."""
        if isinstance(op, (ast.Is, ast.IsNot)):
            nones = [v is None or isinstance(v, Meta) and v.obj is None for v in (left, right)]
            if not any(nones) and not (isinstance(left, Meta) and isinstance(right, Meta)):
                raise CompileError("'is' compares objects; in a kernel it only tests for "
                                   "None (x is None)", loc, hint="compare numbers with ==")
            same = all(nones) if any(nones) else left.obj is right.obj
            return self.const(same if isinstance(op, ast.Is) else not same, loc)
        if isinstance(op, (ast.In, ast.NotIn)):
            found = self.contains(left, right, loc)
            return found if isinstance(op, ast.In) else self.logical_not(found, loc)
        if isinstance(op, (ast.Eq, ast.NotEq)) and (isinstance(left, Meta)
                                                   or isinstance(right, Meta)):
            same = isinstance(left, Meta) and isinstance(right, Meta) and left.obj == right.obj
            return self.const(same if isinstance(op, ast.Eq) else not same, loc)
        return None

    def contains(self, x, seq, loc: Loc) -> Value:
        """``x in seq`` for a tuple, list or dict known when the kernel compiles."""
        if isinstance(seq, Struct) and seq.kind == "dict":
            if not (isinstance(x, Meta) and isinstance(x.obj, str)):
                raise CompileError("'in' a dict takes a string constant", loc)
            return self.const(x.obj in seq.names, loc)
        if not is_node(seq):
            raise CompileError(f"'in' takes a tuple, list or dict in a kernel, not "
                               f"{self.describe(seq)}", loc,
                               hint="write the comparisons: x == a or x == b")
        found = self.const(False, loc)
        for item in items_of(seq):
            if isinstance(x, Meta) or isinstance(item, Meta):
                eq = self.const(isinstance(x, Meta) and isinstance(item, Meta)
                                and x.obj == item.obj, loc)
            else:
                eq = self.compare("eq", x, item, loc)
            c = self.constant_value(found)
            found = eq if c is False else found if c is True else \
                self.emit("bitor", [found, eq], found.type, loc)
        return found

    # --- nested functions --------------------------------------------------------------

    def stmt_def(self, node: ast.FunctionDef) -> None:
        loc = self.loc(node)
        if node.decorator_list:
            raise CompileError("decorators on a function inside a kernel are not supported",
                               loc)
        self.assign(node.name, Meta(self.local_function(node)), loc)

    def expr_lambda(self, node: ast.Lambda):
        return Meta(self.local_function(node))

    def local_function(self, node) -> LocalFunction:
        a = node.args
        if a.vararg or a.kwarg:
            raise CompileError("*args and **kwargs parameters are not supported",
                               self.loc(node))
        positional = [*a.posonlyargs, *a.args]
        defaults = {p.arg: self.expr(d) for p, d in zip(positional[len(positional)
                                                                  - len(a.defaults):],
                                                       a.defaults)}
        defaults.update({p.arg: self.expr(d) for p, d in zip(a.kwonlyargs, a.kw_defaults)
                         if d is not None})
        parsed = self.frame.parsed
        inner = ParsedFunction(parsed.pyfunc, node, parsed.filename, parsed.line_offset,
                               parsed.col_offset)
        return LocalFunction(node, inner, self.frame, defaults)

    def call_local(self, fn: LocalFunction, args, kwargs, loc: Loc):
        """Inline a call of a nested function: its parameters over the enclosing
        function's variables as they are now."""
        if fn.node in self.call_stack:
            raise CompileError(f"recursive call to {fn.__name__} is not supported", loc,
                               hint="rewrite the recursion as a loop")
        a = fn.node.args
        kinds = [(p, inspect.Parameter.POSITIONAL_ONLY) for p in a.posonlyargs]
        kinds += [(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in a.args]
        kinds += [(p, inspect.Parameter.KEYWORD_ONLY) for p in a.kwonlyargs]
        sig = inspect.Signature([inspect.Parameter(
            p.arg, kind, default=fn.defaults.get(p.arg, inspect.Parameter.empty))
            for p, kind in kinds])
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise CompileTypeError(f"{fn.__name__}() {e}", loc) from None
        bound.apply_defaults()
        env = {k: v for k, v in fn.frame.env.items() if not k.startswith("$")}
        partial = {k: p for k, p in fn.frame.partial.items() if k not in bound.arguments}
        env.update(bound.arguments)
        return self.unflatten(*self.translate_function(fn.parsed, env, loc, fn.node, partial))

    # --- arrays ------------------------------------------------------------------------

    def atomic_add_at(self, args, loc: Loc) -> None:
        """``atomic_add(a, (i, j), v)`` into an n-d shared array: each index wrapped and
        checked on its own axis (as ``a[i, j]``), then one ``atomic_add`` into the
        flattened view of ``a`` at ``i * a.shape[1] + j``."""
        a, index, v = args
        if len(index) != a.type.ndim:
            raise CompileError(f"atomic_add into a {a.type.ndim}-d array takes "
                               f"{a.type.ndim} indices, not {len(index)}", loc)
        flat = None
        for axis, i in enumerate(index):
            if not isinstance(i, Value) or not isinstance(i.type, ScalarType) \
                    or i.type.kind not in "iu":
                raise CompileError(f"atomic_add indices must be integers, not "
                                   f"{self.describe(i)}", loc)
            i = self.coerce(i, INT64, loc)
            n = self.emit("array_dim", [a], INT64, loc, {"axis": axis})
            neg = self.emit("lt", [i, self.const(0, loc, INT64)], BOOL, loc)
            i = self.emit("select", [neg, self.emit("add", [i, n], INT64, loc), i], INT64, loc)
            ok = self.emit("bitand", [self.emit("ge", [i, self.const(0, loc, INT64)], BOOL, loc),
                                      self.emit("lt", [i, n], BOOL, loc)], BOOL, loc)
            self.emit_op("check", [ok], [], loc, {
                "kind": "index", "message": f"atomic_add index out of bounds for axis {axis}"})
            flat = i if flat is None else self.emit(
                "add", [self.emit("mul", [flat, n], INT64, loc), i], INT64, loc)
        view = self.array_reshape(a, (self.const(-1, loc),), loc)
        return self.call_intrinsic("atomic_add", [view, flat, v], {}, loc)


_ABSENT = object()


def _names(target: ast.expr) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
