"""Scalar rules for the builder where Python and NumPy differ on one operation, each
decided by whether a value is a Python scalar (weak) or a NumPy scalar (strong), as
the undecorated function decides it lane by lane:

- arithmetic on bools: two Python bools compute as Python ints (``True + True`` is 2);
  where either is a NumPy bool (a comparison of NumPy values), NumPy's bool loops run:
  ``+`` is a logical or, ``*`` a logical and, ``-`` a ``TypeError`` as in NumPy, and
  ``//``, ``%``, ``**``, ``<<``, ``>>`` give ``int8``;
- ``int(x)``, ``round(x)`` and ``math.floor/ceil/trunc`` of a float make a Python int,
  so NaN is a ``ValueError`` and an infinity or a value beyond int64 (hydra's Python
  ints are 64-bit) an ``OverflowError``, naming the line and the lane: ``check`` ops
  before the cast (SPEC section 6), where a NumPy cast (``np.int64(x)``) keeps
  NumPy's unchecked conversion;
- an integer raised to a negative integer power is a ``ValueError`` naming the lane,
  as NumPy raises (a ``check`` op), or a ``CompileError`` for a constant exponent.
"""

from __future__ import annotations

import math

from ..errors import CompileError, CompileTypeError, Loc
from ..ir.core import Value
from ..types import BOOL, WEAK_INT, ScalarType

#: NumPy's own words for the operations its bool loops refuse
_NUMPY_BOOL_REFUSES = {
    "sub": "numpy boolean subtract, the `-` operator, is not supported, use the bitwise_xor, "
           "the `^` operator, or the logical_xor function instead.",
    "neg": "The numpy boolean negative, the `-` operator, is not supported, use the `~` "
           "operator or the logical_not function instead.",
    "pos": "numpy boolean positive, the unary `+` operator, is not supported (NumPy raises "
           "TypeError)",
}
#: the ops NumPy's bool loops compute as a logical op, and the ones that give int8
_NUMPY_BOOL_LOGICAL = {"add": "bitor", "mul": "bitand"}
_NUMPY_BOOL_INT8 = ("floordiv", "mod", "pow", "lshift", "rshift")
_INT64_LIMIT = 2.0 ** 63


class ScalarRulesMixin:
    """Bool arithmetic, checked conversions to Python ints, integer powers; mixed into
    ``Builder``."""

    def bool_arith(self, name: str, t: ScalarType, loc: Loc) -> tuple[str, ScalarType]:
        """(opcode, result type) of ``name`` on operands promoted to the bool ``t``."""
        if name in ("bitand", "bitor", "bitxor", "min", "max"):
            return name, t
        if t.weak:  # two Python bools: Python ints
            return name, WEAK_INT
        if name in _NUMPY_BOOL_REFUSES:
            raise CompileTypeError(_NUMPY_BOOL_REFUSES[name], loc,
                                   hint="a comparison of NumPy values is a NumPy bool; "
                                        "int(c) makes it a Python int")
        if name in _NUMPY_BOOL_LOGICAL:
            return _NUMPY_BOOL_LOGICAL[name], BOOL
        return name, ScalarType("int8") if name in _NUMPY_BOOL_INT8 else t

    def bool_unary(self, name: str, v: Value, loc: Loc) -> Value:
        """``-v``, ``+v`` or ``abs(v)`` of a bool: Python's ints for a Python bool, NumPy's
        loops (``abs`` keeps it, ``-`` and ``+`` are refused) for a NumPy bool."""
        if not v.type.weak:
            if name == "abs":
                return v
            raise CompileTypeError(_NUMPY_BOOL_REFUSES[name], loc,
                                   hint="~ is the logical not of a NumPy bool; int(c) "
                                        "makes it a Python int")
        v = self.coerce(v, WEAK_INT, loc)
        return v if name == "pos" else self.emit(name, [v], WEAK_INT, loc)

    def python_int(self, v: Value, loc: Loc) -> Value:
        """The Python int of the float ``v`` (truncated toward zero), checked as Python
        checks it; hydra's Python ints are int64, so beyond that is an OverflowError.
        One compare a lane (NaN fails it too) and one any-lane test where all is well:
        the checks that tell NaN from an infinity from a large float run only where a
        lane failed (an ``if``, skipped at run time when no lane enters it)."""
        c = self.constant_value(v)
        if c is not None and math.isfinite(c) and -_INT64_LIMIT <= c < _INT64_LIMIT:
            return self.const(int(c), loc, WEAK_INT)
        t = v.type
        magnitude = self.emit("math", [v], t, loc, {"fn": "fabs"})
        limit = self.const(_INT64_LIMIT, loc, t)
        fits = self.emit("lt", [magnitude, limit], BOOL, loc)  # NaN fails it too

        def failed():  # -2**63 itself fits: it passes the last check
            for kind, ok, message in (
                    ("value", self.emit("eq", [v, v], BOOL, loc),
                     "cannot convert float NaN to integer"),
                    ("overflow", self.emit("ne", [magnitude, self.const(math.inf, loc, t)],
                                           BOOL, loc),
                     "cannot convert float infinity to integer"),
                    ("overflow", self.emit("eq", [v, self.const(-_INT64_LIMIT, loc, t)], BOOL,
                                           loc),
                     "cannot convert a float beyond int64 to integer (hydra's Python ints "
                     "are 64-bit)")):
                self.emit_op("check", [ok], [], loc, {"kind": kind, "message": message})
            return ()
        self.if_value(self.logical_not(fits, loc), failed, lambda: (), loc)
        return self.emit("cast", [v], WEAK_INT, loc)

    def check_exponent(self, base: Value, exponent: Value, t: ScalarType, loc: Loc) -> None:
        """``base ** exponent`` in the signed integer type ``t``: a negative exponent is
        NumPy's ValueError, at compile time where the exponent is a constant."""
        if t.kind != "i" or exponent.type.kind in "bu":
            return
        c = self.constant_value(exponent)
        message = "Integers to negative integer powers are not allowed."
        if c is not None:
            if c < 0:
                n = f" ** {-c}" if c != -1 else ""
                raise CompileError(message, loc, hint=f"for the float that Python's ** gives, "
                                   f"write 1 / {self.describe_operand(base)}{n}")
            return
        zero = self.const(0, loc, t)
        ok = self.emit("ge", [self.coerce(exponent, t, loc), zero], BOOL, loc)
        self.emit_op("check", [ok], [], loc, {"kind": "value", "message": message})

    def describe_operand(self, v: Value) -> str:
        """How a hint names the operand ``v``: its variable's name where one holds it,
        a constant's value."""
        c = self.constant_value(v)
        if c is not None:
            return repr(c)
        for name, value in self.frame.env.items():
            if value is v and name.isidentifier():
                return name
        return "x"
