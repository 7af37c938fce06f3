"""An emitter of typed structured SSA for the gradient transformation and its rules.

Takes: nothing but the ``Region`` it appends to (``into``) and a source location.
Guarantees: every op it makes is an ordinary ``hydra.ir.core`` op of a known opcode
with fresh result values of the stated types; the helpers that the adjoint rules use
(``add``, ``mul``, ``select``, ``math`` ...) keep the operand type (a float constant
takes the type of the value it meets), so a rule never changes a value's precision.
"""

from __future__ import annotations

import contextlib
import math

from ..errors import Loc
from ..ir.core import Op, Region, Value
from ..types import BOOL, ArrayType, Type

#: a math function's name as an ``array`` op's fn (NumPy's), where it differs (``pow``
#: is the fn of np.power too: the one record, differentiable again)
_ARRAY_MATH = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "atan2": "arctan2",
               "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh"}


def is_array(v) -> bool:
    return isinstance(v, Value) and isinstance(v.type, ArrayType)


class Emitter:
    """Appends ops to ``self.region`` at ``self.loc``."""

    def __init__(self, region: Region, loc: Loc) -> None:
        self.region = region
        self.loc = loc

    @contextlib.contextmanager
    def into(self, region: Region):
        """Emit into ``region`` for the duration of the block."""
        saved, self.region = self.region, region
        try:
            yield region
        finally:
            self.region = saved

    @contextlib.contextmanager
    def at(self, loc: Loc):
        saved, self.loc = self.loc, loc
        try:
            yield
        finally:
            self.loc = saved

    def op(self, opcode: str, operands: list[Value], types: list[Type], attrs=None,
           regions=None, names=None) -> Op:
        results = [Value(t, self.loc, names[i] if names else "") for i, t in enumerate(types)]
        op = Op(opcode, list(operands), results, self.loc, dict(attrs or {}),
                list(regions or []))
        self.region.ops.append(op)
        return op

    def v(self, opcode: str, operands: list[Value], t: Type, attrs=None) -> Value:
        return self.op(opcode, operands, [t], attrs).result

    # --- helpers for the adjoint rules: the result has the type of the first value, ----
    # --- or of the array among the operands (then an ``array`` op, NumPy broadcasting) --

    def const(self, value, t: Type) -> Value:
        return self.v("const", [], t, {"value": value})

    def arr(self, fn: str, operands: list[Value], params: dict | None = None) -> Value:
        """The ``array`` op ``fn`` (SPEC section 8) with its result type by NumPy's rules."""
        from ..batching import result_type
        params = dict(params or {})
        t = result_type(fn, [v.type for v in operands], params)
        return self.v("array", operands, t, {"fn": fn, "params": params})

    def _val(self, x, like: Value) -> Value:
        if isinstance(x, Value):
            return x
        t = like.type.dtype if isinstance(like.type, ArrayType) else like.type
        return self.const(float(x), t)

    def _bin(self, opcode: str, a, b) -> Value:
        like = a if isinstance(a, Value) else b
        a, b = self._val(a, like), self._val(b, like)
        if is_array(a) or is_array(b):
            return self.arr(opcode, [a, b])
        return self.v(opcode, [a, b], like.type)

    def add(self, a, b):
        return self._bin("add", a, b)

    def sub(self, a, b):
        return self._bin("sub", a, b)

    def mul(self, a, b):
        return self._bin("mul", a, b)

    def div(self, a, b):
        return self._bin("truediv", a, b)

    def neg(self, a: Value) -> Value:
        return self.arr("neg", [a]) if is_array(a) else self.v("neg", [a], a.type)

    def cmp(self, name: str, a, b) -> Value:
        like = a if isinstance(a, Value) else b
        a, b = self._val(a, like), self._val(b, like)
        if is_array(a) or is_array(b):
            return self.arr(name, [a, b])
        return self.v(name, [a, b], BOOL)

    def select(self, c: Value, a, b) -> Value:
        like = a if isinstance(a, Value) else b
        a, b = self._val(a, like), self._val(b, like)
        if is_array(c) or is_array(a) or is_array(b):
            return self.arr("where", [c, a, b])
        return self.v("select", [c, a, b], like.type)

    def math(self, fn: str, *args: Value) -> Value:
        if any(is_array(a) for a in args):
            return self.arr(_ARRAY_MATH.get(fn, fn), list(args))
        return self.v("math", list(args), args[0].type, {"fn": fn})

    def cast(self, a: Value, t: Type) -> Value:
        if a.type == t:
            return a
        if isinstance(t, ArrayType) and is_array(a):
            return self.arr("astype", [a], {"dtype": t.dtype.name})
        return self.v("cast", [a], t)

    def zero(self, t: Type, like: Value | None = None) -> Value:
        """0 of type ``t``: an array of zeros is made like ``like`` (a value of type t)."""
        if isinstance(t, ArrayType):
            return self.arr("zeros_like", [like], {"dtype": None})
        return self.const(0.0, t)

    def where_zero(self, c: Value, a: Value) -> Value:
        """``a`` where ``c`` is false, exactly 0 where it is true (a select: a NaN or inf
        in ``a`` never leaks into the zeroed lanes, as 0 * inf would)."""
        return self.select(c, 0.0, a)


LN2 = math.log(2.0)
LN10 = math.log(10.0)
TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
