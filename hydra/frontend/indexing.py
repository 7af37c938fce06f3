"""Subscripts for the builder: an element (``a[i, j]``, one integer per axis: ``load`` and
``store`` ops), a sub-array (slices, fewer integers than axes, ``None``: the ``array``
op ``getitem`` and ``array_store``), ``W[i][j] = v`` and ``a += b`` on an array; an
integer array or a mask as an index is ``fancy``'s.

Takes evaluated bases and the index's AST; gives the loaded value or emits the store,
checked as NumPy checks it (the number of indices, integers only, a uint64 index of
2**63 or more out of bounds, a stored value that broadcasts to its place).
"""

from __future__ import annotations

import ast

import numpy as np

from ..batching import result_type
from ..errors import CompileError, Loc
from ..ir.core import Value
from ..types import BOOL, INT64, ArrayType, ScalarType, scalar
from .arrayops import is_array
from .common import Meta
from .containers import is_node
from .fancy import FancyIndex


class ArrayIndex:
    """An index that is not one integer per axis: slices, fewer integers than axes,
    ``None``: the static ``spec`` and the integer operands that fill it."""

    def __init__(self, spec: tuple, ints: list[Value]) -> None:
        self.spec = spec
        self.ints = ints


class IndexMixin:
    """Loads and stores through subscripts; mixed into ``Builder``."""

    def subscript_parts(self, node: ast.Subscript) -> tuple[Value, list[Value]]:
        loc = self.loc(node)
        if isinstance(node.value, ast.Subscript):  # W[i][j] = v
            inner = node.value
            at = self.loc(inner)
            outer = self.expr(inner.value)
            if isinstance(outer, Value) and isinstance(outer.type, ArrayType):
                index = self.indices(outer, inner.slice, at)
                base = self.load(outer, index, at)
                composed = self._composed(outer, index, base, node.slice, loc)
                if composed is not None:
                    return composed
            else:
                base = self.subscript_of(outer, inner, at)
        else:
            base = self.expr(node.value)
        if not isinstance(base, Value) or not isinstance(base.type, ArrayType):
            self.read_only_error(base, "an item", loc)
            raise CompileError(f"cannot assign to an item of {self.describe(base)}", loc)
        return base, self.indices(base, node.slice, loc)

    def _composed(self, outer: Value, index, view, node_slice, loc: Loc):
        """``W[i][j] = v`` as ``W[i, j] = v`` where ``W[i]`` takes integers only: the same
        place per NumPy (``W[i]`` is a view), and a store into ``W`` itself, which hydra
        makes even where ``W[i]`` alone would be a per-lane gather (a varying ``i``).
        None where the inner index is anything else (slices, ``None``)."""
        if not isinstance(index, ArrayIndex) or any(item[0] != "int" for item in index.spec) \
                or not isinstance(view, Value) or not isinstance(view.type, ArrayType):
            return None
        inner = self.indices(view, node_slice, loc)
        if isinstance(inner, ArrayIndex):
            return outer, ArrayIndex(tuple(index.spec) + tuple(inner.spec),
                                     list(index.ints) + list(inner.ints))
        return outer, list(index.ints) + list(inner)

    def indices(self, array: Value, index: ast.expr, loc: Loc) -> list[Value]:
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        raw = tuple(self.slice_value(p, loc) if isinstance(p, ast.Slice)
                    else self.list_or_expr(p) for p in parts)  # a[[0, 2]]: a list
        raw = raw if isinstance(index, ast.Tuple) else raw[0]
        fancy = self.fancy_index(array, raw, loc)  # an integer array or a mask in it
        if fancy is not None:
            return fancy
        whole = self.array_index(array, raw, loc)
        if whole is not None:
            return whole
        out = []  # one number per axis (array_index took any other index)
        for axis, v in enumerate(raw if isinstance(raw, tuple) else [raw]):
            if v.type.kind not in "iub":
                raise CompileError(f"array indices must be integers, not {self.describe(v)}", loc)
            if v.type.name == "uint64":
                # indices are int64 from here on: 2**63 and up would wrap to negative
                # indices and count from the end; NumPy calls them out of bounds
                small = self.emit("lt", [v, self.const(2**63, loc, v.type)], BOOL, loc)
                self.emit_op("check", [small], [], loc, {
                    "kind": "index",
                    "message": f"index out of bounds for axis {axis}: a uint64 index of "
                               f"2**63 or more"})
            out.append(self.coerce(v, INT64, loc))
        return out

    def expr_subscript(self, node: ast.Subscript):
        return self.subscript_of(self.expr(node.value), node, self.loc(node))

    def subscript_of(self, base, node: ast.Subscript, loc: Loc):
        """``base[...]`` of an evaluated ``base``: a tuple's item, an array's element or
        sub-array."""
        if is_node(base):
            return self.container_item(base, node, loc)
        if isinstance(base, Meta) and isinstance(base.obj, (list, dict, set)):
            raise CompileError(f"{self.describe(base)} cannot be indexed in a kernel", loc,
                               hint="make it a NumPy array at module level "
                                    "(name = np.array([...]), captured when the kernel "
                                    "compiles), or a tuple")
        if not isinstance(base, Value) or not isinstance(base.type, ArrayType):
            raise CompileError(f"{self.describe(base)} cannot be indexed", loc)
        return self.load(base, self.indices(base, node.slice, loc), loc)

    def load(self, array: Value, indices: list[Value], loc: Loc) -> Value:
        if isinstance(indices, FancyIndex):
            return self.fancy_load(array, indices, loc)
        if isinstance(indices, ArrayIndex):
            return self.array_load(array, indices, loc)
        return self.emit("load", [array, *indices], array.type.dtype, loc)

    def store(self, array: Value, indices: list[Value], value, loc: Loc) -> None:
        if isinstance(indices, FancyIndex):
            raise CompileError("a store through an integer array index or a mask is not "
                               "supported", loc,
                               hint="a = np.where(mask, value, a) for a mask; a loop "
                                    "for a[idx[j]] = v[j]")
        whole = isinstance(indices, ArrayIndex) or is_array(value)
        if not whole and not (isinstance(value, Value) and isinstance(value.type, ScalarType)):
            raise CompileError(f"cannot store {self.describe(value)} into an array element", loc)
        if whole or array.id in self.readonly_ids:  # (an element store of a read-only view)
            if not isinstance(indices, ArrayIndex):
                indices = ArrayIndex((("int",),) * len(indices), indices)
            return self.array_store(array, indices, value, loc)
        value = self.coerce(value, array.type.dtype, loc)
        self.emit_op("store", [array, *indices, value], [], loc)

    def array_index(self, array: Value, raw, loc: Loc) -> ArrayIndex | None:
        """The index as an ``ArrayIndex`` unless it is one integer per axis."""
        items = list(raw) if isinstance(raw, tuple) else [raw]
        if all(isinstance(v, Value) and isinstance(v.type, ScalarType) for v in items) \
                and len(items) == array.type.ndim:
            return None
        spec, ints = [], []
        for v in items:
            if isinstance(v, slice):
                spec.append(("slice", v.start, v.stop, v.step))
            elif v is None or isinstance(v, Meta) and v.obj is None:
                spec.append(("none",))
            elif isinstance(v, Meta) and v.obj is Ellipsis:
                spec.append(("ellipsis",))
            elif isinstance(v, Value) and isinstance(v.type, ScalarType) and v.type.kind in "iub":
                spec.append(("int",))
                ints.append(self.coerce(v, scalar("int64"), loc))
            else:
                raise CompileError(f"array indices must be integers or slices, not "
                                   f"{self.describe(v)}", loc)
        return ArrayIndex(tuple(spec), ints)

    def slice_value(self, node, loc: Loc) -> slice:
        return slice(*(None if part is None else self._static_int(self.expr(part), "a slice bound",
                                                                  loc)
                       for part in (node.lower, node.upper, node.step)))

    def array_load(self, array: Value, index: ArrayIndex, loc: Loc) -> Value:
        return self.array_op("getitem", [array, *index.ints], loc, index=index.spec)

    def array_update(self, array, value, loc: Loc) -> bool:
        """``a += b`` on an array: NumPy writes the result into ``a`` itself (an argument's
        row, a view, an alias all see it), so it is a store of ``a + b`` into every element
        of ``a``, under NumPy's rules (the same shape, a ``same_kind`` cast).  False where
        ``array`` is not an array (the name is rebound, as for numbers)."""
        if not (is_array(array) and is_array(value)) or array.type.shape is None:
            return False
        if tuple(value.type.shape) != tuple(array.type.shape):
            raise CompileError(f"an augmented assignment writes its result into the array: "
                               f"shape {value.type.shape} does not fit the array's "
                               f"{array.type.shape}", loc)
        src, dst = value.type.dtype.dtype, array.type.dtype.dtype
        if not np.can_cast(src, dst, casting="same_kind"):
            raise CompileError(f"an augmented assignment writes its result into the array: "
                               f"{src} cannot be cast to the array's {dst} (NumPy's "
                               f"same_kind rule)", loc,
                               hint=f"a = a + b (not a += b) makes a new {src} array")
        full = ArrayIndex((("slice", None, None, None),) * array.type.ndim, [])
        self.array_store(array, full, value, loc)
        return True

    def array_store(self, array: Value, index: ArrayIndex, value, loc: Loc) -> None:
        if array.id in self.readonly_ids:
            raise CompileError("this array is a read-only view (np.diag of a matrix is "
                               "NumPy's read-only view of its diagonal): NumPy raises "
                               "ValueError on a store into it", loc,
                               hint="np.diag(a).copy() is an array of its own")
        self._check_shaped(array, "a store into an array", loc)
        self._check_shaped(value, "a store into an array", loc)
        place = result_type("getitem", [array.type] + [i.type for i in index.ints],
                            {"index": index.spec})
        sub = place.shape if isinstance(place, ArrayType) else ()
        if not isinstance(value, Value):
            raise CompileError(f"cannot store {self.describe(value)} into an array", loc)
        if isinstance(value.type, ScalarType):
            value = self.coerce(value, array.type.dtype, loc)
        else:
            try:
                # the value broadcasts to the place's shape (NumPy drops its leading 1s)
                vshape = tuple(value.type.shape)
                while len(vshape) > len(sub) and vshape[0] == 1:
                    vshape = vshape[1:]
                if np.broadcast_shapes(vshape, sub) != tuple(sub):
                    raise ValueError
            except ValueError:
                raise CompileError(f"cannot store an array of shape {value.type.shape} into a "
                                   f"place of shape {sub}", loc) from None
            if vshape != tuple(value.type.shape):  # the stores broadcast rows of sub's rank
                value = self.array_op("reshape", [value], loc, shape=vshape)
            if value.type.dtype != array.type.dtype:
                value = self.array_op("astype", [value], loc, dtype=array.type.dtype.name)
        self.emit_op("array_store", [array, value, *index.ints], [], loc,
                     {"fn": "setitem", "params": {"index": index.spec, "shape": sub}})
