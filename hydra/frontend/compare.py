"""Comparisons for the builder: chains (``a < b < c``, ``b`` evaluated once, ``c`` only
where ``a < b``), ``is``/``in``/static strings (``idioms.compare_special``), and numbers
compared as NumPy 2 does (integers by value, whatever their types; a uint64 against a
signed integer exactly); a comparison of Python numbers is a Python bool, one of NumPy
values a NumPy bool."""

from __future__ import annotations

import ast
import operator

from ..errors import CompileError, Loc
from ..ir.core import Value
from ..types import BOOL, INT64, UINT64, WEAK_BOOL, ScalarType, promote
from .arrayops import is_array

CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_PYTHON_COMPARE = {name: getattr(operator, name) for name in CMPOPS.values()}


class CompareMixin:
    """Comparison translation; mixed into ``Builder``."""

    def expr_compare(self, node: ast.Compare):
        return self.compare_chain(self.expr(node.left), list(zip(node.ops, node.comparators)),
                                  self.loc(node))

    def compare_chain(self, left, rest, loc: Loc) -> Value:
        op, right_node = rest[0]
        right = self.expr(right_node)
        result = self.compare_special(op, left, right, loc)  # is, in, static strings
        if result is None and type(op) not in CMPOPS:
            raise CompileError(f"comparison {type(op).__name__} is not supported", loc)
        if result is None:
            result = self.compare(CMPOPS[type(op)], left, right, loc)
        if len(rest) == 1:
            return result
        # a < b < c is a < b and b < c, with b evaluated once and c only where a < b.
        return self.if_value(result, lambda: self.compare_chain(right, rest[1:], loc),
                             lambda: self.const(False, loc), loc)

    def compare(self, name: str, a, b, loc: Loc) -> Value:
        if is_array(a) or is_array(b):
            return self.array_arith(name, a, b, loc)
        for v in (a, b):
            if not isinstance(v, Value) or not isinstance(v.type, ScalarType):
                raise CompileError(f"cannot compare {self.describe(a)} and {self.describe(b)}",
                                   loc)
        # a comparison of Python numbers is a Python bool, one of NumPy values a NumPy bool
        rt = WEAK_BOOL if a.type.weak and b.type.weak else BOOL
        x, y = self.constant_value(a), self.constant_value(b)
        if x is not None and y is not None and a.type.kind in "iub" and b.type.kind in "iub":
            # integers compare by value in NumPy 2 whatever their types, as in Python
            return self.const(bool(_PYTHON_COMPARE[name](int(x), int(y))), loc, rt)
        if self._unsigned64(a) and self._maybe_negative(b) or \
                self._unsigned64(b) and self._maybe_negative(a):
            return self.compare_signed_unsigned(name, a, b, loc, rt)
        t = promote(a.type, b.type)
        for v in (a, b):
            # NumPy 2 compares a Python int with any integer by value: do so in int64,
            # which holds every value of the narrower types (signed against uint64 went
            # above), or in uint64 for a constant from 2**63 on (the other is unsigned)
            if self._out_of_range(v, t) is not None or (
                    v.type.weak and v.type.kind == "i" and self.constant_value(v) is None
                    and t.kind in "iu" and not t.weak and t.bits < 64):
                t = UINT64 if self._unsigned64(a) or self._unsigned64(b) else INT64
        return self.emit(name, [self.coerce(a, t, loc), self.coerce(b, t, loc)], rt, loc)

    def _unsigned64(self, v: Value) -> bool:
        """A uint64, or a Python int constant only uint64 holds (2**63 and up)."""
        if v.type.kind == "u" and v.type.bits == 64:
            return True
        c = self.constant_value(v)
        return v.type.weak and isinstance(c, int) and c >= 2**63

    def _maybe_negative(self, v: Value) -> bool:
        """A signed integer that is not a known non-negative constant."""
        if v.type.kind != "i":
            return False
        c = self.constant_value(v)
        return not (isinstance(c, int) and c >= 0)

    def compare_signed_unsigned(self, name: str, a: Value, b: Value, loc: Loc,
                                rt: ScalarType = BOOL) -> Value:
        """An exact comparison of a uint64 with a signed integer, as NumPy 2 makes it
        (promoting both to float64 would call 2**63 equal to 2**63 - 1): a negative
        signed value is below every uint64; otherwise both compare as uint64."""
        u_first = self._unsigned64(a) and self._maybe_negative(b)
        u, s = (a, b) if u_first else (b, a)
        u, s = self.coerce(u, UINT64, loc), self.coerce(s, INT64, loc)
        negative = self.emit("lt", [s, self.const(0, loc, INT64)], BOOL, loc)
        as_u = self.coerce(s, UINT64, loc)
        same = self.emit(name, [u, as_u] if u_first else [as_u, u], BOOL, loc)
        # the result where s < 0, s being below u: stays an op on u, so that a varying u
        # gives a varying result even when s is a constant
        if name in (("gt", "ge", "ne") if u_first else ("lt", "le", "ne")):
            return self.emit("bitor", [negative, same], rt, loc)
        return self.emit("bitand", [self.emit("not", [negative], BOOL, loc), same], rt, loc)
