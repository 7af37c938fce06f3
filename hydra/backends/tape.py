"""The host rules of ``hydra.grad``'s tape: ``tape_push`` and ``tape_pop``.

Takes: the ops as the gradient transformation emits them (``hydra.grad.transform``),
after linearize: each carries the mask of the lanes that run it.
Guarantees: each lane has its own stack per tape (the ``tape`` attribute).  The reverse
sweep pops in the order its forward loop pushed, aligned (its trip j is every lane's
trip j), so the lanes active at a pop pushed in the same forward trip, and a value
pushed uniform pops uniform (the result the uniformity pass marks so).  A push
stores one record (the op's operand values) for each *active* lane only; a pop gives
each active lane the last record it pushed and removes it.  Storage is one list of
records shared by the lanes, each record linked to the lane's previous one, so it
holds exactly the records pushed by the lanes that ran: a lane that left a loop
early stores nothing for the later trips, and nothing is sized by a maximum.

The tapes of one run live in the run's value map (``env``) under ``("tape", id)``:
a fresh map per call, so each call starts with empty tapes.
"""

from __future__ import annotations

import numpy as np

from ..types import ScalarType


class Tape:
    """Per-lane stacks of records in one growable store."""

    def __init__(self, lanes: int) -> None:
        self.head = np.full(lanes, -1, dtype=np.int64)  # each lane's last record
        self.prev = np.empty(0, dtype=np.int64)  # record -> the lane's record before it
        self.columns: list[np.ndarray] = []
        self.size = 0

    def _grow(self, need: int, types: list) -> None:
        if not self.columns:  # a record's value: a lane's number or per-lane array
            self.columns = [np.empty((0, *(getattr(t, "shape", None) or ())),
                                     dtype=(t.dtype if isinstance(t, ScalarType)
                                            else t.dtype.dtype)) for t in types]
        cap = len(self.prev)
        if need <= cap:
            return
        cap = max(need, 2 * cap, 64)
        prev = np.empty(cap, dtype=np.int64)
        prev[:self.size] = self.prev[:self.size]
        self.prev = prev
        columns = []
        for c in self.columns:
            grown = np.empty((cap, *c.shape[1:]), dtype=c.dtype)
            grown[:self.size] = c[:self.size]
            columns.append(grown)
        self.columns = columns

    def push(self, values: list, varying: list[bool], mask: np.ndarray, types: list) -> None:
        """``values``: one per record slot (of IR type ``types``), a varying one with
        the lane axis first; None: not set on any lane yet (an ``undef``)."""
        lanes = np.nonzero(mask)[0]
        if not lanes.size:
            return
        self._grow(self.size + lanes.size, types)
        at = np.arange(self.size, self.size + lanes.size)
        for col, v, vary in zip(self.columns, values, varying):
            if v is None:
                continue  # never read back: the reverse pops it only where it was set
            v = np.asarray(v)
            col[at] = v[lanes] if vary else v  # a uniform value: the same for every lane
        self.prev[at] = self.head[lanes]
        self.head[lanes] = at
        self.size += lanes.size

    def pop(self, mask: np.ndarray, dtypes: list[np.dtype], shapes: list[tuple]
            ) -> list[np.ndarray]:
        """Each active lane's last record (inactive lanes get zeros), lane axis first."""
        lanes = np.nonzero(mask)[0]
        out = [np.zeros((len(mask), *s), dtype=d) for d, s in zip(dtypes, shapes)]
        if not lanes.size:
            return out
        at = self.head[lanes]
        if np.any(at < 0):  # a compiler bug, never a user error
            raise AssertionError("hydra.grad: a tape popped more records than were pushed")
        for o, col in zip(out, self.columns):
            o[lanes] = col[at]
        self.head[lanes] = self.prev[at]
        if not np.any(self.head >= 0):
            self.size = 0  # every lane's stack is empty: reuse the store from its start
        return out


def _mask(h, op, env) -> np.ndarray:
    m = env[op.mask.id] if op.mask is not None else True
    return np.broadcast_to(np.asarray(m, dtype=bool), (h.lanes,))


def _tape(h, op, env) -> Tape:
    key = ("tape", op.attrs["tape"])
    tape = env.get(key)
    if tape is None:
        tape = env[key] = Tape(h.lanes)
    return tape


def _per_lane(v, x) -> bool:
    """Does ``x`` (the value of IR value ``v``) hold one row per lane?  A varying value
    the host kept as one number or array (the same on every lane) does not."""
    ndim = len(getattr(v.type, "shape", None) or ())
    return bool(v.varying) and np.ndim(x) == ndim + 1


def tape_push(h, op, env) -> list:
    values = [env[v.id] for v in op.operands]
    _tape(h, op, env).push(values, [_per_lane(v, x) for v, x in zip(op.operands, values)],
                           _mask(h, op, env), [v.type for v in op.operands])
    return []


def tape_pop(h, op, env) -> list:
    """A result the uniformity pass proved uniform (pushed uniform: the reverse runs
    aligned with the forward loop, so every active lane popped the same value) is the
    first active lane's, without the lane axis."""
    types = [r.type for r in op.results]
    mask = _mask(h, op, env)
    out = _tape(h, op, env).pop(mask, [t.dtype for t in types],
                                [getattr(t, "shape", None) or () for t in types])
    first = int(np.argmax(mask))
    return [x if r.varying else x[first] for r, x in zip(op.results, out)]
