"""hydra.profile's side of the host executor.

The host rule of ``count`` (``hydra.passes.instrument``): the lanes of its mask added
to its site's row of the profile counters, with one issue of ``host.lanes`` slots (a
whole-vector step on numpy, the rows of a compacted loop on the cpu's host side).

A lock makes concurrent launches of one instrumented kernel add without losing counts
(a host step runs once per region per step, so it costs nothing worth measuring).
``timed_op``, ``account`` (precomputed steps, ``steps.run_steps``) and ``note_compaction`` record
the executor's events while a profile is
open (``hydra.events``); the executor calls them behind ``if events.RECORDING``."""

from __future__ import annotations

import threading
import time

import numpy as np

from .. import events
from ..passes.instrument import BY_COUNTERS

_LOCK = threading.Lock()


def count_rule(host, op, env) -> list:
    mask = env[op.mask.id] if op.mask is not None else True
    m = np.asarray(mask)
    active = int(np.count_nonzero(m)) if m.ndim else (host.lanes if bool(m) else 0)
    counters = env[op.operands[0].id]
    row = counters[op.attrs["site"]]
    sites = BY_COUNTERS.get(id(counters))
    with _LOCK:
        row[0] += active
        row[1] += 1
        row[2] += host.lanes
        if sites is not None and m.ndim == 1:  # each lane's trips (the HTML's histograms)
            sites.note_trips(op.attrs["site"], m)
    return []


_PRODUCTS = frozenset({"matmul", "dot", "einsum", "tensordot", "conv2d", "conv2d_grad_input",
                       "conv2d_grad_weight"})


def timed_op(host, op, env, rules: dict) -> None:
    """``run_op`` inside an open profile: an op without regions is timed (into its
    line's host time: whole-vector NumPy work, where a clock read costs little beside
    it), a product also recorded as an event with its shapes.  A loop or ``if`` is
    not: its ops are timed one by one."""
    if op.regions:
        results = rules[op.opcode](host, op, env)
    else:
        start = time.perf_counter()
        results = rules[op.opcode](host, op, env)
        account(op, env, start, time.perf_counter(), host.lanes)
    for r, value in zip(op.results, results):
        env[r.id] = value


def account(op, env: dict, start: float, end: float, rows: int) -> None:
    if op.loc is not None and op.loc.line > 0:
        events.add_time(op.loc.file, op.loc.line, end - start)
    if op.opcode == "array" and op.attrs["fn"] in _PRODUCTS:
        shapes = [list(np.shape(env[v.id])) for v in op.operands if v.id in env]
        events.record("gemm", f"{op.attrs['fn']} (line {op.loc.line})", start, end,
                      line=op.loc.line, shapes=shapes, rows=rows)


def note_compaction(op, keep, compacted: bool, rows: int) -> None:
    """A compacted loop (``compact.run``) went on with the rows ``keep`` of ``rows``:
    first compaction, a shrink by a slice (free) or a gather."""
    if keep is None:
        return
    kept = keep.stop - keep.start if isinstance(keep, slice) else len(keep)
    what = "gather" if compacted and not isinstance(keep, slice) else \
        "shrink" if compacted else "compact"
    events.mark("compaction", f"{what} (line {op.loc.line})", what=what, line=op.loc.line,
                kept=int(kept), rows=int(rows))
