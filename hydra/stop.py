"""Ctrl-C for launches that run on other threads (SPEC sections 6 and 9).

Python delivers ``KeyboardInterrupt`` to the main thread only.  A kernel running on the
main thread stops by itself (the cpu backend's native handler, ``backends.cpu
.interrupt``; the reference backend's Python loop).  A submitted launch runs on a
worker thread, which no signal reaches, so every kernel also reads one *stop word*,
``WORDS[0]``: the cpu backend's machine code at each gang and loop back edge, the host
rules (the reference backend, host steps of the cpu backend) at each loop iteration.
A kernel that finds it set leaves with ``KeyboardInterrupt`` on its own thread, and
its launch fails with it.

``interrupted`` is what hydra's waits on the main thread (``Future.result``,
``Future.exception``, ``hydra.wait``, a plain call: ``on_ctrl_c`` around each; the
wait at interpreter exit) do when a Ctrl-C reaches them: cancel every launch that has
not started, set the stop word for those that run, wait until they have stopped (they
hold cores), and let the ``KeyboardInterrupt`` go on.  A Ctrl-C that reaches the
program elsewhere stops nothing (launches run on), except at exit: one that ended the
program stops them there.  The word is cleared when the last launch told to stop
has finished, so later launches run (until then a launch started meanwhile, say
from another thread, stops at once too).  A cuda launch in the simulator is stopped by
an exception raised in the simulator's threads (``stop_simulator``); one on a GPU
cannot be stopped: it is not waited for and runs to its end.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import ctypes
import os
import threading
import time
import weakref

import numpy as np

#: [0] the stop word every kernel reads; [1] the address of Python's C SIGINT handler
#: (``backends.cpu.interrupt``'s native handler calls it)
WORDS = np.zeros(2, np.int64)
#: how long the main thread waits for stopped launches before the KeyboardInterrupt
#: goes on regardless (they stop within microseconds; a reference backend launch
#: finishes the NumPy operation it is in first)
GRACE = 5.0

_lock = threading.Lock()
_stopping: set = set()  # launches told to stop that have not finished


def check() -> None:
    """The poll of Python-level loops (the host rules' ``while``)."""
    if WORDS[0]:
        raise KeyboardInterrupt


def finished(launch) -> None:
    """``launch`` has finished: the last one told to stop clears the stop word."""
    with _lock:
        if launch in _stopping:
            _stopping.discard(launch)
            if not _stopping:
                WORDS[0] = 0


def reset() -> None:
    """After a Ctrl-C that stopped a kernel on the main thread: clear the word that the
    native handler set, unless launches told to stop are still running."""
    with _lock:
        if not _stopping:
            WORDS[0] = 0


@contextlib.contextmanager
def on_ctrl_c(scheduler, future=None):
    """Around a wait of ``hydra.dataflow``: a ``KeyboardInterrupt`` on the main thread
    that is not ``future``'s own failure is a Ctrl-C, which stops every launch of
    ``scheduler()`` (the scheduler then, or None: ``interrupted``) and goes on."""
    try:
        yield
    except KeyboardInterrupt as e:
        own = future is not None and future.done() and not future.cancelled() \
            and future._exception is e
        current = scheduler()
        if not own and current is not None \
                and threading.current_thread() is threading.main_thread():
            interrupted(current)
        raise


def interrupted(scheduler) -> None:
    """A Ctrl-C reached a wait on the main thread: stop every launch (see the module
    docstring) and return once they have stopped; the caller re-raises."""
    with scheduler.lock:
        launches = [(x, x.future) for x in scheduler.outstanding.values()
                    if x.future is not None]
    # not under the lock: a done callback (cancelling runs them) may call a kernel
    running = [(x, f) for x, f in launches if not f.cancel() and f.running()
               and _stoppable(x)]
    with scheduler.lock:  # those still outstanding call ``finished`` later
        running = [(x, f) for x, f in running if scheduler.outstanding.get(x.id) is x]
        if running:
            with _lock:
                _stopping.update(x for x, _ in running)
                WORDS[0] = 1
    futures = [f for _, f in running]
    simulated = any(x.gpu for x, _ in running)
    deadline = time.monotonic() + GRACE
    while futures and time.monotonic() < deadline:
        if simulated:  # also the simulator's threads started since
            stop_simulator()
        try:
            futures = list(cf.wait(futures, timeout=0.05).not_done)
        except KeyboardInterrupt:  # more Ctrl-C while they stop: they are stopping
            pass


def _stoppable(launch) -> bool:
    """Whether a running launch can be stopped: every cpu and reference backend kernel
    (they read the stop word), cuda in the simulator (``stop_simulator``); not cuda
    on a GPU."""
    return not launch.gpu or cuda_simulated()


class SimulatorStopped(Exception):
    """Raised in the CUDA simulator's threads to stop a kernel (an ``Exception``: the
    simulator passes it to the thread that launched the kernel, which raises
    ``KeyboardInterrupt`` for it, ``backends.cuda.launch``)."""


def stop_simulator() -> None:
    """Stop the kernel the CUDA simulator runs: raise ``SimulatorStopped`` in each of its
    threads (one per CUDA thread; a kernel runs there as Python) at its next bytecode."""
    if not cuda_simulated():
        return
    from numba.cuda.simulator.kernel import BlockThread
    for t in threading.enumerate():
        if isinstance(t, BlockThread) and t.ident is not None and t not in _signalled:
            _signalled.add(t)  # once: a second one could land in its handler of the first
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(t.ident),
                                                       ctypes.py_object(SimulatorStopped))


_signalled: weakref.WeakSet = weakref.WeakSet()


def cuda_simulated() -> bool:
    """Whether cuda runs on numba's simulator (``NUMBA_ENABLE_CUDASIM``)."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "") not in ("", "0")
