"""``hydra.profile``: where lanes and time go, per source line.

``k.profile(*args)`` runs one call, ``with hydra.profile() as p:`` any calls and
``submit``s (waiting at the end for the launches submitted inside it), both with the
kernels' instrumented twins (``Kernel.instrumented``: ``passes/instrument`` counts lanes
per region; the kernels themselves are untouched) and ``hydra.events`` recording the
executor.  The ``Profile`` holds, per source line of each kernel and its helpers:

- ``lane_steps``: the sum, over the times the line ran, of the lanes that ran it: the
  same on every backend;
- ``issues``: how many times it ran in the backend's own unit (a gang iteration on cpu,
  a whole-vector step on numpy, one lane on cuda, whose warps diverge in hardware) and
  ``width``, the lanes per issue (gang width, N, 1): ``utilization = lane_steps /
  (issues * width)``;
- ``seconds``: measured for what the host runs (op by op), estimated inside native
  phases (the phase's measured time shared among its lines by their work, issues x
  width x ops; ``estimated`` says which).

and the executor's events (native phases, host steps, fused chains, GEMMs with their
shapes, compaction gathers and shrinks with the rows kept, launches with their
dependencies), plus ``advice``: a few lines of plain advice, each tied to a number.
Views: ``print(p)``, ``p.save_html(path)`` / ``_repr_html_``, ``p.save_trace(path)``
(Chrome trace event format) in ``hydra.profileview``; data: ``p.lines()``,
``p.to_dict()``.  An exception raised inside carries the profile so far (``e.profile``).
"""

from __future__ import annotations

import contextlib
import linecache
import time
from dataclasses import asdict, dataclass

import numpy as np

from . import events
from .passes.instrument import ISSUES, LANE_STEPS, SLOTS


@dataclass
class Line:
    """One source line of a profiled kernel (``Profile.lines``)."""

    kernel: str
    backend: str
    file: str
    line: int
    source: str
    region: str  # the kind of region that counts it: body, loop test, loop body, then, else
    lane_steps: int
    issues: int
    width: float
    utilization: float | None
    seconds: float
    estimated: bool  # seconds shared out of a native phase rather than measured

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class KernelRuns:
    """One profiled kernel: its calls' lanes, backend, time, and per-line records."""

    name: str
    backend: str
    runs: int
    lanes: int
    seconds: float
    lines: list[Line]
    sites: object  # passes.instrument.Sites
    counts: object  # the counters' growth inside the profile: (sites, 3) int64
    fn: object = None  # the instrumented predicated IR (the HTML report draws it)
    #: loop line -> histogram of the lanes' trip counts (where the host ran the loop
    #: over all lanes: numpy), ``trips[k]`` lanes ran it k times
    trips: dict = None


class Profile:
    """What a profile saw (see the module docstring)."""

    def __init__(self, rec: events.Recorder, launches: list) -> None:
        self.seconds = (rec.end or rec.start) - rec.start
        self.start = rec.start
        self.events = list(rec.events)
        self.launches = launches
        self.result = None
        self.kernels = [self._kernel(rec, entry, rec.trips.get(key, {}))
                        for key, entry in rec.kernels.items()]
        self.advice = _advice(self)

    # --- building -------------------------------------------------------------------

    def _kernel(self, rec: events.Recorder, entry, trips_before: dict) -> KernelRuns:
        kernel, fn, sites, base = entry
        counts = sites.totals(sites.counters - base)
        name, backend = kernel.pyfunc.__name__, kernel.backend_name
        runs = [e for e in self.events if e.kind == "kernel" and e.name == name
                and e.args.get("backend") == backend]
        inside = [e for e in self.events if e.kind in ("phase", "step", "host", "build")
                  and any((k.tid == e.tid or "chunks" in k.args) and k.start <= e.start <= k.end
                          for k in runs)]  # (a Dask call's chunks ran on its workers)
        # making machine code is no part of the run's time
        seconds = sum(e.seconds for e in runs) - sum(e.seconds for e in inside
                                                     if e.kind == "build")
        times = _line_times(sites, counts, inside, rec.line_seconds, seconds,
                            native=backend != "numpy")
        lines = []
        for key, index in sorted(sites.line_sites.items(), key=lambda kv: kv[0][1]):
            lane_steps, issues, slots = (int(counts[index, c]) for c in (LANE_STEPS, ISSUES,
                                                                            SLOTS))
            width = slots / issues if issues else 0
            seconds_, estimated = times.get(key, (0.0, False))
            lines.append(Line(name, backend, key[0], key[1],
                              linecache.getline(key[0], key[1]).rstrip(),
                              sites.sites[index].kind, lane_steps, issues,
                              int(width) if width == int(width) else round(width, 2),
                              lane_steps / slots if slots else None, seconds_, estimated))
        lanes = max((e.args.get("lanes", 0) for e in runs), default=0)
        trips = {}  # loop line -> how many lanes ran it 0, 1, 2, ... times (numpy, one run)
        for (site, n), now in list(sites.lane_trips.items()) if len(runs) == 1 else ():
            owner = sites.sites[site].owner
            before = trips_before.get((site, n))
            delta = now - before if before is not None else now
            if owner is not None and n == lanes and delta.any():
                trips[owner[1]] = np.bincount(delta).tolist()
        return KernelRuns(name, backend, len(runs), lanes, seconds, lines, sites, counts, fn,
                          trips)

    # --- data -----------------------------------------------------------------------

    def lines(self, kernel: str | None = None) -> list[Line]:
        """Every counted line of every kernel (or of ``kernel``), in source order."""
        return [ln for k in self.kernels if kernel in (None, k.name) for ln in k.lines]

    def line(self, number: int, kernel: str | None = None) -> Line:
        """The record of source line ``number`` (of ``kernel`` if several ran)."""
        found = [ln for ln in self.lines(kernel) if ln.line == number]
        if not found:
            raise KeyError(f"line {number} was not counted in this profile")
        return found[0]

    def to_dict(self) -> dict:
        return {
            "seconds": self.seconds,
            "kernels": [{"name": k.name, "backend": k.backend, "runs": k.runs,
                         "lanes": k.lanes, "seconds": k.seconds,
                         "trip_histograms": {str(line): h for line, h in k.trips.items()}}
                        for k in self.kernels],
            "lines": [ln.to_dict() for ln in self.lines()],
            "events": [{"kind": e.kind, "name": e.name, "start": e.start - self.start,
                        "seconds": e.seconds, "thread": e.thread, "args": e.args}
                       for e in self.events],
            "launches": [dict(launch) for launch in self.launches],
            "advice": list(self.advice),
        }

    # --- views (hydra.profileview) ----------------------------------------------------

    def __str__(self) -> str:
        from .profileview import table
        return table(self)

    def __repr__(self) -> str:
        return self.__str__()

    def save_html(self, path) -> None:
        from .profileview import html_report
        with open(path, "w") as f:
            f.write(html_report(self))

    def _repr_html_(self) -> str:
        from .profileview import html_report
        return html_report(self, fragment=True)

    def save_trace(self, path) -> None:
        """A Chrome trace event file (Perfetto and chrome://tracing open it)."""
        import json

        from .profileview import trace_events
        with open(path, "w") as f:
            json.dump(trace_events(self), f)


def _line_times(sites, counts, inside: list, measured: dict, total: float,
                native: bool) -> dict:
    """(file, line) -> (seconds, estimated).  Host ops: measured.  A native phase's time
    is shared among its lines by work (slots x ops); with no phase events (cuda) the
    kernel's time unaccounted for is shared among all lines the same way."""
    work = {key: int(counts[i, SLOTS]) * max(sites.line_ops.get(key, 1), 1)
            for key, i in sites.line_sites.items()}
    out = {key: (s, False) for key, s in measured.items() if key in work}

    def share(seconds: float, keys: list) -> None:
        weight = sum(work[k] for k in keys)
        for k in keys:
            if weight:
                s, _ = out.get(k, (0.0, True))
                out[k] = (s + seconds * work[k] / weight, True)
    by_number: dict[int, list] = {}
    for key in work:
        by_number.setdefault(key[1], []).append(key)
    phases = [e for e in inside if e.kind == "phase"]
    for e in phases:
        share(e.seconds, [k for n in e.args.get("lines", ()) for k in by_number.get(n, ())])
    for e in inside:  # a loop the host ran: what its measured ops leave unexplained
        if e.kind == "host" and len(e.args.get("lines", ())) > 1:
            keys = [k for n in e.args["lines"] for k in by_number.get(n, ())]
            rest = e.seconds - sum(measured.get(k, 0.0) for k in keys)
            if rest > 0:
                share(rest, keys)
    if native and not phases and not measured:
        share(total, list(work))
    return out


def _advice(p: Profile) -> list[str]:
    out = []
    for k in p.kernels:
        if not k.seconds:
            continue
        sites = k.sites
        for site in sites.sites:
            if site.kind != "loop body" or site.owner is None:
                continue
            lane_steps, slots = int(k.counts[site.index, LANE_STEPS]), \
                int(k.counts[site.index, SLOTS])
            spent = sum(ln.seconds for ln in k.lines
                        if sites.line_sites.get((ln.file, ln.line)) == site.index
                        or (ln.file, ln.line) == site.owner)
            if not slots or lane_steps >= 0.6 * slots or spent < 0.2 * k.seconds:
                continue
            text = (f"line {site.owner[1]}: {lane_steps / slots:.0%} of lanes active on "
                    f"average over {spent / k.seconds:.0%} of the kernel's time: lanes "
                    f"finish at very different trip counts; sort inputs by expected work")
            why = {e.args.get("why") for e in p.events if e.kind == "phase"
                   and site.owner[1] in e.args.get("lines", ()) and e.args.get("why")}
            if why:
                text += f", or see why persistent lanes were not chosen: {sorted(why)[0]}"
            elif k.backend == "numpy":
                text += (", or use the cpu backend (it compacts such loops and runs "
                         "scalar ones with persistent lanes)")
            out.append(text)
        trips = {site.owner[1]: int(k.counts[site.index, ISSUES]) for site in sites.sites
                 if site.kind == "loop test" and site.owner is not None}
        for line, n in trips.items():
            gathers = sum(1 for e in p.events if e.kind == "compaction"
                          and e.args.get("line") == line and e.args.get("what") == "gather")
            if n and gathers / n >= 0.2:
                out.append(f"compacted loop at line {line} gathers on {gathers / n:.0%} of "
                           f"trips ({gathers} of {n}): lanes leave it out of order; a "
                           f"loop bound known at its start (for t in range(n)) lets "
                           f"lanes be sorted by trip count once")
        compacted = {e.args.get("line") for e in p.events if e.kind == "compaction"}
        gemm = sum(e.seconds for e in p.events if e.kind == "gemm")
        if gemm >= 0.5 * k.seconds:
            n = sum(1 for e in p.events if e.kind == "gemm")
            out.append(f"{gemm / k.seconds:.0%} of the kernel's time is in its {n} matrix "
                       f"products (BLAS): the lanes are not what is slow; fewer or smaller "
                       f"products are (sorting lanes by trip count shrinks the rows)")
        host = {}
        for e in p.events:
            if e.kind == "host" and e.args.get("lines") and not compacted & set(
                    e.args["lines"]):
                key = (e.args["lines"][0], e.args.get("why", ""))
                host[key] = host.get(key, 0.0) + e.seconds
        for (line, why), s in sorted(host.items(), key=lambda kv: -kv[1])[:1]:
            if s >= 0.3 * k.seconds:
                out.append(f"line {line} runs on the host ({why}): {s / k.seconds:.0%} of "
                           f"the kernel's time")
    return out[:4]


@contextlib.contextmanager
def profile():
    """``with hydra.profile() as p:`` profiles every kernel call and ``submit`` inside
    it; ``p`` is filled in at the end (after the launches submitted inside finish)."""
    from . import dataflow
    holder = _Pending()
    rec = events.begin()
    try:
        yield holder
    except BaseException as e:
        _finish(holder, rec, dataflow)
        with contextlib.suppress(AttributeError, TypeError):
            e.profile = holder
        raise
    _finish(holder, rec, dataflow)


def _finish(holder: "_Pending", rec: events.Recorder, dataflow) -> None:
    try:
        dataflow.wait()
    finally:
        events.end(rec)
    launches = [_launch(x, rec.start) for x in dataflow.history()
                if x.submitted >= rec.start and x.submitted <= rec.end]
    result = holder.__dict__.get("result")
    holder.__class__ = Profile
    holder.__dict__.clear()
    Profile.__init__(holder, rec, launches)
    if result is not None:
        holder.result = result


class _Pending:
    """The ``Profile`` of an open ``hydra.profile()`` block (it becomes one at the end)."""

    def __getattr__(self, name):
        raise AttributeError(f"the profile is not finished: leave the `with hydra.profile()` "
                             f"block before reading {name!r}")


def _launch(x, origin: float) -> dict:
    """A launch as the trace draws it: its times relative to the profile's start."""
    return {"id": x.id, "name": x.name, "backend": x.backend,
            "submitted": x.submitted - origin,
            "started": None if x.started is None else x.started - origin,
            "finished": None if x.finished is None else x.finished - origin,
            "deps": [list(d) for d in x.dep_ids], "inline": bool(x.inline)}


def merge_chunks(kernel, fn, chunks: list[dict]) -> None:
    """A Dask call's per-chunk profiles (``hydra.dask``), merged on the caller: their
    counts summed into one kernel entry of each open profile, each chunk's run a
    ``chunk`` event (on its worker thread where it ran in this process), the call a
    ``kernel`` event.  Chunks computed after the profile closed are not counted."""
    import os
    if not events.RECORDING:
        return
    first = chunks[0]["sites"]
    total = np.sum([c["sites"].counters for c in chunks], axis=0)
    here = os.getpid()
    spans = []
    for k, c in enumerate(chunks):
        start, end = c["start"], c["end"]
        if c["pid"] != here:  # another process's clock: placed to end now
            end, start = time.perf_counter(), time.perf_counter() - (end - start)
        spans.append((start, end))
        events.record("chunk", f"chunk {k} ({c['lanes']} lanes)", start, end,
                      lanes=c["lanes"], tid=c["tid"] if c["pid"] == here else None,
                      thread=c["thread"])
    events.record("kernel", kernel.pyfunc.__name__, min(s for s, _ in spans),
                  max(e for _, e in spans), backend=kernel.backend_name,
                  lanes=sum(c["lanes"] for c in chunks), chunks=len(chunks))
    events.add_counts(("dask", id(kernel)), kernel, fn, first, total)
