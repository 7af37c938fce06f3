"""NumPy ufuncs on numbers: the ufuncs per-lane arrays take (``batching.MATH_UFUNCS``)
that have no IR op of their own, written with the ops every backend has (``select``,
comparisons, arithmetic, ``math``), so that a number and an array accept the same
ufuncs and give NumPy's values:

- ``sign`` is ``x > 0 ? 1 : x < 0 ? -1 : x == 0 ? 0 : x`` (NumPy's loop: ``sign(-0.0)``
  is ``+0.0``, ``sign(nan)`` is nan); ``square`` is ``x * x`` and ``reciprocal`` ``1 /
  x``, in x's type; ``rint`` rounds half to even; ``mod``/``remainder`` is ``%``
  (Python's signs, as NumPy's; an integer divisor of 0 is a ``ZeroDivisionError``, as
  for ``%``);
- ``maximum``/``minimum`` follow NumPy's NaN rule (a NaN in either operand gives NaN;
  of two equal values the second), not Python's ``max``; ``fmax``/``fmin`` ignore a NaN
  operand (of +0.0 and -0.0 either may come back: NumPy itself differs between scalars
  and arrays there);
- ``deg2rad``/``radians``, ``rad2deg``/``degrees`` multiply by NumPy's constant in x's
  type; ``logaddexp``/``logaddexp2`` follow NumPy's formulas (within the documented ulps
  of ``exp``/``log1p`` on the compiled backends);
- the others: ``negative``, ``positive``, ``logical_*``, ``signbit``, ``heaviside``,
  ``float_power``.

A ufunc with NumPy's bool rules that NumPy refuses (``np.sign(True)``) is refused the
same way; ``REFUSED`` names the ufuncs numbers do not take yet, each with its reason.
Results of these functions are strong NumPy scalars (``np.square(3)`` is an ``int64``),
as NumPy returns them.
"""

from __future__ import annotations

import numpy as np

from ..errors import CompileError, Loc
from ..ir.core import Value
from ..types import BOOL, FLOAT64, ScalarType, promote, scalar

#: ufuncs per-lane arrays take that numbers do not take yet, with the reason
REFUSED = {
    "nextafter": "it steps through a float's bits, which kernels do not compute with on "
                 "numbers yet; per-lane arrays take it (np.nextafter(a, b) on arrays)",
    "spacing": "it steps through a float's bits, which kernels do not compute with on "
               "numbers yet; per-lane arrays take it (np.spacing(a) on arrays)",
    "gcd": "it is a loop over integers: write Euclid's algorithm (while b: a, b = b, a % b)",
    "lcm": "it is a loop over integers: write it with Euclid's algorithm (a // gcd * b)",
}

_ALIASES = {"mod": "remainder", "radians": "deg2rad", "degrees": "rad2deg"}


def scalar_ufunc(b, fname: str, args: list, loc: Loc) -> Value | None:
    """The value of NumPy ufunc ``fname`` on numbers ``args``, emitted by builder ``b``;
    None where ``fname`` is not one of this module's."""
    name = _ALIASES.get(fname, fname)
    if name in REFUSED:
        raise CompileError(f"np.{fname} of a number is not supported: {REFUSED[name]}", loc)
    rule = _RULES.get(name)
    if rule is None:
        return None
    arity = 2 if name in _BINARY else 1
    if len(args) != arity or not all(isinstance(a, Value) and isinstance(a.type, ScalarType)
                                     for a in args):
        raise CompileError(f"np.{fname}() takes {arity} number(s) here", loc)
    return rule(_Emit(b, loc, fname), *args)


def scalar_relu(b, x: Value, loc: Loc) -> Value:
    """``hydra.nn.relu`` of a number: ``np.maximum(x, 0)``, whose gradient at 0 is 0
    (its own rule, SPEC section 11) where np.maximum's ties split it."""
    e = _Emit(b, loc, "relu")
    return _extremum("gt", False)(e, x, e.const(0, x.type))


class _Emit:
    """The few emitting helpers the rules share."""

    def __init__(self, b, loc: Loc, fname: str):
        self.b, self.loc, self.fname = b, loc, fname

    def op(self, opcode: str, operands: list[Value], t, **attrs) -> Value:
        return self.b.emit(opcode, operands, t, self.loc, attrs or None)

    def const(self, value, t: ScalarType) -> Value:
        return self.b.const(t.dtype.type(value), self.loc, t)

    def cast(self, v: Value, t: ScalarType) -> Value:
        return self.b.coerce(v, t, self.loc)

    def cmp(self, opcode: str, x: Value, y: Value) -> Value:
        return self.op(opcode, [x, y], BOOL)

    def sel(self, c: Value, x: Value, y: Value) -> Value:
        return self.op("select", [c, x, y], x.type)

    def isnan(self, x: Value) -> Value:
        return self.op("math", [x], BOOL, fn="isnan")

    def math(self, fn: str, *xs: Value) -> Value:
        return self.op("math", list(xs), xs[0].type, fn=fn)

    def no_bool(self, x: Value) -> None:
        if x.type.kind == "b":
            raise CompileError(f"np.{self.fname} of a bool is not defined: NumPy has no bool "
                               f"loop for it either", self.loc,
                               hint="convert first: int(x) or float(x)")


def _float(t: ScalarType) -> ScalarType:
    return t.strong() if t.kind == "f" else FLOAT64


def _sign(e: _Emit, x: Value) -> Value:
    e.no_bool(x)
    t = x.type.strong()
    x = e.cast(x, t)
    zero, one = e.const(0, t), e.const(1, t)
    rest = e.sel(e.cmp("eq", x, zero), zero, x) if t.kind == "f" else zero
    if t.kind != "u":
        rest = e.sel(e.cmp("lt", x, zero), e.const(-1, t), rest)
    return e.sel(e.cmp("gt", x, zero), one, rest)


def _square(e: _Emit, x: Value) -> Value:
    t = scalar("int8") if x.type.kind == "b" else x.type.strong()  # NumPy: bool -> int8
    x = e.cast(x, t)
    return e.op("mul", [x, x], t)


def _reciprocal(e: _Emit, x: Value) -> Value:
    if x.type.kind != "f":
        raise CompileError("np.reciprocal of an integer is not supported on numbers: NumPy's "
                           "integer loop gives 0 for every value but 1 and -1 (and an "
                           "undefined value for 0)", e.loc, hint="1 / x divides as floats")
    t = x.type.strong()
    return e.op("truediv", [e.const(1, t), e.cast(x, t)], t)


def _rint(e: _Emit, x: Value) -> Value:
    t = _float(x.type)
    return e.math("rint", e.cast(x, t))


def _rounding(fn: str):
    """``floor``/``ceil``/``trunc``: of an integer or a bool, the number itself in its
    own type (NumPy 2); of a float, the math function."""
    def rule(e: _Emit, x: Value) -> Value:
        t = x.type.strong()
        return e.cast(x, t) if t.kind in "biu" else e.math(fn, e.cast(x, t))
    return rule


def _fmod(e: _Emit, x: Value, y: Value) -> Value:
    """C's remainder, with the sign of ``x``: of floats the math function; of integers
    ``x % y`` (Python's sign, of ``y``) moved to ``x``'s sign (a divisor of 0 is a
    ``ZeroDivisionError``, as for ``%``)."""
    t = promote(x.type, y.type)
    if t.kind == "f" or t.kind == "b":
        t = _float(t) if t.kind == "f" else FLOAT64
        return e.math("fmod", e.cast(x, t), e.cast(y, t))
    x, y, t = _both(e, x, y)
    r = e.b.arith("mod", x, y, e.loc)
    zero = e.const(0, t)
    moved = e.op("bitand", [e.cmp("ne", r, zero),
                            e.cmp("ne", e.cmp("lt", r, zero), e.cmp("lt", x, zero))], BOOL)
    return e.sel(moved, e.op("sub", [r, y], t), r)


def _remainder(e: _Emit, x: Value, y: Value) -> Value:
    return e.b.arith("mod", x, y, e.loc)


def _negative(e: _Emit, x: Value) -> Value:
    e.no_bool(x)
    t = x.type.strong()
    return e.op("neg", [e.cast(x, t)], t)


def _positive(e: _Emit, x: Value) -> Value:
    e.no_bool(x)
    return e.cast(x, x.type.strong())


def _logical(opcode: str):
    def rule(e: _Emit, *xs: Value) -> Value:
        truths = [e.b.truthy(x, e.loc) for x in xs]
        return e.op("not", truths, BOOL) if opcode == "not" else e.cmp(opcode, *truths)
    return rule


def _scaled(numerator: float, denominator: float):
    """x * (numerator / denominator), the constant computed in x's float type (NumPy's
    ``x * (NPY_PIf / 180.0f)`` for float32)."""
    def rule(e: _Emit, x: Value) -> Value:
        t = _float(x.type)
        c = t.dtype.type(numerator) / t.dtype.type(denominator)
        return e.op("mul", [e.cast(x, t), e.const(c, t)], t)
    return rule


def _signbit(e: _Emit, x: Value) -> Value:
    if x.type.kind in "bu":
        return e.b.const(False, e.loc)
    if x.type.kind in "i":
        x = e.cast(x, x.type.strong())
        return e.cmp("lt", x, e.const(0, x.type))
    t = x.type.strong()
    x = e.cast(x, t)
    return e.cmp("lt", e.math("copysign", e.const(1, t), x), e.const(0, t))


def _both(e: _Emit, x: Value, y: Value, t: ScalarType | None = None) -> tuple:
    t = (t or promote(x.type, y.type)).strong()
    return e.cast(x, t), e.cast(y, t), t


def _heaviside(e: _Emit, x: Value, h0: Value) -> Value:
    x, h0, t = _both(e, x, h0, _float(promote(x.type, h0.type)))
    zero = e.const(0, t)
    rest = e.sel(e.cmp("eq", x, zero), h0, x)  # nan stays nan
    rest = e.sel(e.cmp("gt", x, zero), e.const(1, t), rest)
    return e.sel(e.cmp("lt", x, zero), zero, rest)


def _float_power(e: _Emit, x: Value, y: Value) -> Value:
    return e.math("pow", e.cast(x, FLOAT64), e.cast(y, FLOAT64))


def _extremum(pred: str, ignore_nan: bool):
    """NumPy's ``maximum``/``minimum`` (``pred`` "gt"/"lt"): ``x pred y or isnan(x) ?
    x : y``; ``fmax``/``fmin``: ``isnan(y) or x pred= y ? x : y``."""
    def rule(e: _Emit, x: Value, y: Value) -> Value:
        if promote(x.type, y.type).kind != "f":
            return e.b.arith("max" if pred == "gt" else "min", x, y, e.loc)
        x, y, _ = _both(e, x, y)
        if ignore_nan:
            c = e.op("bitor", [e.isnan(y), e.cmp(pred[0] + "e", x, y)], BOOL)
        else:
            c = e.op("bitor", [e.cmp(pred, x, y), e.isnan(x)], BOOL)
        # hydra.grad: a tie gives each side half (SPEC section 11); relu's own rule
        # (hydra.nn.relu'(0) = 0) is the plain select's
        return e.op("select", [c, x, y], x.type, tie=e.fname != "relu")
    return rule


def _logaddexp(base2: bool):
    """NumPy's ``npy_logaddexp``: ``x == y ? x + log(2) : x + log1p(exp(-(x - y)))`` for
    ``x > y`` (and symmetrically), else ``x - y`` (a NaN); base 2 with ``exp2`` and
    ``log1p(v) * log2(e)``."""
    def rule(e: _Emit, x: Value, y: Value) -> Value:
        x, y, t = _both(e, x, y, _float(promote(x.type, y.type)))
        tmp = e.op("sub", [x, y], t)

        def log1p_exp(v: Value) -> Value:
            p = e.math("log1p", e.math("exp2" if base2 else "exp", v))
            return e.op("mul", [p, e.const(np.log2(np.e), t)], t) if base2 else p
        above = e.op("add", [x, log1p_exp(e.op("neg", [tmp], t))], t)
        below = e.op("add", [y, log1p_exp(tmp)], t)
        same = e.op("add", [x, e.const(1.0 if base2 else np.log(2.0), t)], t)
        rest = e.sel(e.cmp("le", tmp, e.const(0, t)), below, tmp)
        rest = e.sel(e.cmp("gt", tmp, e.const(0, t)), above, rest)
        return e.sel(e.cmp("eq", x, y), same, rest)
    return rule


def _operator(opcode: str):
    """A ufunc that is a Python operator on numbers (``np.add`` is ``+``)."""
    def rule(e: _Emit, x: Value, y: Value) -> Value:
        if opcode in ("lt", "le", "gt", "ge", "eq", "ne"):
            return e.b.compare(opcode, x, y, e.loc)
        return e.b.arith(opcode, x, y, e.loc)
    return rule


def _invert(e: _Emit, x: Value) -> Value:
    if x.type.kind == "b":
        return e.op("not", [x], BOOL)  # NumPy: ~ of a bool is logical not
    if x.type.kind == "f":
        raise CompileError(f"np.{e.fname} of a float is not defined (NumPy has no float "
                           f"loop for it either)", e.loc)
    t = x.type.strong()
    return e.op("invert", [e.cast(x, t)], t)


_OPERATORS = {
    "add": "add", "subtract": "sub", "multiply": "mul", "true_divide": "truediv",
    "divide": "truediv", "floor_divide": "floordiv", "left_shift": "lshift",
    "right_shift": "rshift", "bitwise_and": "bitand", "bitwise_or": "bitor",
    "bitwise_xor": "bitxor", "less": "lt", "less_equal": "le", "greater": "gt",
    "greater_equal": "ge", "equal": "eq", "not_equal": "ne",
}
_RULES = {
    **{name: _operator(op) for name, op in _OPERATORS.items()},
    "invert": _invert, "bitwise_not": _invert, "bitwise_invert": _invert,
    "sign": _sign, "square": _square, "reciprocal": _reciprocal, "rint": _rint,
    "floor": _rounding("floor"), "ceil": _rounding("ceil"), "trunc": _rounding("trunc"),
    "fmod": _fmod, "remainder": _remainder, "negative": _negative, "positive": _positive,
    "logical_not": _logical("not"), "logical_and": _logical("bitand"),
    "logical_or": _logical("bitor"), "logical_xor": _logical("ne"),
    "deg2rad": _scaled(np.pi, 180.0), "rad2deg": _scaled(180.0, np.pi),
    "signbit": _signbit, "heaviside": _heaviside, "float_power": _float_power,
    "maximum": _extremum("gt", False), "minimum": _extremum("lt", False),
    "fmax": _extremum("gt", True), "fmin": _extremum("lt", True),
    "logaddexp": _logaddexp(False), "logaddexp2": _logaddexp(True),
}
_BINARY = frozenset({*_OPERATORS, "fmod", "remainder", "logical_and", "logical_or", "logical_xor",
                     "heaviside", "float_power", "maximum", "minimum", "fmax", "fmin",
                     "logaddexp", "logaddexp2"})
