"""Which reshapes of shared arrays NumPy makes a copy for (SPEC section 8: NumPy's
semantics, views included).

Per example, NumPy decides at run time whether ``a.reshape(s)`` is a view of ``a`` or a
copy: a view where ``a``'s strides allow it (always for a C-contiguous ``a``), a copy
otherwise (``W.T.reshape(6)``).  It matters where the kernel writes the result: into a
view, the write lands in the shared array; into a copy, each example writes its own
array, so hydra must make it per-lane.  For a lane's own arrays the batched reshape
makes the same choice at run time as each lane's reshape would (the lane axis is one
more leading axis), so only the reshapes of uniform arrays need a decision when the
kernel compiles.

The decision asks NumPy itself: a stand-in array with the shared array's shape and
the strides of a C-contiguous array (no memory behind it, never read) goes through the
same chain of views (``.T``, basic indexing, reshapes) and ``np.reshape(...,
copy=False)`` says whether a copy is needed.  Arguments and captured arrays are assumed
C-contiguous; ``check_layouts`` verifies that assumption at each call for the reshapes
it decided something for, and refuses an argument whose layout would make NumPy choose
otherwise (its strides are not part of the kernel's type).
"""

from __future__ import annotations

import numpy as np

from ..batching import index_tuple
from ..errors import KernelValueError
from ..ir.core import Function, Op, Value

#: array fns whose result may be a view of their first operand
VIEW_FNS = frozenset({"getitem", "reshape", "transpose"})


def _apply(op: Op, a: np.ndarray) -> np.ndarray:
    """``op`` on ``a`` as NumPy runs it per example, views only: raises ValueError where
    a reshape needs a copy.  Computed indices are taken as 0 (strides do not depend on
    them)."""
    fn, params = op.attrs["fn"], op.attrs["params"]
    if fn == "transpose":
        return np.transpose(a)
    if fn == "reshape":
        return np.reshape(a, tuple(op.result.type.shape), copy=False)
    spec = params["index"]
    return a[index_tuple(spec, [0] * sum(1 for item in spec if item[0] == "int"))]


def _stand_in(shape: tuple) -> np.ndarray:
    """A C-contiguous array of ``shape`` with no memory behind it (views only)."""
    strides = tuple(int(np.prod(shape[k + 1:], dtype=np.int64)) for k in range(len(shape)))
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), shape, strides,
                                           writeable=False)


def shared_reshapes(fn: Function) -> dict[int, tuple[bool, Value, list[Op]]]:
    """Reshapes of uniform parameters and captured arrays, through views: result id ->
    (NumPy copies, the shared array, the chain of view ops from it, the reshape last),
    for a C-contiguous shared array.  Reshapes whose shapes are not known are left out."""
    chains: dict[int, tuple[Value, list[Op], np.ndarray]] = {}
    for p in fn.params:
        if not p.varying and getattr(p.type, "shape", None) is not None:
            chains[p.id] = (p, [], _stand_in(tuple(p.type.shape)))
    out = {}
    for op in fn.walk():
        if op.opcode == "global_array" and getattr(op.result.type, "shape", None) is not None:
            chains[op.result.id] = (op.result, [], _stand_in(tuple(op.result.type.shape)))
        if op.opcode != "array" or op.attrs["fn"] not in VIEW_FNS \
                or op.operands[0].id not in chains \
                or getattr(op.result.type, "shape", None) is None:
            continue
        root, chain, a = chains[op.operands[0].id]
        try:
            view, copies = _apply(op, a), False
        except ValueError:  # NumPy needs a copy for this reshape
            view, copies = None, True
        except IndexError:  # an index into an empty axis: nothing to decide
            continue
        if op.attrs["fn"] == "reshape":
            out[op.result.id] = (copies, root, chain + [op])
        if view is not None:
            chains[op.result.id] = (root, chain + [op], view)
    return out


def check_layouts(fn: Function, values: list) -> None:
    """The reshapes hydra decided for a C-contiguous shared array (``fn.notes``, set by
    the uniformity pass) make the same choice for this call's arrays: else a
    ``KernelValueError`` naming the reshape, before anything runs."""
    decided = fn.notes.get("shared_reshapes")
    if not decided:
        return
    given = {p.id: (f"argument '{p.name}'", a) for p, a in zip(fn.params, values)}
    for copies, root, chain in decided:
        if root.id in given:
            what, a = given[root.id]
        else:
            op = next(op for op in fn.walk() if op.opcode == "global_array"
                      and op.result is root)
            what, a = f"the captured array '{op.attrs['name']}'", op.attrs["array"]
        if not isinstance(a, np.ndarray) or a.flags.c_contiguous:
            continue
        strides, b = a.strides, a
        try:
            for op in chain:
                b = _apply(op, b)
            now = False
        except ValueError:
            now = True
        except IndexError:
            continue
        if now != copies:
            made, other = ("a copy", "a view") if now else ("a view", "a copy")
            raise KernelValueError(
                f"{what} has strides {strides} for which NumPy makes "
                f"{made} in this reshape, and the kernel writes it: hydra compiled {other}, "
                f"as for a C-contiguous array; pass np.ascontiguousarray(...)", None,
                chain[-1].loc)

