"""Hydra's value types and NumPy 2 promotion with weak Python scalars.

Scalars are NumPy dtypes.  A *weak* scalar (a Python ``int``/``float`` literal,
module constant or argument) takes the type of the NumPy value it meets, as in
NumPy 2 (NEP 50): ``float32 * 2.0`` is ``float32``, ``int32 + 1`` is ``int32``.
NumPy scalars (``np.float64(2.0)``, ``np.int64(1)``) are strong, as in NumPy 2.
A Python ``bool`` (``True``, a comparison of Python numbers, ``not x``, ``bool(x)``)
is weak too: ``True + True`` is the Python int 2, where two NumPy bools (comparisons
of NumPy values) add as a logical or.
Weak types left at the end of inference are their Python defaults (int64, float64).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class Type:
    """Base of all hydra types."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ScalarType(Type):
    name: str  # a NumPy dtype name: "bool", "int32", "float64", ...
    weak: bool = False

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.name)

    @property
    def kind(self) -> str:
        """'b' bool, 'i' signed, 'u' unsigned, 'f' float."""
        return self.dtype.kind

    @property
    def bits(self) -> int:
        return 1 if self.name == "bool" else self.dtype.itemsize * 8

    def strong(self) -> ScalarType:
        return ScalarType(self.name) if self.weak else self

    def __str__(self) -> str:
        return f"weak {self.name}" if self.weak else self.name


@dataclass(frozen=True, slots=True)
class ArrayType(Type):
    """An array of ``ndim`` axes.  ``shape`` is the (per-lane) shape where it is known at
    specialization (SPEC section 8: whole-array operations need it); None where the
    kernel only indexes the array, so such kernels do not recompile per array size."""

    dtype: ScalarType
    ndim: int
    shape: tuple[int, ...] | None = None

    def __str__(self) -> str:
        if self.shape is None:
            return f"array[{self.dtype.name}, {self.ndim}d]"
        return f"array[{self.dtype.name}, {self.shape}]"

    def unshaped(self) -> "ArrayType":
        return ArrayType(self.dtype, self.ndim)


@dataclass(frozen=True, slots=True)
class TupleType(Type):
    elems: tuple[Type, ...]

    def __str__(self) -> str:
        return "(" + ", ".join(map(str, self.elems)) + ("," if len(self.elems) == 1 else "") + ")"


@dataclass(frozen=True, slots=True)
class TreeType(Type):
    """A container argument (tuple, list, dict, namedtuple, dataclass; ``hydra.trees``):
    its structure, with the values of its static leaves, and its leaves' types in
    ``trees.flatten`` order.  Both are part of a kernel's specialization key."""

    treedef: object  # a hydra.trees.TreeDef
    leaves: tuple[Type, ...]

    def __str__(self) -> str:
        from .trees import show
        return show(self.treedef, [str(t) for t in self.leaves])


BOOL = ScalarType("bool")
INT64 = ScalarType("int64")
UINT64 = ScalarType("uint64")
FLOAT32 = ScalarType("float32")
FLOAT64 = ScalarType("float64")
WEAK_BOOL = ScalarType("bool", weak=True)
WEAK_INT = ScalarType("int64", weak=True)
WEAK_FLOAT = ScalarType("float64", weak=True)

SCALAR_NAMES = (
    "bool", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64", "float32", "float64",
)


def scalar(name_or_dtype) -> ScalarType:
    try:  # every call of a kernel types its arguments: ~1 us saved per argument
        return _SCALARS[name_or_dtype]
    except (KeyError, TypeError):
        pass
    name = np.dtype(name_or_dtype).name
    if name not in SCALAR_NAMES:
        raise TypeError(f"unsupported scalar type {name}")
    t = _SCALARS[name_or_dtype] = ScalarType(name)
    return t


#: ``scalar``'s answers by its argument (dtypes, names, NumPy scalar types: hashable)
_SCALARS: dict = {}


def promote(a: ScalarType, b: ScalarType) -> ScalarType:
    """NumPy 2 promotion of two scalar types, weak scalars yielding to strong ones."""
    if a.weak and b.weak:
        if a.kind == "f" or b.kind == "f":
            return WEAK_FLOAT
        if a.kind == "b" and b.kind == "b":
            return WEAK_BOOL
        return WEAK_INT
    if a.weak or b.weak:
        weak, strong = (a, b) if a.weak else (b, a)
        if weak.kind == "f" and strong.kind in "biu":
            return FLOAT64
        if weak.kind == "i" and strong.kind == "b":
            return INT64
        return strong
    return ScalarType(np.promote_types(a.dtype, b.dtype).name)


def join(a: Type, b: Type) -> Type | None:
    """The type of a variable that holds an ``a`` on one path and a ``b`` on another.

    Returns None where no such type exists (a tuple on one path, a number on the other).
    """
    if a == b:
        return a
    if isinstance(a, ScalarType) and isinstance(b, ScalarType):
        if a.kind == "b" and b.kind != "b" or b.kind == "b" and a.kind != "b":
            return None
        return promote(a, b)
    if isinstance(a, ArrayType) and isinstance(b, ArrayType) and a.dtype == b.dtype \
            and a.ndim == b.ndim and None in (a.shape, b.shape):
        return a.unshaped()
    if isinstance(a, TupleType) and isinstance(b, TupleType) and len(a.elems) == len(b.elems):
        elems = [join(x, y) for x, y in zip(a.elems, b.elems)]
        return None if any(e is None for e in elems) else TupleType(tuple(elems))
    return None


def finalize(t: Type) -> Type:
    """Weak types become their Python defaults."""
    if isinstance(t, ScalarType):
        return t.strong()
    if isinstance(t, TupleType):
        return TupleType(tuple(finalize(e) for e in t.elems))
    return t


def typeof_python(value) -> Type | None:
    """The hydra type of a Python/NumPy value, or None if unsupported."""
    if isinstance(value, bool):
        return WEAK_BOOL
    # NumPy scalars first: np.float64 subclasses float, but it is strong (NEP 50)
    if isinstance(value, (np.generic, np.ndarray)):
        try:
            t = scalar(value.dtype)
        except TypeError:
            return None
        return ArrayType(t, value.ndim) if isinstance(value, np.ndarray) else t
    if isinstance(value, int):
        return WEAK_INT
    if isinstance(value, float):
        return WEAK_FLOAT
    if isinstance(value, tuple):
        elems = [typeof_python(v) for v in value]
        return None if any(e is None for e in elems) else TupleType(tuple(elems))
    return None
