"""The executor's events for ``hydra.profile``: a recorder that is off unless a profile
is open.

What runs a kernel calls ``record`` (a span: kernel runs, native phases, host steps,
fused chains, GEMMs) and ``mark`` (an instant: a compacted loop gathering or shrinking
its rows) only behind ``if events.RECORDING:``, one global read, so a run outside a
profile pays nothing else.  Each event keeps its thread, its start and end
(``time.perf_counter`` seconds) and its details (``args``: the source line, rows kept,
a product's shapes).  ``note_sites`` registers an instrumented specialization's counters
with the open profiles, which read their growth at the end (``hydra.profiler``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

#: is any profile open (read before doing any work for one)
RECORDING = False
_LOCK = threading.Lock()
_OPEN: list["Recorder"] = []


@dataclass
class Event:
    kind: str
    name: str
    start: float
    end: float
    tid: int
    thread: str
    args: dict = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return self.end - self.start


class Recorder:
    """What one open profile has seen: events, and the counters of the instrumented
    specializations that ran (with their values when first seen)."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.end: float | None = None
        self.events: list[Event] = []
        #: id(sites) -> (kernel, fn, sites, the counters when first seen)
        self.kernels: dict[int, tuple] = {}
        #: id(sites) -> each loop's per-lane trips when first seen (numpy's)
        self.trips: dict[int, dict] = {}
        #: (file, line) -> host seconds measured op by op (``add_time``)
        self.line_seconds: dict[tuple[str, int], float] = {}

    def note(self, kernel, fn) -> None:
        sites = fn.notes.get("profile")
        if sites is not None and id(sites) not in self.kernels:
            self.kernels[id(sites)] = (kernel, fn, sites, sites.snapshot())
            self.trips[id(sites)] = {k: v.copy() for k, v in sites.lane_trips.items()}


def begin() -> Recorder:
    global RECORDING
    rec = Recorder()
    with _LOCK:
        _OPEN.append(rec)
        RECORDING = True
    return rec


def end(rec: Recorder) -> None:
    global RECORDING
    with _LOCK:
        if rec in _OPEN:
            _OPEN.remove(rec)
        RECORDING = bool(_OPEN)
    rec.end = time.perf_counter()


def note_sites(kernel, fn) -> None:
    """An instrumented specialization is about to run: the open profiles watch its
    counters."""
    with _LOCK:
        for rec in _OPEN:
            rec.note(kernel, fn)


def record(kind: str, name: str, start: float, end: float | None = None, tid=None,
           thread: str | None = None, **args) -> None:
    """A span that ran from ``start`` to ``end`` (now if None) on this thread (or on
    thread ``tid`` named ``thread``: a Dask chunk's worker)."""
    end = time.perf_counter() if end is None else end
    e = Event(kind, name, start, end, tid if tid is not None else threading.get_ident(),
              thread or threading.current_thread().name, args)
    with _LOCK:
        for rec in _OPEN:
            rec.events.append(e)


def add_counts(key, kernel, fn, sites, counts) -> None:
    """Counts made elsewhere (a Dask call's chunks, ``profiler.merge_chunks``) for the
    kernel whose line table is ``sites``: added to the open profiles' entry ``key``."""
    import numpy as np
    with _LOCK:
        for rec in _OPEN:
            if key not in rec.kernels:
                mine = type(sites)(sites.sites, np.zeros_like(counts), sites.line_sites,
                                   sites.line_ops, sites.loops)
                rec.kernels[key] = (kernel, fn, mine, np.zeros_like(counts))
            rec.kernels[key][2].counters += counts


def add_time(file: str, line: int, seconds: float) -> None:
    """Host time measured for one source line (an op the host ran)."""
    with _LOCK:
        for rec in _OPEN:
            key = (file, line)
            rec.line_seconds[key] = rec.line_seconds.get(key, 0.0) + seconds


def mark(kind: str, name: str, **args) -> None:
    """An instant event (a compaction's gather, a shrink) at this moment."""
    now = time.perf_counter()
    record(kind, name, now, now, **args)
