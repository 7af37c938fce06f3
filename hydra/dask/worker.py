"""What a Dask task runs on a worker: one chunk of lanes of a kernel.

A task is pure: it reads its inputs and returns a ``ChunkOut`` (the result leaves of
its lanes, the text its lanes printed, the rows of each written uniform array that
its lanes own, and its sums for arrays it only ``atomic_add``s into), so Dask may run
it twice or on another worker after a failure and get the same answer.  Uniform
arrays the kernel writes are copied (or zeroed) before the run for that reason: the
input stays as it came.  A staged kernel's task copies the arrays a stage writes from
the previous stage's output for the same reason.

Prints are captured per task (per thread: the threaded scheduler runs tasks side by
side) and travel with the result; the client writes them, chunks in lane order.
Errors keep the class and text a local call raises, with the lane number made
global; they are registered with ``copyreg`` so that they cross process boundaries.
"""

from __future__ import annotations

import contextlib
import copyreg
import io
import os
import sys
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import RUNTIME_ERRORS, HydraError
from ..passes import Sites
from .ship import KernelSpec, compiled
from .stages import partial, resume

#: a profiled kernel's chunks in one process run one at a time: their counts are the
#: growth of one set of counters (``profile_of``)
_PROFILED = threading.Lock()


@dataclass
class ChunkOut:
    """What one chunk's task hands back to the client (or to the next stage)."""

    leaves: list | None  # the function's result leaves for this chunk's lanes
    printed: str = ""
    rows: dict = field(default_factory=dict)  # flat parameter index -> rows start:stop
    added: dict = field(default_factory=dict)  # flat parameter index -> atomic_add deltas
    error: HydraError | None = None  # a lane's error (lane number global)
    #: inside ``hydra.profile``: the chunk's lane counts and time (``profile_of``)
    profile: dict | None = None


@dataclass(frozen=True)
class Layout:
    """Where each flat argument of a chunk task comes from: ("dep", i) is the i-th
    dependency the task receives (a chunk or a shipped array), ("lit", v) a value."""

    sources: tuple
    written: tuple[int, ...]  # flat parameter indices of uniform arrays the kernel writes
    added: tuple[int, ...] = ()  # ... of arrays it only atomic_adds into (never reads)


def arguments(layout: Layout, deps: tuple) -> list:
    """The flat argument list of a chunk, written arrays copied (the task stays pure) and
    arrays that only take ``atomic_add``s zeroed (the chunk's sums come back)."""
    values = [deps[x] if how == "dep" else x for how, x in layout.sources]
    for i in layout.written:
        values[i] = np.array(values[i], copy=True)
    for i in layout.added:
        values[i] = np.zeros_like(values[i])
    return values


def run_chunk(spec: KernelSpec, layout: Layout, start: int, stop: int, total: int,
              *deps) -> ChunkOut:
    """Run lanes ``start:stop`` of a ``total``-lane call (a Dask task).  A lane's error
    is handed back, not raised: the client raises the lowest failing lane's, whatever
    order the tasks ran in."""
    kernel = compiled(spec)
    values = arguments(layout, deps)
    sites = kernel.fn.notes.get("profile")  # a profiled call's (hydra.profile)
    with _PROFILED if sites else contextlib.nullcontext():
        before, began = (sites.snapshot(), time.perf_counter()) if sites else (None, 0.0)
        with captured_stdout() as out, lane_errors(start) as failed:
            leaves = kernel.runner(values + [np.int64(start), np.int64(total)], stop - start)
        took = profile_of(sites, before, began, stop - start)
    if failed.error is not None:
        return ChunkOut(None, out.getvalue(), error=failed.error, profile=took)
    return chunk_out(kernel.fn, layout, leaves, values, start, stop, out.getvalue(), took)


def profile_of(sites, before, began: float, lanes: int) -> dict | None:
    """A profiled chunk's counts (its sites with the counters' growth in this run) and
    its run's times, for the caller to merge (``DaskCall``)."""
    if sites is None:
        return None
    end = time.perf_counter()
    mine = Sites(sites.sites, sites.counters - before, sites.line_sites, sites.line_ops,
                 sites.loops)
    return {"sites": mine, "start": began, "end": end, "pid": os.getpid(), "lanes": lanes,
            "thread": threading.current_thread().name, "tid": threading.get_ident()}


def chunk_out(fn, layout: Layout, leaves: list, values: list, start: int, stop: int,
              printed: str, profile: dict | None = None) -> ChunkOut:
    """A chunk's ``ChunkOut``: its result leaves, varying ones as arrays of its lanes (a
    backend may hand back one value for all of them), uniform ones as NumPy scalars, or
    as one array of their shape (a uniform per-lane array, SPEC section 8, as a local
    call returns it); and of the arrays it wrote, the rows its lanes own and its sums."""
    out = []
    for v, x in zip(fn.body.terminator.operands, leaves):
        x = np.asarray(x)
        if v.varying:
            out.append(np.broadcast_to(x, (stop - start,)).copy() if x.ndim == 0 else x)
        else:
            out.append(x if getattr(v.type, "ndim", 0) else x.reshape(()))
    return ChunkOut(out, printed, {i: values[i][start:stop] for i in layout.written},
                    {i: values[i] for i in layout.added}, profile=profile)


@dataclass
class StageOut:
    """A chunk between two stages: its values (numbered, the same in every process), what
    it printed so far, its partial of the staged op, and what it keeps for it."""

    env: dict
    printed: str
    partial: tuple
    kept: object
    error: HydraError | None = None


def run_stage(spec: KernelSpec, k: int, layout: Layout, start: int, stop: int, total: int,
              previous: StageOut | None, carried, *deps):
    """Stage ``k`` of lanes ``start:stop`` (a Dask task): a ``StageOut`` to go on from,
    or the chunk's ``ChunkOut`` after the last stage."""
    program = compiled(spec).program
    lanes, last = stop - start, k == len(program.cross)

    def failed_with(printed: str, error: HydraError):
        """What a chunk hands on once a lane (its own or another chunk's) failed."""
        if last:
            return ChunkOut(None, printed, error=error)
        return StageOut({}, printed, ("failed", Failure(error)), None, error)
    if previous is not None and previous.error is not None:
        return failed_with(previous.printed, previous.error)
    if isinstance(carried, Failure):  # a lane of another chunk failed in the last stage
        return failed_with(previous.printed, carried.error)
    if previous is None:
        values = arguments(layout, deps) + [np.int64(start), np.int64(total)]
        env = {p.id: a for p, a in zip(program.fn.params, values)}
        printed = ""
    else:  # arrays this stage may write are copied: the previous output stays as it was
        env = {program.value_of[i].id: (x.copy() if i in program.stored else x)
               for i, x in previous.env.items()}
        op = program.cross[k - 1]
        env[op.result.id] = resume(op, previous.kept, carried, lanes)
        printed = previous.printed
    with captured_stdout() as out, lane_errors(start) as failed:
        program.run_stage(k, env, lanes)
        if not last:
            part, kept = partial(program.cross[k], env, lanes, start)
    printed += out.getvalue()
    if failed.error is not None:
        return failed_with(printed, failed.error)
    if not last:
        live = program.live[k + 1]
        return StageOut({program.number[i]: x for i, x in env.items() if i in live}, printed,
                        part, kept)
    leaves = [env[v.id] for v in program.fn.body.terminator.operands]
    values = [env.get(p.id) for p in program.fn.params]
    return chunk_out(program.fn, layout, leaves, values, start, stop, printed)


@dataclass
class Failure:
    """A lane's error where a value was expected (a partial, a global value)."""

    error: HydraError


# --- prints -------------------------------------------------------------------------------

#: the buffer of the task running in this thread, if any: shared by every proxy, so that
#: a proxy someone else wrapped (or one left stale) still routes each thread's text
_buffers = threading.local()


class _ThreadStdout(io.TextIOBase):
    """``sys.stdout`` while tasks run: each task's thread writes into its own buffer,
    every other thread to the stream that was there before."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        return (getattr(_buffers, "buf", None) or self.inner).write(text)

    def flush(self) -> None:
        (getattr(_buffers, "buf", None) or self.inner).flush()


_proxy_lock = threading.Lock()
_proxy_users = 0


@contextlib.contextmanager
def captured_stdout():
    """Capture what this thread prints (other threads print as before)."""
    global _proxy_users
    with _proxy_lock:
        if not isinstance(sys.stdout, _ThreadStdout):
            sys.stdout = _ThreadStdout(sys.stdout)
        _proxy_users += 1
    _buffers.buf = io.StringIO()
    try:
        yield _buffers.buf
    finally:
        _buffers.buf = None
        with _proxy_lock:
            _proxy_users -= 1
            if _proxy_users == 0 and isinstance(sys.stdout, _ThreadStdout):
                sys.stdout = sys.stdout.inner


# --- errors -------------------------------------------------------------------------------

class lane_errors:
    """Catch a lane's run-time error, its lane number made global (``.error``)."""

    def __init__(self, start: int) -> None:
        self.start = start
        self.error: HydraError | None = None

    def __enter__(self) -> "lane_errors":
        return self

    def __exit__(self, kind, err, tb) -> bool:
        if err is None or type(err) not in RUNTIME_ERRORS.values():
            return False
        lane = getattr(err, "lane", None)
        if lane is not None and self.start:  # as raised for lane ``lane + start``
            text = str(err).replace(f" (lane {lane})", f" (lane {lane + self.start})", 1)
            err = _rebuild_error(type(err), text, lane + self.start, err.loc)
        self.error = err
        return True


def _rebuild_error(cls, text: str, lane, loc):
    err = cls.__new__(cls)
    Exception.__init__(err, text)
    err.lane, err.loc = lane, loc
    return err


def _reduce_error(err):
    return _rebuild_error, (type(err), str(err), err.lane, err.loc)


# the run-time errors take (message, lane, loc) but keep only the rendered text in args:
# tell pickle how to rebuild them, so a worker's error reaches the client intact
for _cls in RUNTIME_ERRORS.values():
    copyreg.pickle(_cls, _reduce_error)
