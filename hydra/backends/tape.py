"""The host rules of ``hydra.grad``'s tape: ``tape_push`` and ``tape_pop``.

Takes: the ops as the gradient transformation emits them (``hydra.grad.transform``),
after linearize: each carries the mask of the lanes that run it.
Guarantees: each lane has its own stack per tape (the ``tape`` attribute).  A push
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


class Tape:
    """Per-lane stacks of records in one growable store."""

    def __init__(self, lanes: int) -> None:
        self.head = np.full(lanes, -1, dtype=np.int64)  # each lane's last record
        self.prev = np.empty(0, dtype=np.int64)  # record -> the lane's record before it
        self.columns: list[np.ndarray] = []
        self.size = 0

    def _grow(self, need: int, values: list) -> None:
        if not self.columns:
            self.columns = [np.empty(0, dtype=np.asarray(v).dtype) for v in values]
        cap = len(self.prev)
        if need <= cap:
            return
        cap = max(need, 2 * cap, 64)
        self.prev = np.resize(self.prev, cap)
        self.columns = [np.resize(c, cap) for c in self.columns]

    def push(self, values: list, mask: np.ndarray) -> None:
        lanes = np.nonzero(mask)[0]
        if not lanes.size:
            return
        self._grow(self.size + lanes.size, values)
        at = np.arange(self.size, self.size + lanes.size)
        for col, v in zip(self.columns, values):
            v = np.asarray(v)
            col[at] = v[lanes] if v.ndim else v
        self.prev[at] = self.head[lanes]
        self.head[lanes] = at
        self.size += lanes.size

    def pop(self, mask: np.ndarray, dtypes: list[np.dtype]) -> list[np.ndarray]:
        lanes = np.nonzero(mask)[0]
        out = [np.zeros(len(mask), dtype=d) for d in dtypes]
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


def tape_push(h, op, env) -> list:
    _tape(h, op, env).push([env[v.id] for v in op.operands], _mask(h, op, env))
    return []


def tape_pop(h, op, env) -> list:
    return _tape(h, op, env).pop(_mask(h, op, env), [r.type.dtype for r in op.results])
