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

Everything else runs at once on a small pool of daemon threads.  The cpu backend's
drivers are ``@njit(nogil=True)``, so launches overlap on the cores; a budget of
``NUMBA_NUM_THREADS`` cores keeps them from oversubscribing (a launch holds as many
cores as it runs threads: one for a run too small for the parallel driver; the drivers
use hydra's own thread pool, not numba's threading layer, so launches from several
threads never contend for one thread team).  cuda launches run on numba streams (a
dependant takes its dependency's stream, an independent chain a stream of its own, an
event orders a dependant on another stream);
the CUDA simulator is not thread-safe, so there they take turns on the same path.

A plain call ``k(*args)`` with nothing outstanding runs at once on the calling thread
and costs nothing extra (it is not registered: a launch submitted meanwhile from
another thread is not ordered after it); otherwise it is registered as a launch like
``submit`` (so later submits order after it), waits for its dependencies and its
cores, and still runs on the calling thread (Ctrl-C reaches it).  A Ctrl-C in a wait
on the main thread (``Future.result``, ``wait``, a plain call, the wait at interpreter
exit) stops every launch (``hydra.stop``).
``launch_graph()`` pictures the recent launches (``hydra.launchview``).
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
from .effects import effects
from .launch import result
from .errors import HydraError
from .trees import flatten, is_container, unflatten
from .types import ArrayType

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
        self._launch = launch

    @property
    def launch_id(self) -> int:
        return self._launch.id

    @property
    def kernel_name(self) -> str:
        return self._launch.name

    def __repr__(self) -> str:
        return f"<hydra.Future of launch #{self.launch_id} ({self.kernel_name}) {self._state}>"

    def result(self, timeout: float | None = None):
        """As ``concurrent.futures``; a Ctrl-C while it waits stops every launch
        (``hydra.stop``) before the ``KeyboardInterrupt`` goes on."""
        with stop.on_ctrl_c(_current, self):
            return super().result(timeout)

    def exception(self, timeout: float | None = None):
        """As ``concurrent.futures``, and Ctrl-C as in ``result``."""
        with stop.on_ctrl_c(_current, self):
            return super().exception(timeout)


class Launch:
    """One launch: its dependencies, its memory accesses and its times (the graph's node)."""

    def __init__(self, ident: int, kernel, args: list, prepared, cores: int,
                 gpu: bool, inline: bool) -> None:
        self.id = ident
        self.kernel = kernel
        self.name = kernel.__name__
        self.backend = kernel.backend_name
        self.args = args
        self.prepared = prepared
        self.cores = cores
        self.gpu = gpu
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
        lo, hi = np.lib.array_utils.byte_bounds(a)
        return lo, hi
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
        self.cores = _total_cores()
        self.free_cores = self.cores
        self.gpu_slots = 1 if _cuda_simulator() else CUDA_STREAMS
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
                src = fut._launch
                if not src.released:
                    deps.setdefault(src.id, (src, "future"))
                    self._enter(_Access(0, 1, mode, launch, key=fut), deps)
                elif src.error is None:  # finished since submit looked: its value's memory
                    # (set_result is under way without the lock: this wait is short)
                    accesses = accesses + [(a, mode) for a in _arrays_in(fut.result())]
            for array, mode in accesses:
                lo, hi = span(array)
                if hi > lo:
                    self._enter(_Access(lo, hi, mode, launch), deps)
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
        (later launches that conflict with them conflict with this one, which is after)."""
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
        launch.stream = self.streams.pop() if self.streams else _new_stream()

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
            args = [_resolve(a, lambda f: _value_of(launch, f)) for a in launch.args]
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
            from .backends.cuda import launch as cuda_launch
            for src, _ in launch.deps:
                if src.event is not None and src.stream is not launch.stream:
                    src.event.wait(launch.stream)  # cross-chain: order the streams too
            with contextlib.ExitStack() as stack:
                if _cuda_simulator():
                    stack.enter_context(self.sim_lock)
                stack.enter_context(cuda_launch.on_stream(launch.stream))
                yield
                launch.event = _record(launch.stream)
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
                if launch.dispatched:  # before the callbacks run: one may call a kernel
                    self._release(launch)
                for d in launch.dependants:
                    d.waiting -= 1
                    if error is not None and d.failed_dep is None:
                        d.failed_dep = launch
                    if d.waiting == 0:
                        if d.failed_dep is None:
                            self._ready(d)
                        else:
                            todo.append((d, None, _dependency_error(d, d.failed_dep)))
                            self._stop_waiting(d)
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

    def _release(self, launch: Launch) -> None:
        if launch.gpu:
            if launch.stream is not None:
                self.gpu_slots += 1
                self.streams.append(launch.stream)
        else:
            self.free_cores += launch.cores

    def _stop_waiting(self, launch: Launch) -> None:
        """A launch failed before it was dispatched: it holds no budget, and a caller
        waiting to run it inline must wake up (it finds the future failed)."""
        if launch.inline:
            launch.abandoned = True
            launch.go.set()

    def _rekey(self, fut: Future, value) -> None:
        keyed = [a for a in self.table if a.key is fut]
        if not keyed:
            return
        self.table.difference_update(keyed)
        for acc in keyed:
            acc.launch.accesses.remove(acc)
            for array in _arrays_in(value):
                lo, hi = span(array)
                if hi > lo:
                    self._enter(_Access(lo, hi, acc.mode, acc.launch), {})

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no launch is outstanding; False if ``timeout`` passed first."""
        with stop.on_ctrl_c(_current), self.lock:
            return self.idle.wait_for(lambda: not self.outstanding, timeout)


def _value_of(launch: Launch, fut: Future):
    """The value of a done future argument; a failed one fails this launch."""
    if fut.cancelled() or fut.exception() is not None:
        raise _dependency_error(launch, fut._launch)
    return fut.result()


def _dependency_error(launch: Launch, failed: Launch) -> DependencyError:
    cause = failed.error or cf.CancelledError(f"{failed.label()} was cancelled")
    why = f"{type(cause).__name__}: {cause}"
    if isinstance(cause, DependencyError):
        why = str(cause)
    err = DependencyError(f"{launch.label()} did not run: it depends on {failed.label()}, "
                          f"which failed ({why})")
    err.__cause__ = cause
    return err


def _total_cores() -> int:
    from .backends.cpu.schedule import cores  # numba's count, without importing numba
    return cores()


def _cuda_simulator() -> bool:
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "") not in ("", "0")


def _new_stream():
    from numba import cuda
    return cuda.stream()


def _record(stream):
    from numba import cuda
    try:
        event = cuda.event(timing=False)
    except TypeError:  # the simulator's event takes no arguments
        event = cuda.event()
    event.record(stream)
    return event


_scheduler: Scheduler | None = None
_scheduler_lock = threading.Lock()


def _current() -> Scheduler | None:
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


# --- the entry points of Kernel --------------------------------------------------------

def submit(kernel, args: tuple, inline: bool = False) -> Future:
    """``Kernel.submit``: register a launch of ``kernel`` (``args`` bound, one per
    parameter) and return its future.  Errors found before anything runs (types,
    lengths, compiling) raise here."""
    args = list(args)
    futures = [f for a in args for f in _futures_in(a)]  # in containers too
    done_failed = [f for f in futures if f.done() and (f.cancelled() or f.exception())]
    # a future that is already done is just its value
    args = [_resolve(a, lambda f: f.result() if f.done() and f not in done_failed else f)
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
    launch = Launch(next(s.ids), kernel, args, prepared, cores, kernel.backend_name == "cuda",
                    inline)
    if done_failed:
        src = done_failed[0]._launch
        launch.deps = [(src, "future")]
        launch.dep_ids = ((src.id, "future"),)
        s.history.append(launch)
        launch.finished = launch.submitted
        err = _dependency_error(launch, src)
        launch.error = err
        launch.future.set_exception(err)
        return launch.future
    future = launch.future  # (a finished launch lets go of it: it may finish at once)
    s.register(launch, future_modes, accesses)
    return future


def call(kernel, args: tuple):
    """``Kernel.__call__``: run on the calling thread, after the launches it depends on."""
    s = _scheduler
    if (s is None or not s.outstanding) and not any(_futures_in(a) for a in args):
        return kernel.run_prepared(kernel.prepare(args))
    fut = submit(kernel, args, inline=True)
    launch = fut._launch
    if fut.done():
        return fut.result()
    with stop.on_ctrl_c(_current):  # and a Ctrl-C stops the other launches too
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
    s = _scheduler
    return True if s is None else s.wait(timeout)


def history() -> list[Launch]:
    """The recent launches, oldest first."""
    s = _scheduler
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
    return out + captured, _cores(kernel, lanes)


def _modes_with_standins(kernel, args: list) -> tuple[list, list, int]:
    """Accesses of a launch whose arguments include pending futures.  Their values are
    stood in for by arrays of the type the producing kernel returns, so the compiler
    says what is read and written; where that cannot be done every array counts as
    read and written."""
    futures = [f for a in args for f in _futures_in(a)]
    subs = {id(f): _standin(f) for f in futures}
    standins = [_resolve(a, lambda f: subs[id(f)]) for a in args]
    if all(x is not None for x in subs.values()):
        try:
            prepared = kernel.prepare(standins)
        except Exception:  # noqa: BLE001 (the real values will say what is wrong)
            prepared = None
        if prepared is not None:
            accesses, cores = _modes(kernel, prepared)
            by_id = {id(x): f for f in futures for x in _leaves(subs[id(f)])}
            accesses = [(by_id.get(id(v), v), m) for v, m in accesses]
            future_modes = [(f, "".join(sorted(set("".join(m for v, m in accesses if v is f))))
                             or "r") for f in futures]
            concrete = [(v, m) for v, m in accesses if not isinstance(v, Future)]
            return concrete, future_modes, cores
    accesses = [(a, "rw") for a in args if not isinstance(a, Future) and span(a) is not None]
    return accesses, [(f, "rw") for f in futures], _cores(kernel, None)


def _leaves(value) -> list:
    return flatten(value)[0]


def _futures_in(a) -> list:
    """The futures an argument is or holds (a container of futures: each a dependency)."""
    if isinstance(a, Future):
        return [a]
    return [x for x in _leaves(a) if isinstance(x, Future)] if is_container(a) else []


def _resolve(a, value_of):
    """``a`` with each future in it replaced by ``value_of(future)``."""
    if isinstance(a, Future):
        return value_of(a)
    if not is_container(a):
        return a
    leaves, treedef = flatten(a)
    if not any(isinstance(x, Future) for x in leaves):
        return a
    return unflatten(treedef, [value_of(x) if isinstance(x, Future) else x for x in leaves])


def _standin(fut: Future):
    """A value of the type ``fut``'s kernel returns, or None where it is not known."""
    launch = fut._launch
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


def _cores(kernel, lanes: int | None) -> int:
    """Cores a launch keeps busy: cuda none (its own budget), numpy one, cpu its threads,
    or one where the run is too small for the parallel driver."""
    if kernel.backend_name == "cuda":
        return 0
    if kernel.backend_name != "cpu":
        return 1
    from .backends.cpu.driver import PARALLEL_GANGS
    total = _total_cores()
    threads = min(int(kernel.options.get("threads") or total), total)
    if lanes is not None and lanes < PARALLEL_GANGS:
        return 1
    return max(1, threads)
