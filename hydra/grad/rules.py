"""The adjoint rules of scalar operations (SPEC section 11), one per operation; the
operation registry (``hydra.registry``) holds each in its record's ``adjoint`` slot.

A rule is ``rule(e, op, args, out, g) -> [adjoint or None per operand]``: ``e`` an
``Emitter`` positioned in the reverse sweep, ``op`` the original op, ``args`` and
``out`` its operands and result as the forward sweep computed them, ``g`` the adjoint
of the result.  It returns what flows to each operand (None: nothing, e.g. for the
condition of a select).  The transformation sums the contributions and casts each to
its operand's type; it calls a rule only for a float result with an adjoint.

Kinks are those of SPEC section 11: ``abs'(0) = 0``; ``sqrt'(0) = +inf``; ties of
``min``/``max`` give each side half; ``hypot`` at (0, 0) has gradient 0.  Where a
factor may be inf or NaN on lanes that must get exactly 0 (``pow``'s exponent at a
base of 0), a select zeroes them, never a multiplication by 0.
"""

from __future__ import annotations

from .emit import LN2, LN10, TWO_OVER_SQRT_PI


def add(e, op, args, out, g):
    return [g, g]


def sub(e, op, args, out, g):
    return [g, e.neg(g)]


def mul(e, op, args, out, g):
    a, b = args
    return [e.mul(g, b), e.mul(g, a)]


def truediv(e, op, args, out, g):
    a, b = args
    da = e.div(g, b)
    return [da, e.neg(e.mul(da, out))]  # d(a/b)/db = -(a/b)/b


def neg(e, op, args, out, g):
    return [e.neg(g)]


def sign_times(e, x, g):
    """g * sign(x) with sign(0) = 0, by selects."""
    return e.select(e.cmp("gt", x, 0.0), g,
                    e.select(e.cmp("lt", x, 0.0), e.neg(g), 0.0))


def abs_(e, op, args, out, g):
    return [sign_times(e, args[0], g)]


def _extremum(e, args, g, wins: str):
    """max (wins="gt") or min (wins="lt") of two: the winner gets g, a tie half each."""
    a, b = args
    half = e.mul(g, 0.5)
    tie = e.cmp("eq", a, b)
    da = e.select(e.cmp(wins, a, b), g, e.select(tie, half, 0.0))
    db = e.select(e.cmp(wins, b, a), g, e.select(tie, half, 0.0))
    return [da, db]


def max_(e, op, args, out, g):
    return _extremum(e, args, g, "gt")


def min_(e, op, args, out, g):
    return _extremum(e, args, g, "lt")


def pow_(e, op, args, out, g):
    """a ** b: d/da = b * a**(b-1) (0 where b == 0, as JAX); d/db = log(a) * a**b,
    with log(0) taken as 0 (a base of 0 has no gradient in its exponent)."""
    a, b = args
    da = e.mul(g, e.mul(b, e.math("pow", a, e.sub(b, 1.0))))
    da = e.where_zero(e.cmp("eq", b, 0.0), da)
    base0 = e.cmp("eq", a, 0.0)
    log_a = e.math("log", e.select(base0, 1.0, a))
    db = e.where_zero(base0, e.mul(g, e.mul(out, log_a)))
    return [da, db]


def mod(e, op, args, out, g):
    """Python's a % b = a - b * floor(a / b)."""
    a, b = args
    return [g, e.neg(e.mul(g, e.math("floor", e.div(a, b))))]


def fmod(e, op, args, out, g):
    """C's fmod(a, b) = a - b * trunc(a / b)."""
    a, b = args
    return [g, e.neg(e.mul(g, e.math("trunc", e.div(a, b))))]


def cast(e, op, args, out, g):
    """A conversion between float types: the adjoint converts back.  (From an integer
    nothing flows; ``hydra.stop_gradient`` is a cast that stops it.)"""
    src = op.operands[0].type
    if op.attrs.get("stop_gradient") or src.kind != "f":
        return [None]
    return [e.cast(g, src)]


def select(e, op, args, out, g):
    """c ? a : b.  The select of ``np.maximum``/``np.minimum`` (attribute ``tie``) gives
    each side half where a == b (SPEC section 11); ``hydra.nn.relu``'s does not
    (relu'(0) = 0, as JAX's)."""
    c, a, b = args
    if op.attrs.get("tie"):
        half = e.mul(g, 0.5)
        tie = e.cmp("eq", a, b)
        return [None, e.select(tie, half, e.select(c, g, 0.0)),
                e.select(tie, half, e.select(c, 0.0, g))]
    return [None, e.select(c, g, 0.0), e.select(c, 0.0, g)]


# --- math functions (``math`` op, by fn) ---------------------------------------------

def _unary(f):
    def rule(e, op, args, out, g):
        return [f(e, args[0], out, g)]
    rule.__doc__ = f.__doc__
    rule.__name__ = f.__name__
    return rule


def _rsqrt_of(e, x):
    return e.math("sqrt", x)


MATH_RULES = {
    "sqrt": _unary(lambda e, x, y, g: e.div(e.mul(g, 0.5), y)),  # 1/(2 sqrt(0)) = +inf
    "exp": _unary(lambda e, x, y, g: e.mul(g, y)),
    "exp2": _unary(lambda e, x, y, g: e.mul(g, e.mul(y, LN2))),
    "expm1": _unary(lambda e, x, y, g: e.mul(g, e.add(y, 1.0))),
    "log": _unary(lambda e, x, y, g: e.div(g, x)),
    "log2": _unary(lambda e, x, y, g: e.div(g, e.mul(x, LN2))),
    "log10": _unary(lambda e, x, y, g: e.div(g, e.mul(x, LN10))),
    "log1p": _unary(lambda e, x, y, g: e.div(g, e.add(x, 1.0))),
    "sin": _unary(lambda e, x, y, g: e.mul(g, e.math("cos", x))),
    "cos": _unary(lambda e, x, y, g: e.neg(e.mul(g, e.math("sin", x)))),
    "tan": _unary(lambda e, x, y, g: e.mul(g, e.add(e.mul(y, y), 1.0))),
    "asin": _unary(lambda e, x, y, g: e.div(g, _rsqrt_of(e, e.sub(1.0, e.mul(x, x))))),
    "acos": _unary(lambda e, x, y, g: e.neg(e.div(g, _rsqrt_of(e, e.sub(1.0, e.mul(x, x)))))),
    "atan": _unary(lambda e, x, y, g: e.div(g, e.add(e.mul(x, x), 1.0))),
    "sinh": _unary(lambda e, x, y, g: e.mul(g, e.math("cosh", x))),
    "cosh": _unary(lambda e, x, y, g: e.mul(g, e.math("sinh", x))),
    "tanh": _unary(lambda e, x, y, g: e.mul(g, e.sub(1.0, e.mul(y, y)))),
    "asinh": _unary(lambda e, x, y, g: e.div(g, _rsqrt_of(e, e.add(e.mul(x, x), 1.0)))),
    "acosh": _unary(lambda e, x, y, g: e.div(g, _rsqrt_of(e, e.sub(e.mul(x, x), 1.0)))),
    "atanh": _unary(lambda e, x, y, g: e.div(g, e.sub(1.0, e.mul(x, x)))),
    "cbrt": _unary(lambda e, x, y, g: e.div(g, e.mul(e.mul(y, y), 3.0))),
    "fabs": _unary(lambda e, x, y, g: sign_times(e, x, g)),
    "erf": _unary(lambda e, x, y, g: e.mul(g, e.mul(
        e.math("exp", e.neg(e.mul(x, x))), TWO_OVER_SQRT_PI))),
    "erfc": _unary(lambda e, x, y, g: e.neg(e.mul(g, e.mul(
        e.math("exp", e.neg(e.mul(x, x))), TWO_OVER_SQRT_PI)))),
}


def _atan2(e, op, args, out, g):
    """atan2(y, x): d/dy = x / (x² + y²), d/dx = -y / (x² + y²)."""
    y, x = args
    s = e.div(g, e.add(e.mul(x, x), e.mul(y, y)))
    return [e.mul(s, x), e.neg(e.mul(s, y))]


def _hypot(e, op, args, out, g):
    """hypot(a, b) = |(a, b)|: d/da = a / out; the Euclidean norm at 0 has gradient 0."""
    a, b = args
    at0 = e.cmp("eq", out, 0.0)
    s = e.div(g, e.select(at0, 1.0, out))
    return [e.where_zero(at0, e.mul(s, a)), e.where_zero(at0, e.mul(s, b))]


def _copysign(e, op, args, out, g):
    """copysign(a, b) = |a| with b's sign: d/da = sign(a) * sign(out) (0 at a = 0, as
    abs); the sign carries no gradient."""
    a, b = args
    flip = e.cmp("ne", e.cmp("lt", a, 0.0), e.cmp("lt", out, 0.0))
    da = e.select(flip, e.neg(g), g)
    return [e.where_zero(e.cmp("eq", a, 0.0), da), None]


MATH_RULES.update({"atan2": _atan2, "hypot": _hypot, "copysign": _copysign,
                   "pow": pow_, "fmod": fmod})

#: opcode -> rule (the scalar opcodes with a float result)
OPCODE_RULES = {"add": add, "sub": sub, "mul": mul, "truediv": truediv, "neg": neg,
                "abs": abs_, "max": max_, "min": min_, "pow": pow_, "mod": mod,
                "cast": cast, "select": select}
