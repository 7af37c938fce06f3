"""Expressions for the builder: typing by NumPy 2 rules, weak literals, per-lane
short-circuit ``and``/``or``/``if-else`` (calls are in ``calls``, subscripts in
``indexing``).
"""

from __future__ import annotations

import ast
import math
import operator
import types as pytypes

import numpy as np

from ..arrays import array_problem
from ..errors import CompileError, CompileOverflowError, Loc
from ..ir.core import Value
from ..types import (BOOL, FLOAT64, WEAK_BOOL, WEAK_FLOAT, ArrayType,
                     SCALAR_NAMES, ScalarType, Type, promote, scalar, typeof_python)
from .arrayops import SHAPED, is_array
from .common import Meta
from .containers import Struct, items_of
from .subset import EXPRESSIONS

_BINOPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
    ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow", ast.LShift: "lshift",
    ast.RShift: "rshift", ast.BitAnd: "bitand", ast.BitOr: "bitor", ast.BitXor: "bitxor",
}
_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
           "pow": "**", "lshift": "<<", "rshift": ">>", "bitand": "&", "bitor": "|",
           "bitxor": "^"}

_PYTHON_INT_OPS = {
    **{n: getattr(operator, n) for n in ("add", "sub", "mul", "floordiv", "mod", "pow",
                                         "lshift", "rshift")},
    "bitand": operator.and_, "bitor": operator.or_, "bitxor": operator.xor, "min": min, "max": max}

#: the NumPy scalar types hydra computes in (np.float32, ...) -> their names
NUMPY_SCALAR_TYPES = {np.dtype(n).type: n for n in SCALAR_NAMES}


class ExprMixin:
    """Expression translation; mixed into ``Builder``."""

    # --- dispatch -------------------------------------------------------------------

    def expr(self, node: ast.expr):
        handler = EXPRESSIONS.get(type(node))
        if handler is None:
            raise CompileError(f"{type(node).__name__} is not supported", self.loc(node))
        return getattr(self, handler)(node)

    def describe(self, v) -> str:
        """What ``v`` (a value, a type, a compile-time object) is, for an error message."""
        if isinstance(v, Value):
            if isinstance(v.type, ArrayType):
                return f"an array ({v.type})"
            v = v.type
        if isinstance(v, Type):
            name = v.strong().name if isinstance(v, ScalarType) else str(v)
            return f"an {name}" if name[0] in "aeiou" else f"a {name}"
        if isinstance(v, tuple):
            return f"a tuple of {len(v)}"
        if isinstance(v, Struct):
            return v.describe()
        if v is None:
            return "None"
        if isinstance(v, Meta):
            obj = v.obj
            if isinstance(obj, str):
                return "a string"
            if isinstance(obj, pytypes.ModuleType):
                return f"the module {obj.__name__}"
            return f"{getattr(obj, '__name__', type(obj).__name__)}"
        return type(v).__name__

    # --- constants and conversions -----------------------------------------------------

    def const(self, value, loc: Loc, type_: Type | None = None, folded: bool = False) -> Value:
        """A constant; ``folded``: a Python int computed from constants, which may be
        beyond 64 bits until it meets a type (``2**64 - 1``)."""
        t = type_ or typeof_python(value)
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            if not folded and not -2**63 <= int(value) < 2**64:
                raise CompileError(f"the integer {value} does not fit in 64 bits", loc)
        attrs = {"value": _python_scalar(value, t)}
        if isinstance(t, ScalarType) and t.weak and t.kind == "i" and attrs["value"] != value:
            attrs["_python"] = int(value)  # a Python int beyond int64: keep its value
        v = self.emit("const", [], t, loc, attrs)
        self.const_ops[v.id] = self.region.ops[-1]
        return v

    def constant_value(self, v):
        """The Python value of a constant, or None.  Constants are looked up among those
        made (in enclosing regions too: a uniform int a shape depends on, the counter of
        an unrolled loop, used in an if's or a loop's body) and in the region being built."""
        if not isinstance(v, Value):
            return None
        op = self.const_ops.get(v.id)
        if op is None:
            op = self.defining_op(v)
        if op is None or op.opcode != "const":
            return None
        return op.attrs.get("_python", op.attrs["value"])

    def defining_op(self, v: Value):
        """The op of the region being built whose (first) result ``v`` is, or None."""
        return next((op for op in reversed(self.region.ops)
                     if op.results and op.results[0] is v), None)

    def coerce(self, v: Value, t: Type, loc: Loc) -> Value:
        if not isinstance(v, Value):
            raise CompileError(f"expected a number, not {self.describe(v)}", loc)
        if v.type == t:
            return v
        if isinstance(v.type, ArrayType) or not isinstance(t, ScalarType):
            raise CompileError(f"cannot convert {v.type} to {t}", loc)
        c = self.constant_value(v)
        if c is not None:
            if self._out_of_range(v, t) is not None:
                raise CompileOverflowError(
                    f"the Python int {c} does not fit in {t}, the type it meets here", loc,
                    hint=_overflow_hint(t))
            return self.const(c, loc, t)
        if v.type.weak and v.type.kind == "i" and t.kind in "iu" and not t.weak \
                and t.name != "int64":
            self.check_python_int(v, t, loc)
        return self.emit("cast", [v], t, loc)

    def check_python_int(self, v: Value, t: ScalarType, loc: Loc) -> None:
        """NumPy 2 raises OverflowError where a Python int meets a NumPy type too narrow
        for it: a kernel argument is checked at the call (noted here), a value computed
        in the kernel at run time, naming the lane."""
        param = self.param_names_by_id.get(v.id)
        if param is not None:
            self.python_int_params.setdefault(param, {}).setdefault(t.name, loc)
            return
        info = np.iinfo(t.dtype)
        ok = self.emit("ge", [v, self.const(max(info.min, -2**63), loc, v.type)], BOOL, loc)
        if info.max < 2**63 - 1:
            below = self.emit("le", [v, self.const(info.max, loc, v.type)], BOOL, loc)
            ok = self.emit("bitand", [ok, below], BOOL, loc)
        self.emit_op("check", [ok], [], loc,
                     {"kind": "overflow", "message": f"Python integer out of bounds for "
                                                     f"{t.name} (NumPy 2 raises here too)"})

    def condition(self, node: ast.expr) -> Value:
        """``node`` as a bool where only its truth counts (``if``, ``while``, ``assert``,
        the test of ``a if c else b``, ``not``): there ``and``/``or`` may mix operand
        types, as in Python (``(x & 1) and x < 3``), because each operand is tested
        for truth instead of becoming the value."""
        loc = self.loc(node)
        if isinstance(node, ast.BoolOp):
            return self.boolop(isinstance(node.op, ast.And), node.values, loc, as_condition=True)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return self.logical_not(self.condition(node.operand), loc)
        return self.truthy(self.expr(node), loc)

    def static_truth(self, cond: Value) -> bool | None:
        """The truth of a condition known when the kernel compiles (``x.ndim == 2``,
        ``len(W) > 1``, a module-level ``DEBUG`` flag), else None: an ``if`` on it keeps
        only the arm Python would run, so the other may hold code that would not
        type-check for these shapes, as in Numba's dead-branch pruning and JAX's tracing."""
        c = self.constant_value(cond)
        return None if c is None else bool(c)

    def logical_not(self, cond: Value, loc: Loc) -> Value:
        truth = self.static_truth(cond)
        if truth is not None:
            return self.const(not truth, loc)
        return self.emit("not", [cond], WEAK_BOOL, loc)  # Python's not: a Python bool

    def truthy(self, v, loc: Loc) -> Value:
        if isinstance(v, tuple) or isinstance(v, Struct) and v.kind != "dataclass":
            return self.const(len(items_of(v)) > 0, loc)
        if isinstance(v, Struct):
            return self.const(True, loc)  # a dataclass instance
        if isinstance(v, Meta) and (v.obj is None or isinstance(v.obj, str)):
            return self.const(bool(v.obj), loc)  # None, a static string
        if not isinstance(v, Value) or not isinstance(v.type, ScalarType):
            raise CompileError(f"{self.describe(v)} cannot be used as a condition", loc)
        if v.type.kind == "b":
            return v
        truth = self.static_truth(v)
        if truth is not None:
            return self.const(truth, loc)
        zero = self.const(0, loc, v.type)
        return self.emit("ne", [v, zero], WEAK_BOOL if v.type.weak else BOOL, loc)

    def annotation_type(self, node: ast.expr) -> ScalarType | None:
        try:
            obj = self.expr(node)
        except CompileError:
            return None
        return self.scalar_type_of(getattr(obj, "obj", None))

    def scalar_type_of(self, obj) -> ScalarType | None:
        """The scalar type ``obj`` names (float, np.float32, "int8", a dtype), or None."""
        if obj in (float, int, bool) or obj in NUMPY_SCALAR_TYPES \
                or isinstance(obj, (str, np.dtype)):
            try:
                return scalar(obj)
            except TypeError:
                return None
        return None

    def dtype_named(self, obj, what: str, loc: Loc) -> ScalarType:
        """The scalar type a ``dtype=`` argument names, or a CompileError that says
        whether it is no dtype at all or one hydra does not compute in."""
        t = self.scalar_type_of(obj)
        if t is not None:
            return t
        try:
            if isinstance(obj, Value):
                raise TypeError
            name = np.dtype(obj).name
        except TypeError:
            obj = "a value computed in the kernel" if isinstance(obj, Value) else repr(obj)
            raise CompileError(f"{what}: the dtype must be a NumPy scalar type such as "
                               f"np.float32, not {obj}", loc) from None
        raise CompileError(f"{what}: hydra does not compute in {name}", loc,
                           hint="use one of " + ", ".join(NUMPY_SCALAR_TYPES.values()))

    def from_python(self, obj, name: str, loc: Loc):
        """A free name's value: numbers become constants, arrays captured arrays."""
        if isinstance(obj, (bool, int, float, np.generic)):
            return self.const(obj, loc)
        if isinstance(obj, np.ndarray):
            key = id(obj)
            if key not in self.globals_cache:
                t = typeof_python(obj)
                if t is None:
                    raise CompileError(f"the array '{name}' has unsupported dtype {obj.dtype}", loc)
                problem = array_problem(obj)
                if problem:
                    raise CompileError(f"the captured array '{name}' {problem[0]}", loc,
                                       hint=problem[1].format(name=name))
                if SHAPED.get():  # whole-array operations need its shape
                    t = ArrayType(t.dtype, t.ndim, tuple(obj.shape))
                v = self.emit("global_array", [], t, loc, {"array": obj, "name": name}, name=name)
                self.array_refs.add(v.id)
                # Captured arrays are made once, at the top, where every region sees them.
                self.entry_ops.append(self.region.ops.pop())
                self.globals_cache[key] = v
            return self.globals_cache[key]
        if isinstance(obj, tuple):
            return tuple(self.from_python(o, name, loc) for o in obj)
        return Meta(obj)

    # --- simple expressions ----------------------------------------------------------

    def expr_constant(self, node: ast.Constant):
        if isinstance(node.value, (bool, int, float)):
            return self.const(node.value, self.loc(node))
        if node.value is None or node.value is Ellipsis or isinstance(node.value, str):
            return Meta(node.value)
        raise CompileError(f"constants of type {type(node.value).__name__} are not supported",
                           self.loc(node))

    def expr_slice(self, node: ast.Slice):
        raise CompileError("a slice is only supported inside an index: a[i:j]", self.loc(node))

    def expr_name(self, node: ast.Name):
        return self.lookup(node.id, self.loc(node))

    def expr_tuple(self, node: ast.Tuple):
        return tuple(self.expr(e) for e in node.elts)

    def expr_joinedstr(self, node):
        raise CompileError("strings are only supported as arguments of print()", self.loc(node))

    def expr_attribute(self, node: ast.Attribute):
        loc = self.loc(node)
        base = self.expr(node.value)
        if isinstance(base, Value) and isinstance(base.type, ArrayType):
            return self.array_attribute(base, node.attr, loc)
        if isinstance(base, Struct):
            return self.container_attribute(base, node.attr, loc)
        if isinstance(base, Meta) and isinstance(base.obj, pytypes.ModuleType):
            try:
                obj = getattr(base.obj, node.attr)
            except AttributeError:
                raise CompileError(f"module {base.obj.__name__} has no attribute "
                                   f"'{node.attr}'", loc) from None
            return self.from_python(obj, node.attr, loc)
        raise CompileError(f"attribute '{node.attr}' of {self.describe(base)} is not supported",
                           loc)

    # --- arithmetic ------------------------------------------------------------------

    def expr_binop(self, node: ast.BinOp):
        return self.binop(node.op, self.expr(node.left), self.expr(node.right), self.loc(node))

    def binop(self, op: ast.operator, a, b, loc: Loc) -> Value:
        name = _BINOPS.get(type(op))
        if isinstance(op, ast.MatMult):
            return self.array_op("matmul", [a, b], loc)
        if name is None:
            raise CompileError(f"operator {type(op).__name__} is not supported", loc)
        if isinstance(a, tuple) and isinstance(b, tuple) and name == "add":
            return a + b
        return self.arith(name, a, b, loc)

    def arith(self, name: str, a, b, loc: Loc) -> Value:
        if is_array(a) or is_array(b):
            return self.array_arith(name, a, b, loc)
        for v in (a, b):
            if not isinstance(v, Value) or not isinstance(v.type, ScalarType):
                raise CompileError(f"unsupported operand for {_SYMBOL.get(name, name)}: "
                                   f"{self.describe(v)}", loc)
        folded = self._fold_python_ints(name, a, b, loc)
        if folded is not None:
            return folded
        t = promote(a.type, b.type)
        for v in (a, b):
            c = self.constant_value(v)
            if t.weak and t.kind == "i" and isinstance(c, int) and not -2**63 <= c < 2**64:
                raise CompileOverflowError(f"the integer {c} does not fit in 64 bits", loc,
                                           hint="hydra's Python ints are 64-bit")
        if name == "truediv" and t.kind in "biu":
            t = WEAK_FLOAT if t.weak else FLOAT64
        elif t.kind == "b":
            name, t = self.bool_arith(name, t, loc)
        if t.kind == "f" and name in ("lshift", "rshift", "bitand", "bitor", "bitxor"):
            raise CompileError(f"unsupported operand types for {_SYMBOL[name]}: {a.type} and "
                               f"{b.type}", loc)
        for v in (a, b):
            c = self._out_of_range(v, t)
            if c is not None:  # NumPy 2 raises OverflowError here; wrapping would hide it
                raise CompileOverflowError(f"the integer {c} does not fit in {t}, the type of "
                                           f"the other operand", loc, hint=_overflow_hint(t))
        if name == "pow":
            self.check_exponent(a, b, t, loc)
        return self.emit(name, [self.coerce(a, t, loc), self.coerce(b, t, loc)], t, loc)

    def _fold_python_ints(self, name: str, a: Value, b: Value, loc: Loc) -> Value | None:
        """Arithmetic on two Python int constants, done as Python does it (``500 + 500``
        is the Python int 1000 before it meets an int8, as in NumPy), or None."""
        x, y = self.constant_value(a), self.constant_value(b)
        if not (a.type.weak and b.type.weak and a.type.kind == "i" == b.type.kind
                and isinstance(x, int) and isinstance(y, int)):
            return None
        if name in ("floordiv", "mod") and y == 0 or name in ("pow", "lshift", "rshift") \
                and not 0 <= y <= 64:
            return None  # a run-time error, a float, or a number beyond 64 bits
        r = _PYTHON_INT_OPS[name](x, y) if name in _PYTHON_INT_OPS else None
        if r is None or r.bit_length() > 4096:
            return None  # left to the 64-bit arithmetic at run time, which wraps
        return self.const(r, loc, folded=True)

    def _out_of_range(self, v: Value, t: ScalarType):
        """A Python int constant ``v`` that does not fit the fixed-width integer type
        ``t`` it meets (NEP 50: Python ints take the NumPy type, if they fit), else None."""
        c = self.constant_value(v)
        if c is None or isinstance(c, bool) or not (v.type.weak and v.type.kind in "iu") \
                or t.weak or t.kind not in "iu":
            return None
        info = np.iinfo(t.dtype)
        return None if info.min <= int(c) <= info.max else int(c)

    def expr_unaryop(self, node: ast.UnaryOp):
        loc = self.loc(node)
        if isinstance(node.op, ast.Not):
            return self.logical_not(self.condition(node.operand), loc)
        v = self.expr(node.operand)
        if not isinstance(v, Value):
            raise CompileError(f"expected a number here, not {self.describe(v)}",
                               self.loc(node.operand))
        if isinstance(node.op, ast.UAdd) and (is_array(v) or v.type.kind != "b"):
            return v
        if is_array(v):
            return self.array_op("neg" if isinstance(node.op, ast.USub) else "invert", [v], loc)
        t = v.type
        if t.kind == "b" and isinstance(node.op, ast.Invert):
            return self.emit("not", [v], t, loc)  # NumPy: ~ of a bool is logical not
        if t.kind == "b":
            return self.bool_unary("neg" if isinstance(node.op, ast.USub) else "pos", v, loc)
        if isinstance(node.op, ast.USub):
            c = self.constant_value(v)
            if c is not None:
                return self.const(-c, loc, t, folded=True)
            return self.emit("neg", [v], t, loc)
        if t.kind == "f":
            raise CompileError("bad operand type for unary ~: float", loc)
        return self.emit("invert", [v], t, loc)

    # --- per-lane short circuit ---------------------------------------------------------

    def expr_boolop(self, node: ast.BoolOp):
        return self.boolop(isinstance(node.op, ast.And), node.values, self.loc(node))

    def boolop(self, is_and: bool, nodes: list[ast.expr], loc: Loc, as_condition=False):
        first = self.condition(nodes[0]) if as_condition else self.expr(nodes[0])
        if len(nodes) == 1:
            return first
        cond = self.truthy(first, loc)
        rest = lambda: self.boolop(is_and, nodes[1:], loc, as_condition)  # noqa: E731
        keep = lambda: first  # noqa: E731
        return self.if_value(cond, *((rest, keep) if is_and else (keep, rest)), loc)

    def expr_ifexp(self, node: ast.IfExp):
        return self.if_value(self.condition(node.test), lambda: self.expr(node.body),
                             lambda: self.expr(node.orelse), self.loc(node))


def _overflow_hint(t: ScalarType) -> str:
    info = np.iinfo(t.dtype)
    return f"NumPy 2 raises OverflowError here too; use a value in {info.min}..{info.max}"


def _python_scalar(value, t: Type):
    """A constant's value as a Python scalar of type ``t`` (integers wrap, as NumPy's do)."""
    if not isinstance(t, ScalarType):
        return value
    if t.kind == "b":
        return bool(value)
    if t.kind in "iu":
        if isinstance(value, (float, np.floating)):
            value = int(value) if math.isfinite(value) else 0
        v = int(value) & ((1 << t.bits) - 1)
        if t.kind == "i" and v >= 1 << (t.bits - 1):
            v -= 1 << t.bits
        return v
    return float(np.asarray(value, dtype=t.dtype))
