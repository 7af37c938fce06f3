"""The host rules of ``hydra.grad``'s tape: ``tape_push`` and ``tape_pop``.

Takes: the ops as the gradient transformation emits them (``hydra.grad.transform``),
after linearize: each carries the mask of the lanes that run it.
Guarantees: each lane has its own stack per tape (the ``tape`` attribute).  The reverse
sweep pops in the order its forward loop pushed, aligned (its trip j is every lane's
trip j), so the lanes active at a pop pushed in the same forward trip, and a value
pushed uniform pops uniform (the result the uniformity pass marks so).  A push
stores one record (the op's operand values) for each *active* lane only, as one block
(their indices and rows); a pop gives each active lane the last record it pushed and
removes it.  So a tape holds exactly the records pushed by the lanes that ran: a lane
that left a loop early stores nothing for the later trips, and nothing is sized by a
maximum.

The tapes of one run live in the run's value map (``env``) under ``("tape", id)``:
a fresh map per call, so each call starts with empty tapes.
"""

from __future__ import annotations

import numpy as np


class Tape:
    """A stack of blocks, one per push: the pushing lanes' indices and their rows of each
    value (a uniform value once).  The reverse is aligned with the forward loop, so a
    pop's lanes are exactly the last block's: no per-lane links, no copy on growth."""

    def __init__(self) -> None:
        self.blocks: list[tuple[np.ndarray, list]] = []

    def push(self, values: list, varying: list[bool], mask: np.ndarray) -> None:
        """``values``: one per record slot, a varying one with the lane axis first; None:
        not set on any lane yet (an ``undef``: never read back)."""
        lanes = np.flatnonzero(mask)
        if not lanes.size:
            return  # (its pop has no lanes either)
        rows = [None if v is None else np.asarray(v)[lanes] if vary else np.asarray(v)
                for v, vary in zip(values, varying)]
        self.blocks.append((lanes, rows))

    def pop(self, mask: np.ndarray, dtypes: list[np.dtype], shapes: list[tuple]
            ) -> list[np.ndarray]:
        """Each active lane's last record (inactive lanes get zeros), lane axis first."""
        lanes = np.flatnonzero(mask)
        out = [np.zeros((len(mask), *s), dtype=d) for d, s in zip(dtypes, shapes)]
        if not lanes.size:
            return out
        pushed, rows = self.blocks.pop() if self.blocks else (None, None)
        if pushed is None or not np.array_equal(pushed, lanes):  # a compiler bug
            raise AssertionError("hydra.grad: a tape popped on lanes other than those "
                                 "that pushed its record")
        for o, r in zip(out, rows):
            if r is not None:
                o[lanes] = r
        return out


def _mask(h, op, env) -> np.ndarray:
    m = env[op.mask.id] if op.mask is not None else True
    return np.broadcast_to(np.asarray(m, dtype=bool), (h.lanes,))


def _tape(h, op, env) -> Tape:
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
                           _mask(h, op, env))
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
