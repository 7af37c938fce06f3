"""The engine of ``hydra.dataflow`` (whose docstring tells the story): the process's
launches.  ``Scheduler.register(launch, futures, accesses)`` takes a ``Launch`` and what it
touches ((Future, mode) values still to come, (array, mode) accesses); the launch starts
once every launch it depends on has completed, on a worker thread or, inline, the
caller's.  ``complete`` releases its memory and budget, resolves its future and starts its
dependants, or fails them with a ``DependencyError``.  ``history`` keeps the last
``HISTORY`` for ``hydra.launch_graph``.

The workers are a small pool of daemon threads.  The cpu backend's
drivers are ``@njit(nogil=True)``, so launches overlap on the cores; a budget of
``NUMBA_NUM_THREADS`` cores keeps them from oversubscribing.  A launch holds the cores
its backend's ``launch_cores`` says (cpu: as many as it runs threads, one for a run too
small for the parallel driver; the drivers use hydra's own thread pool, not numba's
threading layer, so launches from several threads never contend for one thread team).
A backend that says none (cuda) runs launches on its streams (``new_stream``,
``on_stream``, ``record_event``: a dependant takes its dependency's stream, an
independent chain a stream of its own, an event orders a dependant on another stream);
the CUDA simulator is not thread-safe, so there they take turns on the same path.
"""

from __future__ import annotations

import atexit
import collections
import concurrent.futures as cf
import contextlib
import itertools
import os
import queue
import sys
import threading
import time

import numpy as np

from . import stop
from .backends.protocol import cores
from .errors import HydraError
from .trees import flatten, is_container, unflatten

#: how many finished launches ``launch_graph`` keeps
HISTORY = int(os.environ.get("HYDRA_LAUNCH_HISTORY", "200"))
#: cuda launches that may run at once (one stream each)
CUDA_STREAMS = 4


class DependencyError(HydraError):
    """A launch did not run because a launch it depends on failed (``__cause__``)."""


class Future(cf.Future):
    """The result of ``Kernel.submit``: a ``concurrent.futures.Future`` that knows its
    launch (``.launch_id``, ``.kernel_name``).  Pass it to another ``submit`` to make a
    dependency."""

    def __init__(self, launch: "Launch") -> None:
        super().__init__()
        self.launch = launch

    @property
    def launch_id(self) -> int:
        return self.launch.id

    @property
    def kernel_name(self) -> str:
        return self.launch.name

    def __repr__(self) -> str:
        return f"<hydra.Future of launch #{self.launch_id} ({self.kernel_name}) {self._state}>"

    def result(self, timeout: float | None = None):
        """As ``concurrent.futures``; a Ctrl-C while it waits stops every launch
        (``hydra.stop``) before the ``KeyboardInterrupt`` goes on."""
        with stop.on_ctrl_c(current, self):
            return super().result(timeout)

    def exception(self, timeout: float | None = None):
        """As ``concurrent.futures``, and Ctrl-C as in ``result``."""
        with stop.on_ctrl_c(current, self):
            return super().exception(timeout)


class Launch:
    """One launch: its dependencies, its memory accesses and its times (the graph's node)."""

    def __init__(self, ident: int, kernel, args: list, prepared, cores: int,
                 inline: bool) -> None:
        self.id = ident
        self.kernel = kernel
        self.name = kernel.__name__
        self.backend = kernel.backend_name
        self.args = args
        self.prepared = prepared
        self.cores = cores
        self.gpu = cores == 0  # on a stream, not cores (the backend's launch_cores)
        self.inline = inline  # a plain call: the caller runs it
        self.future = Future(self)
        self.deps: list[tuple[Launch, str]] = []  # (launch, why: future/RAW/WAR/WAW)
        self.dep_ids: tuple[tuple[int, str], ...] = ()  # the same, kept for the graph
        self.dependants: list[Launch] = []
        self.waiting = 0
        self.failed_dep: Launch | None = None
        self.accesses: list[_Access] = []
        self.go = threading.Event() if inline else None
        self.abandoned = False
        self.dispatched = False  # holds cores (or a stream) until it completes
        self.released = False  # its dependants have been told: take no new ones
        self.stream = None
        self.event = None
        self.where = ""
        self.submitted = time.perf_counter()
        self.started: float | None = None
        self.finished: float | None = None
        self.error: BaseException | None = None

    def label(self) -> str:
        return f"launch #{self.id} ({self.name})"


class _Access:
    """A byte range ``[lo, hi)`` of memory a launch reads and/or writes (``mode``: "r",
    "w" or "rw"); ``key`` is None for real memory, or a pending ``Future`` whose value
    the launch will get (rewritten to the value's memory when that future is done)."""

    __slots__ = ("lo", "hi", "mode", "launch", "key")

    def __init__(self, lo: int, hi: int, mode: str, launch: Launch, key=None) -> None:
        self.lo, self.hi, self.mode, self.launch, self.key = lo, hi, mode, launch, key


def span(a) -> tuple[int, int] | None:
    """The byte range an array occupies (host or device), or None for a non-array."""
    if isinstance(a, np.ndarray):
        return tuple(np.lib.array_utils.byte_bounds(a))
    iface = getattr(a, "__cuda_array_interface__", None)
    if iface is not None:
        ptr, itemsize = iface["data"][0], np.dtype(iface["typestr"]).itemsize
        shape, strides = iface["shape"], iface.get("strides")
        if strides is None:
            strides = tuple(int(np.prod(shape[i + 1:])) * itemsize for i in range(len(shape)))
        if any(n == 0 for n in shape):
            return ptr, ptr
        lo = ptr + sum(s * (n - 1) for s, n in zip(strides, shape) if s < 0)
        hi = ptr + sum(s * (n - 1) for s, n in zip(strides, shape) if s > 0) + itemsize
        return lo, hi
    host = getattr(a, "_ary", None)  # the CUDA simulator's device arrays wrap a host array
    return span(host) if isinstance(host, np.ndarray) else None


def _arrays_in(value):
    """The arrays in a value (a kernel's result: an array, a scalar or a container)."""
    for v in flatten(value)[0]:
        if span(v) is not None:
            yield v


class Scheduler:
    """The process's launches: the access table, the core budget, the workers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)
        self.ids = itertools.count(1)
        self.outstanding: dict[int, Launch] = {}
        self.table: set[_Access] = set()
        self.ready: collections.deque[Launch] = collections.deque()  # cpu and numpy
        self.ready_gpu: collections.deque[Launch] = collections.deque()
        self.cores = cores()
        self.free_cores = self.cores
        self.gpu_slots = 1 if stop.cuda_simulated() else CUDA_STREAMS
        self.streams: list = []  # idle cuda streams
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.workers = 0
        self.idle_workers = 0
        self.history: collections.deque[Launch] = collections.deque(maxlen=HISTORY)
        self.sim_lock = threading.Lock()

    # --- registering a launch -----------------------------------------------------------

    def register(self, launch: Launch, futures: list, accesses: list) -> None:
        """Find the launch's dependencies (``futures``: (Future, mode); ``accesses``:
        (array, mode)), enter its accesses and queue it if it can start."""
        deps: dict[int, tuple[Launch, str]] = {}
        with self.lock:
            self.outstanding[launch.id] = launch
            self.history.append(launch)
            for fut, mode in futures:
                src = fut.launch
                if not src.released:
                    deps.setdefault(src.id, (src, "future"))
                    self._enter(_Access(0, 1, mode, launch, key=fut), deps)
                elif src.error is None:  # finished since submit looked: its value's memory
                    # (set_result is under way without the lock: this wait is short)
                    accesses = accesses + [(a, mode) for a in _arrays_in(fut.result())]
            for array, mode in accesses:
                self._enter(_Access(*span(array), mode, launch), deps)
            launch.deps = list(deps.values())
            launch.dep_ids = tuple((d.id, why) for d, why in launch.deps)
            for src, _ in launch.deps:
                src.dependants.append(launch)
                launch.waiting += 1
                if src.error is not None and launch.failed_dep is None:
                    launch.failed_dep = src
            if launch.waiting == 0:
                self._ready(launch)
            self._dispatch()

    def _ready(self, launch: Launch) -> None:
        (self.ready_gpu if launch.gpu else self.ready).append(launch)

    def _enter(self, acc: _Access, deps: dict) -> None:
        """Depend on every overlapping access that conflicts; drop the ones a write covers
        (later launches that conflict with them conflict with this one, which is after).
        An empty range touches nothing."""
        if acc.hi <= acc.lo:
            return
        covered = []
        for old in self.table:
            if old.key is not acc.key or old.hi <= acc.lo or acc.hi <= old.lo:
                continue
            if old.launch is acc.launch:
                continue
            old_w, new_w = "w" in old.mode, "w" in acc.mode
            if old_w or new_w:
                kind = ("RAW" if "r" in acc.mode else "WAW") if old_w else "WAR"
                deps.setdefault(old.launch.id, (old.launch, kind))
                if new_w and acc.lo <= old.lo and old.hi <= acc.hi:
                    covered.append(old)
        self.table.difference_update(covered)
        self.table.add(acc)
        acc.launch.accesses.append(acc)

    # --- running ------------------------------------------------------------------------

    def _dispatch(self) -> None:
        """Start ready launches while the budget allows, in order (lock held).  A cpu
        launch that needs more cores than are free waits at the head of the queue, so
        launches asking for fewer cannot starve it."""
        while self.ready and self.ready[0].cores <= self.free_cores:
            launch = self.ready.popleft()
            self.free_cores -= launch.cores
            self._start(launch)
        while self.ready_gpu and self.gpu_slots:
            launch = self.ready_gpu.popleft()
            self.gpu_slots -= 1
            self._pick_stream(launch)
            self._start(launch)

    def _start(self, launch: Launch) -> None:
        launch.dispatched = True
        if launch.inline and not launch.abandoned:
            launch.where = "caller"
            launch.go.set()
            return
        if self.idle_workers == 0:
            self.workers += 1
            threading.Thread(target=self._worker, name=f"hydra-launch-{self.workers}",
                             daemon=True).start()
        else:
            self.idle_workers -= 1
        self.jobs.put(launch)

    def _pick_stream(self, launch: Launch) -> None:
        """A cuda launch continues the stream of a cuda dependency where it can."""
        for src, _ in launch.deps:
            if src.gpu and src.stream is not None and src.stream in self.streams:
                self.streams.remove(src.stream)
                launch.stream = src.stream
                return
        launch.stream = self.streams.pop() if self.streams else launch.kernel.backend.new_stream()

    def _worker(self) -> None:
        while True:
            launch = self.jobs.get()
            launch.where = threading.current_thread().name
            self.run(launch)
            with self.lock:
                self.idle_workers += 1

    def run(self, launch: Launch) -> None:
        """Run a dispatched launch on this thread and complete it."""
        if not launch.future.set_running_or_notify_cancel():
            self.complete(launch, error=cf.CancelledError(f"{launch.label()} was cancelled"))
            return
        launch.started = time.perf_counter()
        try:
            args = [resolve(a, lambda f: _value_of(launch, f)) for a in launch.args]
            kernel = launch.kernel
            prepared = launch.prepared or kernel.prepare(args)
            with self._resources(launch):
                launch.started = time.perf_counter()  # not counting a wait for a lock
                value = kernel.run_prepared(prepared)
        except BaseException as e:  # noqa: BLE001 (the caller of .result() gets it)
            self.complete(launch, error=e)
            if launch.inline and not isinstance(e, Exception):
                raise  # Ctrl-C in a plain call stays Ctrl-C for the caller
        else:
            self.complete(launch, value=value)

    @contextlib.contextmanager
    def _resources(self, launch: Launch):
        if launch.gpu:
            backend = launch.kernel.backend  # (streams are the backend's: hydra.backends)
            for src, _ in launch.deps:
                if src.event is not None and src.stream is not launch.stream:
                    src.event.wait(launch.stream)  # cross-chain: order the streams too
            lock = self.sim_lock if stop.cuda_simulated() else contextlib.nullcontext()
            with lock, backend.on_stream(launch.stream):
                yield
                launch.event = backend.record_event(launch.stream)
        else:
            yield

    def complete(self, launch: Launch, value=None, error: BaseException | None = None) -> None:
        """Finish a launch: release its memory and budget, resolve its future, start or
        fail its dependants."""
        todo = [(launch, value, error)]
        while todo:
            launch, value, error = todo.pop()
            launch.finished = time.perf_counter()
            launch.error = error
            future = launch.future
            with self.lock:
                # a consumer of this future now touches the value's memory: rewrite its
                # access before anyone can see the value
                if error is None:
                    self._rekey(future, value)
                self.table.difference_update(launch.accesses)
                launch.accesses.clear()
                # its budget back before the callbacks run: one may call a kernel
                if launch.dispatched and not launch.gpu:
                    self.free_cores += launch.cores
                elif launch.dispatched and launch.stream is not None:
                    self.gpu_slots += 1
                    self.streams.append(launch.stream)
                for d in launch.dependants:
                    d.waiting -= 1
                    if error is not None and d.failed_dep is None:
                        d.failed_dep = launch
                    if d.waiting == 0:
                        if d.failed_dep is None:
                            self._ready(d)
                        else:
                            todo.append((d, None, dependency_error(d, d.failed_dep)))
                            if d.inline:  # (it holds no budget) wake the caller waiting to
                                d.abandoned = True  # run it: it finds the future failed
                                d.go.set()
                launch.dependants.clear()
                launch.released = True
                self._dispatch()
            if error is None:
                future.set_result(value)
            elif not future.cancelled():
                future.set_exception(error)
            with self.lock:
                # only now: wait() returning means every future is done
                self.outstanding.pop(launch.id, None)
                # the graph keeps timings, not arrays, values or other launches
                launch.args = launch.prepared = launch.kernel = launch.future = None
                launch.deps, launch.failed_dep = [], None
                stop.finished(launch)
                if not self.outstanding:
                    self.idle.notify_all()

    def _rekey(self, fut: Future, value) -> None:
        keyed = [a for a in self.table if a.key is fut]
        if not keyed:
            return
        self.table.difference_update(keyed)
        for acc in keyed:
            acc.launch.accesses.remove(acc)
            for array in _arrays_in(value):
                self._enter(_Access(*span(array), acc.mode, acc.launch), {})

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no launch is outstanding; False if ``timeout`` passed first."""
        with stop.on_ctrl_c(current), self.lock:
            return self.idle.wait_for(lambda: not self.outstanding, timeout)


def _value_of(launch: Launch, fut: Future):
    """The value of a done future argument; a failed one fails this launch."""
    if fut.cancelled() or fut.exception() is not None:
        raise dependency_error(launch, fut.launch)
    return fut.result()


def dependency_error(launch: Launch, failed: Launch) -> DependencyError:
    cause = failed.error or cf.CancelledError(f"{failed.label()} was cancelled")
    why = str(cause) if isinstance(cause, DependencyError) else f"{type(cause).__name__}: {cause}"
    err = DependencyError(f"{launch.label()} did not run: it depends on {failed.label()}, "
                          f"which failed ({why})")
    err.__cause__ = cause
    return err


_scheduler: Scheduler | None = None
_scheduler_lock = threading.Lock()


def current() -> Scheduler | None:
    """The scheduler, if one was made (``hydra.stop`` stops its launches on Ctrl-C)."""
    return _scheduler


def scheduler() -> Scheduler:
    global _scheduler
    if _scheduler is None:
        with _scheduler_lock:
            if _scheduler is None:
                _scheduler = Scheduler()
                # before concurrent.futures joins the cpu drivers' pool threads (which
                # a running launch keeps busy): threading's exit hooks run last first
                import concurrent.futures.thread  # noqa: F401 (registers its hook)
                try:
                    getattr(threading, "_register_atexit", atexit.register)(_at_exit)
                except RuntimeError:  # first made while the interpreter shuts down
                    atexit.register(_at_exit)
    return _scheduler


def _at_exit() -> None:
    """Wait for the outstanding launches; a Ctrl-C now, or one that ended the program
    (``sys.last_value``; not in an interactive session, where it may be an old one),
    stops them instead."""
    s = _scheduler
    if s is None or not s.outstanding:
        return
    if isinstance(getattr(sys, "last_value", None), KeyboardInterrupt) \
            and not hasattr(sys, "ps1"):
        stop.interrupted(s)
        return
    with contextlib.suppress(KeyboardInterrupt):
        s.wait()  # which a Ctrl-C ends, once the launches have stopped


def resolve(a, value_of):
    """``a`` with each future in it replaced by ``value_of(future)``."""
    if isinstance(a, Future):
        return value_of(a)
    if not is_container(a):
        return a
    leaves, treedef = flatten(a)
    if not any(isinstance(x, Future) for x in leaves):
        return a
    return unflatten(treedef, [value_of(x) if isinstance(x, Future) else x for x in leaves])

