"""The host rule of ``count`` (``hydra.passes.instrument``): the lanes of its mask added
to its site's row of the profile counters, with one issue of ``host.lanes`` slots (a
whole-vector step on numpy, the rows of a compacted loop on the cpu's host side).

A lock makes concurrent launches of one instrumented kernel add without losing counts
(a host step runs once per region per step, so it costs nothing worth measuring)."""

from __future__ import annotations

import threading

import numpy as np

_LOCK = threading.Lock()


def count_rule(host, op, env) -> list:
    mask = env[op.mask.id] if op.mask is not None else True
    m = np.asarray(mask)
    active = int(np.count_nonzero(m)) if m.ndim else (host.lanes if bool(m) else 0)
    row = env[op.operands[0].id][op.attrs["site"]]
    with _LOCK:
        row[0] += active
        row[1] += 1
        row[2] += host.lanes
    return []
