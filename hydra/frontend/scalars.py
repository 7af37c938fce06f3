"""Scalar rules for the builder where Python and NumPy differ on one operation, each
decided by whether a value is a Python scalar (weak) or a NumPy scalar (strong), as
the undecorated function decides it lane by lane:

- arithmetic on bools: two Python bools compute as Python ints (``True + True`` is 2);
  where either is a NumPy bool (a comparison of NumPy values), NumPy's bool loops run:
  ``+`` is a logical or, ``*`` a logical and, ``-`` a ``TypeError`` as in NumPy, and
  ``//``, ``%``, ``**``, ``<<``, ``>>`` give ``int8``.
"""

from __future__ import annotations

from ..errors import CompileTypeError, Loc
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


class ScalarRulesMixin:
    """Bool arithmetic; mixed into ``Builder``."""

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
