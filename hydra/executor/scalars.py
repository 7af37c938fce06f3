"""The scalar half of the host rules' NumPy: the ufunc of each binary, comparison and
math opcode, C's ``pow`` and float -> unsigned conversion spelled out for every lane,
and how one lane's values print (``python_scalar``, ``format_print``).

Takes: NumPy arrays of one entry per lane (or NumPy scalars standing for every lane).
Guarantees: the bits the per-example Python function gives, on every backend's host
side (``rules`` computes with these; so do the planned steps that skip a rule's
dispatch, ``rowsteps``).
"""

from __future__ import annotations

import math

import numpy as np

from ..batching import UFUNCS
from ..registry import records
from ..trees import unflatten
from ..types import ArrayType, ScalarType

#: the opcodes that are their array functions' ufunc (in the result's dtype), comparisons
BINARY = {name: UFUNCS[name] for name in ("add", "sub", "mul", "truediv", "lshift", "rshift",
                                          "bitand", "bitor", "bitxor")}
COMPARE = {name: UFUNCS[name] for name in ("lt", "le", "gt", "ge", "eq", "ne")}


def _c_semantics(f, pole):
    """``f`` (math.gamma, math.lgamma) with C's values where Python raises: ``pole`` at
    0 and the negative integers, inf where the result overflows (NumPy-style: no
    exception, as for every math function in a kernel)."""
    def g(x):
        try:
            return f(x)
        except ValueError:  # a pole
            return pole(x)
        except OverflowError:
            return math.inf
    return np.frompyfunc(g, 1, 1)


_gamma = _c_semantics(math.gamma, lambda x: math.copysign(math.inf, x) if x == 0 else
                      math.nan)
_lgamma = _c_semantics(math.lgamma, lambda x: math.inf)
_erf = np.frompyfunc(math.erf, 1, 1)
_erfc = np.frompyfunc(math.erfc, 1, 1)
#: each ``math`` fn's NumPy ufunc (its record's definition), and C's function where
#: NumPy's differs (pow) or where NumPy has none
MATH = {
    **{r.name: r.definition for r in records("math")},
    "pow": lambda a, b: power(a, b, None),
    "erf": lambda x: _erf(np.asarray(x, np.float64)).astype(np.float64),
    "erfc": lambda x: _erfc(np.asarray(x, np.float64)).astype(np.float64),
    "gamma": lambda x: _gamma(np.asarray(x, np.float64)).astype(np.float64),
    "lgamma": lambda x: _lgamma(np.asarray(x, np.float64)).astype(np.float64),
}


def power(a, b, dtype):
    """``a ** b`` as C's pow computes it for every lane.  NumPy turns a scalar exponent
    of 0.5, 2, -1 ... into sqrt, square, reciprocal (a different rounding than pow), so
    the exponent always goes in as a full array: a uniform exponent then gives the same
    bits as a varying one, and as Python's ``**``."""
    a = np.asarray(a)
    b = np.asarray(b)
    shape = np.broadcast_shapes(a.shape, b.shape, (1,))
    # a real copy: NumPy also takes the shortcut for a stride-0 (broadcast) exponent
    return np.power(a, np.broadcast_to(b, shape).copy(), dtype=dtype)


def float_to_unsigned(x, dtype: np.dtype):
    """float -> uint32/uint64 as NumPy computes it on x86-64 (C's conversion, which NumPy
    leaves undefined for NaN and out-of-range values): below 2**(B-1) a signed
    truncation, from there one of x - 2**(B-1) with the top bit flipped, where the
    signed truncation of NaN and out-of-range values is the minimum (cvttsd2si).
    Spelled out so that every backend and machine gives the same bits."""
    bits = dtype.itemsize * 8
    signed = np.dtype(f"int{bits}")
    half = 2.0 ** (bits - 1)
    x = np.asarray(x, np.float64)

    def truncate(y):
        inside = (y >= -half) & (y < half)
        return np.where(inside, np.where(inside, y, 0.0).astype(signed), signed.type(-half))
    high = truncate(x - half) ^ signed.type(-half)
    return np.where(x >= half, high, truncate(x)).astype(signed).astype(dtype)


def python_scalar(value, t: ScalarType):
    """A lane's value as the Python object plain Python would hold: int64, float64 and
    bool as ``int``/``float``/``bool``, other NumPy types as NumPy scalars."""
    if t.name in ("int64", "float64", "bool"):
        return value.item()
    return t.dtype.type(value)


def format_print(parts, values, lane: int, types) -> list[str]:
    """The strings print() gets for one lane (the print op's ``parts`` template)."""
    def lane_value(i):
        v = values[i]
        if isinstance(types[i], ArrayType):
            return v[lane]  # a per-lane array's row (uniform ones come broadcast)
        v = v[lane] if np.ndim(v) else v
        return python_scalar(np.asarray(v), types[i])

    def render(part):
        kind = part[0]
        if kind == "str":
            return part[1]
        if kind == "val":
            return lane_value(part[1])
        if kind == "tuple":
            return tuple(render(p) for p in part[1])
        if kind == "tree":  # a list, dict, namedtuple or dataclass: Python prints it
            return unflatten(part[1], [render(p) for p in part[2]])
        out = []
        for piece in part[1]:
            if isinstance(piece, str):
                out.append(piece)
                continue
            _, inner, conv, spec = piece
            v = render(inner)
            v = repr(v) if conv == "r" else (str(v) if conv == "s" else v)
            out.append(format(v, spec))
        return "".join(out)
    return [render(p) for p in parts]
