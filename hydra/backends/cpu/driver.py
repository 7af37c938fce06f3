"""The driver that runs a generated LLVM kernel over gangs, on one core or all.

Takes: the LLVM text of one phase kernel (``codegen``), its symbol, and what each of its
arguments is ("scalar", "buf" = a per-lane buffer, "array" = data + shape + strides).
Guarantees: ``Driver.run(n, args, err, threads)`` runs all gangs of ``n`` lanes (or
stops them all at Ctrl-C, see ``interrupt``): small runs on the calling thread, larger
ones on ``threads`` threads (the calling one and a pool's), each of which calls the
kernel's native entry point; the kernel takes small chunks of gangs from a shared
atomic counter until none are left (dynamic scheduling: a static split left one core
idle when cheap and expensive gangs, like aobench's sky and hit pixels, sat in
different halves).

The entry point is a ctypes function (``hydra.backends.machinecode.functions``: the GIL
is released while it runs) over machine code that llvmlite compiles from the kernel's
LLVM once, with numba's optimization pipeline, and no numba typing or lowering: a numba
``@njit`` driver around the kernel (issue 11's design) cost its first call 0.1-0.5 s of
numba's own compilation, and a process loading it from numba's cache 0.4 s of numba's
registries (and ``import numba``).  With ``cache=True`` the kernel's object file is
stored in the disk cache (``machinecode.diskcache``): a second process loads it,
compiling nothing and not importing numba.  The first run of a driver builds it
explicitly, under ``hydra``'s progress notice (``hydra.progress``), which names the
stage it is in; threads that run one driver first wait for that one build.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...progress import progress
from ..machinecode import functions
from . import interrupt
from .stops import INTERRUPTED

#: runs of fewer gangs than this stay on the calling thread
PARALLEL_GANGS = 64
#: a loop-free kernel over at least this many gangs (about 4 million lanes) still
#: listens for Ctrl-C
INTERRUPTIBLE_GANGS = 1 << 18


class Driver:
    """Runs one phase kernel; see the module docstring."""

    def __init__(self, text: str, modules: list[str], symbol: str, kinds: list[str],
                 lanes_per_gang: int, cache: bool, label: str = "a kernel",
                 loops: bool = True) -> None:
        self.key = hashlib.sha256((text + "".join(modules) + repr(kinds)).encode()
                                  ).hexdigest()[:24]
        self.G = lanes_per_gang
        self.label = label
        #: Ctrl-C is caught for kernels with loops (or runs of many gangs); a short
        #: straight-line run is over long before a person reacts, and then costs
        #: nothing (installing the handler costs microseconds a run)
        self.loops = loops
        self.text, self.modules, self.symbol = text, modules, symbol
        #: the entry point's parameters: chunk, ngangs, n, the error buffer, the kernel's
        self.kinds = ["scalar"] * 3 + ["buf"] + kinds
        self.cache = cache
        #: the kernel's native entry point (``functions.load``), at the first run
        self.call = None
        #: threads that run the kernel first wait for one build (and one notice)
        self._lock = threading.Lock()
        #: positions of i8 scalars (bools): ctypes takes them as Python ints
        types = functions.wrapper(text, symbol, self.kinds)[1]
        self.bytes = [i for i, t in enumerate(types[4:]) if t is ctypes.c_int8]

    @property
    def source(self) -> str:
        """The entry point's LLVM (``dump-ir numba``: what calls the kernel)."""
        return (f"; hydra cpu driver for kernel {self.key}: each thread calls this through "
                f"ctypes (the GIL released)\n"
                + functions.wrapper(self.text, self.symbol, self.kinds)[0].lstrip("\n"))

    def run(self, n: int, args: list, err: np.ndarray, threads: int,
            one_gang: bool = False) -> None:
        """``err``: from ``stops.error_buffer``.  Ctrl-C stops the run with
        ``KeyboardInterrupt`` (``interrupt``)."""
        ngangs = 1 if one_gang else (n + self.G - 1) // self.G
        if self.call is None:
            self.build()
        for i in self.bytes:
            args[i] = int(args[i])
        installed = (self.loops or ngangs >= INTERRUPTIBLE_GANGS) and interrupt.install()
        interrupted = False
        try:
            if threads <= 1 or ngangs < PARALLEL_GANGS:
                self.call(ngangs, ngangs, n, err, *args)
            else:
                interrupted = self._parallel(threads, ngangs, n, err, args)
        finally:
            interrupt.restore(installed, err, INTERRUPTED)
        if interrupted:  # Python's handler raised while we waited; the kernels had ended
            raise KeyboardInterrupt

    def build(self) -> None:
        """Make the machine code now (else at the first run: ``hydra.profile`` builds
        first, so that a phase's time is its run's)."""
        with self._lock, progress(f"building the native code of {self.label}"):
            if self.call is None:
                self.call = functions.load(self.key, self.text, self.modules, self.symbol,
                                           self.kinds, self.cache)

    def _parallel(self, threads: int, ngangs: int, n: int, err: np.ndarray,
                  args: list) -> bool:
        """The calling thread and ``threads - 1`` pool threads share the gangs; True if a
        ``KeyboardInterrupt`` arrived while the calling thread waited for the others
        (they stop at the stop word, so the wait goes on: no kernel outlives the run)."""
        # small chunks, handed out dynamically: a few dozen per thread
        chunk = max(1, min(64, ngangs // (threads * 32)))
        work = _pool(threads - 1)
        others = [work.submit(self.call, chunk, ngangs, n, err, *args)
                  for _ in range(threads - 1)]
        interrupted = False
        try:
            self.call(chunk, ngangs, n, err, *args)
        finally:
            for f in others:
                while True:
                    try:
                        f.result()
                        break
                    except KeyboardInterrupt:
                        interrupted = True
        return interrupted


_POOL: list = []


def _pool(workers: int) -> ThreadPoolExecutor:
    """The process's worker threads (grown to ``workers``; the caller is one more)."""
    if not _POOL or _POOL[0]._max_workers < workers:
        if _POOL:
            _POOL.pop().shutdown(wait=False)
        _POOL.append(ThreadPoolExecutor(max_workers=workers,
                                        thread_name_prefix="hydra-cpu"))
    return _POOL[0]


def _forget_pool() -> None:
    """A forked child has none of the parent's threads: it makes its own pool."""
    _POOL.clear()


os.register_at_fork(after_in_child=_forget_pool)
atexit.register(lambda: _POOL and _POOL[0].shutdown(wait=False))
