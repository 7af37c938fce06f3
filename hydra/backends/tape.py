"""The host rules of ``hydra.grad``'s tape: ``tape_push`` and ``tape_pop``.

Takes: the ops as the gradient transformation emits them (``hydra.grad.transform``),
after linearize: each carries the mask of the lanes that run it.
Guarantees: each lane has its own stack per tape (the ``tape`` attribute).  The reverse
sweep pops in the order its forward loop pushed, aligned (its trip j is every lane's
trip j), so the lanes active at a pop pushed in the same forward trip, and a value
pushed uniform pops uniform (the result the uniformity pass marks so).  A push
stores one record (the op's operand values) for each *active* lane only, as one block
(their lane numbers and rows); a pop gives each active lane the last record it pushed
and removes it.  So a tape holds exactly the records pushed by the lanes that ran: a
lane that left a loop early stores nothing for the later trips, and nothing is sized by
a maximum.

Compacted loops (``hydra.executor.compact``, ``growing``) run these rules on a host of
rows: a block names its lanes by their original numbers (``Host.ids``), so a push from
the compacted rows of a forward loop holds only the active rows, and a pop on other
rows (the reverse loop's, in its own order) takes each lane's row from the block by its
number (in place when the orders agree, the usual case: both sweeps order the lanes by
trip count).  The tapes are fresh memory of the run, never a caller's array.

The tapes of one run live in the run's value map (``env``; a compacted loop's map
reaches it through ``outer``) under ``("tape", id)``: a fresh map per call, so each
call starts with empty tapes.
"""

from __future__ import annotations

import numpy as np

from ..types import ArrayType


class Tape:
    """A stack of blocks, one per push: the pushing lanes' numbers and their rows of each
    value (a uniform value once).  The reverse is aligned with the forward loop, so a
    pop's lanes are exactly the last block's: no per-lane links, no copy on growth."""

    def __init__(self) -> None:
        self.blocks: list[tuple[np.ndarray, list]] = []

    def push(self, values: list, varying: list[bool], mask: np.ndarray, ids=None) -> None:
        """``values``: one per record slot, a varying one with the row axis first; None:
        not set on any lane yet (an ``undef``: never read back).  ``ids``: the original
        lane of each row (None: rows are lanes)."""
        where = np.flatnonzero(mask)
        if not where.size:
            return  # (its pop has no lanes either)
        every = where.size == len(mask)
        rows = [None if v is None else (np.array(v) if every else np.asarray(v)[where])
                if vary else np.asarray(v) for v, vary in zip(values, varying)]
        lanes = where if ids is None else np.array(ids[where])
        self.blocks.append((lanes, rows))

    def pop(self, mask: np.ndarray, dtypes: list[np.dtype], shapes: list[tuple],
            ids=None) -> list[np.ndarray]:
        """Each active row's last record (inactive rows get zeros), row axis first."""
        where = np.flatnonzero(mask)
        n = len(mask)
        if not where.size:
            return [np.zeros((n, *s), dtype=d) for d, s in zip(dtypes, shapes)]
        lanes = where if ids is None else ids[where]
        pushed, rows = self.blocks.pop() if self.blocks else (None, None)
        at = _positions(pushed, lanes)
        out = []
        for r, d, s in zip(rows, dtypes, shapes):
            d = np.dtype(d)
            if r is not None and at is not None and np.ndim(r) == len(s) + 1:
                r = np.take(r, at, axis=0)
            if r is not None and where.size == n and np.ndim(r) == len(s) + 1 \
                    and r.dtype == d:
                out.append(r)  # every row, in the block's order: the block itself
                continue
            o = np.zeros((n, *s), dtype=d)
            if r is not None:
                o[where] = r
            out.append(o)
        return out


def _positions(pushed, lanes: np.ndarray):
    """Where each of ``lanes`` is in the block ``pushed`` (None: the same order); an
    ``AssertionError`` if the two are not the same lanes (a compiler bug)."""
    if pushed is not None and len(pushed) == len(lanes):
        if np.array_equal(pushed, lanes):
            return None
        by_lane = np.argsort(pushed, kind="stable")
        at = np.searchsorted(pushed, lanes, sorter=by_lane).clip(0, len(pushed) - 1)
        at = by_lane[at]
        if np.array_equal(pushed[at], lanes):
            return at
    raise AssertionError("hydra.grad: a tape popped on lanes other than those that "
                         "pushed its record")


def _mask(h, op, env) -> np.ndarray:
    m = env[op.mask.id] if op.mask is not None else True
    return np.broadcast_to(np.asarray(m, dtype=bool), (h.lanes,))


def _tape(h, op, env) -> Tape:
    while isinstance(getattr(env, "outer", None), dict):
        env = env.outer  # a compacted loop's values: the run's own map holds the tapes
    key = ("tape", op.attrs["tape"])
    tape = env.get(key)
    if tape is None:
        tape = env[key] = Tape()
    return tape


def _per_lane(v, x) -> bool:
    """Does ``x`` (the value of IR value ``v``) hold one row per lane?  A varying value
    the host kept as one number or array (the same on every lane) does not."""
    ndim = len(getattr(v.type, "shape", None) or ())
    return bool(v.varying) and np.ndim(x) == ndim + 1


def tape_push(h, op, env) -> list:
    values = [env[v.id] for v in op.operands]
    _tape(h, op, env).push(values, [_per_lane(v, x) for v, x in zip(op.operands, values)],
                           _mask(h, op, env), getattr(h, "ids", None))
    return []


def tape_pop(h, op, env) -> list:
    """A result the uniformity pass proved uniform (pushed uniform: the reverse runs
    aligned with the forward loop, so every active lane popped the same value) is the
    first active lane's, without the lane axis."""
    types = [r.type for r in op.results]
    mask = _mask(h, op, env)
    dtypes = [t.dtype.dtype if isinstance(t, ArrayType) else t.dtype for t in types]
    out = _tape(h, op, env).pop(mask, dtypes,
                                [getattr(t, "shape", None) or () for t in types],
                                getattr(h, "ids", None))
    first = int(np.argmax(mask))
    return [x if r.varying else x[first] for r, x in zip(op.results, out)]
