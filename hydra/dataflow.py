"""Asynchronous launches with dataflow dependencies (SPEC section 9).

``Kernel.submit(*args)`` registers a *launch* and returns a ``hydra.Future`` at once.
A launch waits for the launches it depends on, found here and never written by the
user:

- a ``hydra.Future`` among the arguments: the launch that makes it (its value is
  passed when the launch starts, without a round trip through the caller);
- memory: the compiler knows which arrays a kernel may write and which it may read
  (``hydra.effects``: every op's declared accesses, followed through views, selects,
  joins and loop-carried values; parameters and captured arrays); two launches
  whose arrays overlap in memory (any views of one buffer: byte ranges are compared)
  are run in submission order when one of them writes it (read-after-write,
  write-after-read, write-after-write).

Everything else runs at once, on threads within a budget of cores and cuda streams
(``hydra.scheduler``, the engine that orders and runs launches).

A plain call ``k(*args)`` with nothing outstanding runs at once on the calling thread
and costs nothing extra (it is not registered: a launch submitted meanwhile from
another thread is not ordered after it); otherwise it is registered as a launch like
``submit`` (so later submits order after it), waits for its dependencies and its
cores, and still runs on the calling thread (Ctrl-C reaches it).  A Ctrl-C in a wait
on the main thread (``Future.result``, ``wait``, a plain call, the wait at interpreter
exit) stops every launch (``hydra.stop``).
``launch_graph()`` pictures the recent launches (``hydra.launchview``).

Here: the entry points of ``Kernel`` and what a launch touches (its accesses, found from
the compiled IR, and its cores).
"""

from __future__ import annotations

import concurrent.futures as cf

import numpy as np

from . import stop
from .effects import effects
from .launch import result
from .scheduler import (DependencyError, Future, Launch, current, dependency_error, resolve,
                        scheduler, span)
from .trees import flatten, is_container
from .types import ArrayType

# --- the entry points of Kernel --------------------------------------------------------

def submit(kernel, args: tuple, inline: bool = False) -> Future:
    """``Kernel.submit``: register a launch of ``kernel`` (``args`` bound, one per
    parameter) and return its future.  Errors found before anything runs (types,
    lengths, compiling) raise here."""
    args = list(args)
    futures = [f for a in args for f in _futures_in(a)]  # in containers too
    done_failed = [f for f in futures if f.done() and (f.cancelled() or f.exception())]
    # a future that is already done is just its value
    args = [resolve(a, lambda f: f.result() if f.done() and f not in done_failed else f)
            for a in args]
    pending = [f for a in args for f in _futures_in(a) if f not in done_failed]
    if pending or done_failed:
        prepared = None
        accesses, future_modes, cores = _modes_with_standins(kernel, args)
    else:
        prepared = kernel.prepare(args)
        accesses, cores = _modes(kernel, prepared)
        future_modes = []
    s = scheduler()
    launch = Launch(next(s.ids), kernel, args, prepared, cores, inline)
    future = launch.future  # (a finished launch lets go of it: it may finish at once)
    if done_failed:  # it never runs: it fails at once, as a dependant of a failed launch
        src = done_failed[0].launch
        launch.dep_ids = ((src.id, "future"),)
        s.history.append(launch)
        s.complete(launch, error=dependency_error(launch, src))
    else:
        s.register(launch, future_modes, accesses)
    return future


def call(kernel, args: tuple):
    """``Kernel.__call__``: run on the calling thread, after the launches it depends on."""
    s = current()
    if (s is None or not s.outstanding) and not any(_futures_in(a) for a in args):
        return kernel.run_prepared(kernel.prepare(args))
    fut = submit(kernel, args, inline=True)
    launch = fut.launch
    if fut.done():
        return fut.result()
    with stop.on_ctrl_c(current):  # and a Ctrl-C stops the other launches too
        try:
            launch.go.wait()
        except BaseException:
            with scheduler().lock:
                started = launch.go.is_set() and not launch.abandoned
                launch.abandoned = True
                fut.cancel()
            if started:  # dispatched to us: give its budget back
                scheduler().complete(launch, error=cf.CancelledError(
                    f"{launch.label()} was interrupted"))
            raise
        if not launch.abandoned:  # else it failed before it could run: the future says why
            scheduler().run(launch)
    return fut.result()


def wait(timeout: float | None = None) -> bool:
    """``hydra.wait()``: block until every launch submitted so far has finished (whatever
    its outcome; the futures hold the errors).  False if ``timeout`` seconds passed."""
    s = current()
    return True if s is None else s.wait(timeout)


def history() -> list[Launch]:
    """The recent launches, oldest first."""
    s = current()
    if s is None:
        return []
    with s.lock:
        return list(s.history)


def _modes(kernel, prepared) -> tuple[list, int]:
    """(array, mode) for every array the launch touches, from the compiled IR; and the
    cores it runs on."""
    fn, _, values, _, lanes = prepared
    found = effects(fn)
    out = [(v, mode) for mode, v in zip(found.params, values) if mode and span(v) is not None]
    captured = [(op.attrs["array"], mode or "r") for op, mode in found.captured]
    return out + captured, kernel.backend.launch_cores(kernel.options, lanes)


def _modes_with_standins(kernel, args: list) -> tuple[list, list, int]:
    """Accesses of a launch whose arguments include pending futures.  Their values are
    stood in for by arrays of the type the producing kernel returns, so the compiler
    says what is read and written; where that cannot be done every array counts as
    read and written."""
    futures = [f for a in args for f in _futures_in(a)]
    subs = {id(f): _standin(f) for f in futures}
    standins = [resolve(a, lambda f: subs[id(f)]) for a in args]
    if all(x is not None for x in subs.values()):
        try:
            prepared = kernel.prepare(standins)
        except Exception:  # noqa: BLE001 (the real values will say what is wrong)
            prepared = None
        if prepared is not None:
            accesses, cores = _modes(kernel, prepared)
            by_id = {id(x): f for f in futures for x in flatten(subs[id(f)])[0]}
            accesses = [(by_id.get(id(v), v), m) for v, m in accesses]
            future_modes = [(f, "".join(sorted(set("".join(m for v, m in accesses if v is f))))
                             or "r") for f in futures]
            concrete = [(v, m) for v, m in accesses if not isinstance(v, Future)]
            return concrete, future_modes, cores
    accesses = [(a, "rw") for a in args if not isinstance(a, Future) and span(a) is not None]
    return accesses, [(f, "rw") for f in futures], kernel.backend.launch_cores(kernel.options, None)


def _futures_in(a) -> list:
    """The futures an argument is or holds (a container of futures: each a dependency)."""
    if isinstance(a, Future):
        return [a]
    return [x for x in flatten(a)[0] if isinstance(x, Future)] if is_container(a) else []


def _standin(fut: Future):
    """A value of the type ``fut``'s kernel returns, or None where it is not known."""
    launch = fut.launch
    if launch.prepared is None:
        return None
    fn, _, _, _, lanes = launch.prepared
    leaves = []
    for v in fn.body.terminator.operands:
        t = v.type
        shape = getattr(t, "shape", ()) if isinstance(t, ArrayType) else ()
        dtype = t.dtype.dtype if isinstance(t, ArrayType) else getattr(t, "dtype", None)
        if dtype is None or shape is None:  # (a tuple; an array of unknown shape)
            return None
        leaves.append(np.zeros(((lanes,) if v.varying else ()) + tuple(shape), dtype))
    return result(fn, leaves, lanes)


__all__ = ["DependencyError", "Future", "call", "history", "submit", "wait"]
