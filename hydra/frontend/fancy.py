"""Indexing with integer arrays and boolean masks for the builder (SPEC section 8: a
per-lane shape never depends on data): ``a[idx]``, ``a[:, [0, 2]]``, ``a[i_arr, j_arr]``
(index arrays that broadcast, in adjacent axes: one take from the indexed axes merged
into one) and ``a[MASK]`` with a mask known when the kernel compiles (a module-level
bool array or a constant list: its indices are constants).  Every index is checked on
the active lanes (an ``IndexError`` naming the lane, as NumPy raises); a store through
such an index, a mask computed in the kernel and index arrays apart from each other
are ``CompileError``s with a supported way to write them.
"""

from __future__ import annotations

import numpy as np

from ..errors import CompileError, Loc
from ..ir.core import Value
from .common import Meta


class FancyIndex:
    """An index with integer arrays or a boolean mask in it (``a[idx]``, ``a[:, [0,
    2]]``, ``a[MASK]``): the evaluated items, and the positions of the arrays."""

    def __init__(self, items: list, arrays: list[int]) -> None:
        self.items = items
        self.arrays = arrays


_NO_MASK_HINT = ("np.where(mask, a, fill) keeps the shape; a[MASK] works where MASK is a "
                 "module-level bool array (known when the kernel compiles)")


class FancyIndexMixin:
    """Integer-array indexing whose result's shape is static, and boolean masks known
    when the kernel compiles (SPEC section 8: a per-lane shape never depends on data)."""

    def fancy_index(self, array: Value, raw, loc: Loc) -> FancyIndex | None:
        from .arrayops import ListArg
        items = list(raw) if isinstance(raw, tuple) and not isinstance(raw, ListArg) else [raw]
        adv = [k for k, v in enumerate(items) if isinstance(v, ListArg) or
               self._is_array_value(v)]
        if not adv:
            return None
        if any(v is None or v is Ellipsis or isinstance(v, Meta) for v in items):
            raise CompileError("an integer array index together with None or ... is not "
                               "supported", loc, hint="np.take(a, idx, axis=k)")
        return FancyIndex(items, adv)

    def _constant_mask(self, v, loc: Loc):
        """The bool array of a mask known when the kernel compiles, else None."""
        if isinstance(v, tuple):
            values = tuple(self._static(x, "a mask", loc) for x in v)
            flat = np.asarray(values)
            return flat if flat.dtype == np.bool_ else None
        if v.type.dtype.kind != "b":
            return None
        for op in self.entry_ops:
            if op.opcode == "global_array" and op.results[0] is v:
                return np.asarray(op.attrs["array"], bool)
        raise CompileError("a boolean mask not known when the kernel compiles (computed "
                           "in the kernel, or an argument) selects a number of elements that "
                           "depends on the data: not supported", loc, hint=_NO_MASK_HINT)

    def fancy_load(self, array: Value, index: FancyIndex, loc: Loc) -> Value:
        items = list(index.items)
        self._check_shaped(array, "indexing with an array", loc)
        ints = [k for k, v in enumerate(items) if not isinstance(v, slice)]  # arrays too
        if ints != list(range(ints[0], ints[-1] + 1)):
            raise CompileError("integer array indices apart from each other or from the "
                               "integer indices are not supported (NumPy moves their axes "
                               "first)", loc, hint="index in two steps: b = a[i, :]; "
                                                   "b[:, idx]")
        if len(index.arrays) > 1:
            return self._gather_block(array, items, ints, loc)
        p = index.arrays[0]
        idx = items[p]
        mask = self._constant_mask(idx, loc)
        if mask is not None:
            shape = tuple(array.type.shape[p:p + mask.ndim])
            if shape != mask.shape:
                raise CompileError(f"the boolean index of shape {mask.shape} does not match "
                                   f"the indexed axes' shape {shape}", loc)
            if mask.ndim > 1:
                if len(items) != 1:
                    raise CompileError("a boolean mask of several axes together with other "
                                       "indices is not supported", loc, hint=_NO_MASK_HINT)
                array = self.array_op("reshape", [array], loc, shape=(
                    int(np.prod(shape, dtype=np.int64)),) + tuple(array.type.shape[mask.ndim:]))
            idx = self.from_python(np.flatnonzero(mask), "mask", loc)
        else:
            idx = self._index_array(idx, loc)
        items[p] = slice(None)
        view = self._basic_part(array, items, loc)
        axis = sum(1 for v in items[:p] if isinstance(v, slice))
        self._check_shaped(idx, "indexing with an array", loc)
        out = self.array_op("take", [view, idx], loc, axis=axis)
        self._check_indices(idx, view.type.shape[axis], p, loc)
        return out

    def _basic_part(self, array: Value, items: list, loc: Loc) -> Value:
        """``array`` indexed by the basic items (the arrays' places full slices)."""
        if all(isinstance(v, slice) and v == slice(None) for v in items):
            return array
        return self.array_load(array, self.array_index(array, tuple(items), loc), loc)

    def _gather_block(self, array: Value, items: list, block: list[int], loc: Loc) -> Value:
        """``a[i, j]`` with index arrays (and integers) that broadcast, in adjacent axes:
        one take along those axes merged into one, at the flat index ``i * n_j + j``
        (each index checked against its own axis, negative ones counted from its end)."""
        shape = tuple(array.type.shape)
        flat = None
        for k in block:
            idx = items[k]
            if isinstance(idx, tuple) or self._is_array_value(idx):
                if self._constant_mask(idx, loc) is not None:
                    raise CompileError("a boolean mask together with other array indices is "
                                       "not supported", loc, hint=_NO_MASK_HINT)
                idx = self._index_array(idx, loc)
                self._check_shaped(idx, "indexing with an array", loc)
            if shape[k] == 0:
                raise CompileError(f"an index into axis {k}, which is empty", loc)
            self._check_indices(idx, shape[k], k, loc)
            size = self.const(shape[k], loc)
            at = self.arith("mod", idx, size, loc)  # in 0..n-1 once checked: -1 is n - 1
            flat = at if flat is None else \
                self.arith("add", self.arith("mul", flat, size, loc), at, loc)
            items[k] = slice(None)
        view = self._basic_part(array, items, loc)
        q = sum(1 for v in items[:block[0]] if isinstance(v, slice))
        vs = tuple(view.type.shape)
        merged = vs[:q] + (int(np.prod(vs[q:q + len(block)], dtype=np.int64)),) + \
            vs[q + len(block):]
        view = self.array_op("reshape", [view], loc, shape=merged)
        if not self._is_array_value(flat):  # integers only cannot reach here: an array
            raise AssertionError("an index block without an array")
        return self.array_op("take", [view, flat], loc, axis=q)
