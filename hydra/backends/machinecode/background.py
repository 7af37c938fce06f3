"""Generated loops built in the background: a kernel's first calls do not wait for numba.

Takes: a generated loop (``loops.Loop``) a step is about to call, with the
arguments it would call it with.
Guarantees: ``ready(loop, args)`` is True where the step may call the loop now: its
machine code for these argument types is in this process, or the kernel was compiled
with ``cache=True`` (its loops are built where they run, and stored; a disk-cache hit
loads in milliseconds), or background builds are off (``HYDRA_CPU_BACKGROUND=0``).
Otherwise it queues the loop's build on one background thread (numba types and lowers
it, hydra's pipeline compiles it, as a build in the step would) and returns False, and
the step runs its ops' host rules instead, as for any input it cannot take: the same
values, since the steps that ask (``executor.fuse.Fused``'s elementwise chains,
``executor.opsteps``' ``np.stack`` copies, through ``fuse.loop_ready``) are bit-exact
with their host rules by construction.  Products, whose loops sum in another order than
BLAS, never ask: a kernel's results do not depend on when a build finished.

Why: each generated loop costs numba 0.1-0.5 s to build, and a kernel with a
hand-written backward pass has a dozen or more (the digits CNN's training step: 16,
about 4 s), all at the first call, where NumPy runs the same step in milliseconds.  With
the builds in the background the first call costs the NumPy steps, and the loops take
over as they finish (JIT compilers' tiers).  A build that fails is not retried in the
background: the step's next call builds it itself, and raises its error there.
"""

from __future__ import annotations

import atexit
import contextvars
import os
import queue
import threading

from ...progress import silence_this_thread
from . import loops

#: are generated loops built in the background?  (``HYDRA_CPU_BACKGROUND=0``: never)
ENABLED = os.environ.get("HYDRA_CPU_BACKGROUND", "1") != "0"

_ready: set[tuple] = set()  # (id(loop), argument types) whose machine code is here
_called: set[int] = set()  # loops the steps call directly now (``_LOOPS`` keeps them)
_queued: set[tuple] = set()
_failed: set[tuple] = set()
_held: list[tuple] = []  # queued during a kernel call, started when it returns
_jobs: "queue.Queue" = queue.Queue()
_worker: list[threading.Thread] = []
_lock = threading.Lock()
#: held by the worker through each build: the process exits, and forks, between builds
_building = threading.Lock()
_closing: list[bool] = []  # the interpreter is exiting: no build starts


def ready(loop, args) -> bool:
    """May the step call ``loop`` on ``args`` now?  (module docstring)"""
    if id(loop) in _called:  # the common case, at every step of every call: one lookup
        return True
    key = (id(loop), loops.arg_types(args))
    if key in _ready:
        _called.add(id(loop))  # another signature later builds in the call, as before
        return True
    if not ENABLED or loops.CACHE.get() or key in _failed:
        _ready.add(key)
        return True
    with _lock:
        if key in _ready:
            return True
        if key not in _queued:
            _queued.add(key)
            _held.append((key, loop, loops.signature(args),
                          contextvars.copy_context()))
    return False


class LoopCompiler:
    """The loop compiler for the executor's planner (``compile_loop``) that the cpu
    backend hands it: ``loops.compiled``, whose loops a step may call once ``ready``
    says so."""

    def __call__(self, source: str, label: str = "a generated loop", reassoc: bool = False):
        return loops.compiled(source, label, reassoc)

    ready = staticmethod(ready)


COMPILE_LOOP = LoopCompiler()


def release() -> None:
    """Start the builds ``ready`` queued (the cpu backend's ``phases.Plan.run`` calls it
    when a kernel call returns: during the call the thread would hold numba's lock
    against the builds the call itself waits for, a product's)."""
    with _lock:
        if not _held:
            return
        for job in _held:
            _jobs.put(job)
        _held.clear()
        if not _worker:
            plain_numba_messages()
            t = threading.Thread(target=_work, name="hydra loop builds", daemon=True)
            _worker.append(t)
            t.start()


def wait() -> None:
    """Block until every queued build has finished (tests, benchmarks)."""
    release()
    _jobs.join()


def plain_numba_messages() -> None:
    """Numba's error messages without colour, before the first background build.

    Where colorama is installed, numba colours each error message it builds inside a
    ``colorama.init()`` / ``deinit()`` pair, which replaces ``sys.stdout`` and
    ``sys.stderr`` for the whole process and then puts back the streams it saw.  Numba
    builds such messages while it types a loop (the overloads it tries and drops), so a
    build on this thread put back, in the middle of the caller's work, the streams of
    before: a ``contextlib.redirect_stdout`` or pytest's ``capsys`` of the caller lost
    what it printed (seen in the test suite).  Plain messages touch no stream.  (Numba's
    own switch, ``NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING``, is read once, when numba
    is imported.)"""
    from numba.core import errors
    if type(errors.termcolor()).__name__ != "HighlightColorScheme":
        return

    class Plain(errors._DummyColorScheme):  # what numba uses without colorama
        def code(self, msg):
            return msg

        errmsg = filename = indicate = highlight = reset = code

    errors._termcolor_inst = Plain()


def _work() -> None:
    silence_this_thread()
    while True:
        key, loop, sig, ctx = _jobs.get()
        try:
            with _building:
                if _closing:
                    continue
                ctx.run(loop.function, sig)
                _ready.add(key)
        except Exception:  # noqa: BLE001  (the step's own build raises it, in the kernel)
            _failed.add(key)
        finally:
            _jobs.task_done()


def _finish_at_exit() -> None:
    """Let the build under way finish before the interpreter exits, and start no other.

    The worker is a daemon thread: at exit Python stops it wherever it is, and one
    stopped inside LLVM (which runs without the GIL) while the process tears LLVM's
    globals down crashed the process after its last line (seen once: SIGSEGV at exit of
    examples/digits_cnn.py).  A build takes well under a second."""
    _closing.append(True)
    if _building.acquire(timeout=30):
        _building.release()


def _before_fork() -> None:
    # a child gets no threads: fork between builds, so that no lock of numba's or
    # LLVM's is held in the child by a thread it does not have
    _held_for_fork.append(_building.acquire(timeout=30))
    _lock.acquire()


def _after_fork_in_parent() -> None:
    _lock.release()
    if _held_for_fork.pop():
        _building.release()


def _after_fork_in_child() -> None:
    """The child's own worker starts when it queues a build; the builds the parent had
    queued or under way are queued again by the steps that ask for them."""
    global _lock, _building, _jobs
    _lock, _building, _jobs = threading.Lock(), threading.Lock(), queue.Queue()
    _held_for_fork.clear()
    _worker.clear()
    _queued.clear()
    _held.clear()


_held_for_fork: list[bool] = []
atexit.register(_finish_at_exit)
os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                    after_in_child=_after_fork_in_child)
