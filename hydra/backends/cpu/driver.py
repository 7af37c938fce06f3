"""The numba driver that runs a generated LLVM kernel over gangs, on one core or all.

Takes: the LLVM text of one phase kernel (``codegen``), its symbol, and what each of its
arguments is ("scalar", "buf" = a per-lane buffer, "array" = data + shape + strides).
Guarantees: ``Driver.run(n, args, err, threads)`` runs all gangs of ``n`` lanes (or
stops them all at Ctrl-C, see ``interrupt``): small runs on the calling thread, larger
ones on ``threads`` threads (the calling one and a pool's), each of which calls the same
``@njit(nogil=True)`` driver; the kernel takes small chunks of gangs from a shared
atomic counter until none are left (dynamic scheduling: a static split left one core
idle when cheap and expensive gangs, like aobench's sky and hit pixels, sat in
different halves).

The kernel's LLVM module is added to the driver's own ``CodeLibrary`` from inside a small
``@intrinsic`` that unpacks arrays into data pointers, shapes and strides, so LLVM
optimizes and compiles the kernel exactly once, together with the driver.  (It was once
a separate library linked into a serial and a ``prange`` driver: numba then generated
machine code for the kernel five times, in the library itself, the serial driver, the
parfor gufunc, its wrapper and the parallel driver; a 2,000-line kernel took 23 s to
build instead of ~5.)  Only the kernel's symbol (named by its content) is exported; its
vector-math helpers are internal, so kernels sharing them never clash.  With ``cache=True``
the driver source is written to a file under the cache directory named by the kernel's
hash and the driver uses numba's disk cache: a second process loads machine code and
never compiles LLVM (the intrinsic's codegen, which needs the LLVM text, does not run on
a cache hit).  The first run of a driver compiles it explicitly, under ``hydra``'s
progress notice (``hydra.progress``), which names the stage it is in.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import llvmlite.binding as llvm
import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from ...progress import progress, stage
from .. import diskcache
from . import interrupt
from .stops import INTERRUPTED
from .vectors import init_llvm

#: key -> (kernel LLVM text, vecmath module texts), for the intrinsic's codegen
_SOURCES: dict[str, tuple[str, list[str]]] = {}
#: keys whose LLVM this process compiled (a cache hit compiles none)
BUILT: list[str] = []
#: runs of fewer gangs than this stay on the calling thread
PARALLEL_GANGS = 64
#: a loop-free kernel over at least this many gangs (about 4 million lanes) still
#: listens for Ctrl-C
INTERRUPTIBLE_GANGS = 1 << 18


def _module(key: str, symbol: str):
    """Kernel ``key`` and its vector-math helpers as one parsed module in which only the
    kernel's symbol is exported (the helpers are internal: kernels sharing them never
    clash in numba's JIT)."""
    init_llvm()
    text, extra = _SOURCES[key]
    mod = llvm.parse_assembly(text)
    for t in extra:
        mod.link_in(llvm.parse_assembly(t))
    for fn in mod.functions:
        if not fn.is_declaration and fn.name != symbol:
            fn.linkage = "internal"
    for g in mod.global_variables:
        if not g.is_declaration:
            g.linkage = "internal"
    mod.verify()
    return mod


def make_call(key: str, symbol: str, kinds: list[str]):
    """An ``@intrinsic`` ``call(chunk, ngangs, n, err, *args)`` that calls the kernel."""
    def codegen(context, builder, sig, args):
        stage(f"LLVM: optimizing and compiling the kernel ({_SOURCES[key][0].count(chr(10))} "
              f"lines of LLVM IR) to machine code")
        context.active_code_library.add_llvm_module(_module(key, symbol))
        BUILT.append(key)
        llargs = list(args[:3])
        err_arr = context.make_array(sig.args[3])(context, builder, args[3])
        llargs.append(err_arr.data)
        for kind, ty, val in zip(kinds, sig.args[4:], args[4:]):
            if kind == "scalar":
                if isinstance(ty, types.Boolean):
                    val = builder.zext(val, ir.IntType(8))
                llargs.append(val)
                continue
            arr = context.make_array(ty)(context, builder, val)
            llargs.append(arr.data)
            if kind == "array":
                llargs += cgutils.unpack_tuple(builder, arr.shape)
                llargs += cgutils.unpack_tuple(builder, arr.strides)
        fnty = ir.FunctionType(ir.VoidType(), [a.type for a in llargs])
        fn = cgutils.get_or_insert_function(builder.module, fnty, symbol)
        builder.call(fn, llargs)
        return context.get_dummy_value()

    names = [f"a{i}" for i in range(len(kinds))]
    src = (f"def typer(typingctx, g0, g1, n, err, {', '.join(names)}):\n"
           f"    return types.void(g0, g1, n, err, {', '.join(names)}), codegen\n")
    scope = {"types": types, "codegen": codegen}
    exec(src, scope)
    return intrinsic(scope["typer"])


_DRIVER = '''"""hydra cpu driver for kernel {key} (generated)."""
import numba
from hydra.backends.cpu.driver import registered_call

_call = registered_call("{key}")


@numba.njit(nogil=True, cache={cache})
def serial(chunk, ngangs, n, err, {args}):
    # all gangs, taking chunks from the counter in err[7]: any number of threads may
    # call this at once (hydra's pool) and the work balances dynamically
    _call(chunk, ngangs, n, err, {args})
'''

_CALLS: dict[str, object] = {}


def registered_call(key: str):
    return _CALLS[key]


class Driver:
    """Runs one phase kernel; see the module docstring."""

    def __init__(self, text: str, modules: list[str], symbol: str, kinds: list[str],
                 lanes_per_gang: int, cache: bool, label: str = "a kernel",
                 loops: bool = True) -> None:
        self.key = hashlib.sha256((text + "".join(modules) + repr(kinds)).encode()
                                  ).hexdigest()[:24]
        self.G = lanes_per_gang
        self.label = label
        self.built = False
        #: Ctrl-C is caught for kernels with loops (or runs of many gangs); a short
        #: straight-line run is over long before a person reacts, and then costs
        #: nothing (installing the handler costs microseconds a run)
        self.loops = loops
        _SOURCES[self.key] = (text, modules)
        if self.key not in _CALLS:
            _CALLS[self.key] = make_call(self.key, symbol, kinds)
        args = ", ".join(f"a{i}" for i in range(len(kinds)))  # "f(x, )" is valid Python
        self.source = _DRIVER.format(key=self.key, cache=cache, args=args)
        self.module = self._load(cache)

    def _load(self, cache: bool):
        name = f"hydra_driver_{self.key}"
        if name in sys.modules:
            return sys.modules[name]
        uncached = self.source.replace("cache=True", "cache=False")
        if not cache:
            return diskcache.load_module_uncached(name, uncached)
        return diskcache.load_module(name, self.source, uncached)

    def run(self, n: int, args: list, err: np.ndarray, threads: int,
            one_gang: bool = False) -> None:
        """``err``: from ``stops.error_buffer``.  Ctrl-C stops the run with
        ``KeyboardInterrupt`` (``interrupt``)."""
        ngangs = 1 if one_gang else (n + self.G - 1) // self.G
        if not self.built:
            self._build(ngangs, n, err, args)
        installed = (self.loops or ngangs >= INTERRUPTIBLE_GANGS) and interrupt.install()
        interrupted = False
        try:
            if threads <= 1 or ngangs < PARALLEL_GANGS:
                self.module.serial(ngangs, ngangs, n, err, *args)
            else:
                interrupted = self._parallel(threads, ngangs, n, err, args)
        finally:
            interrupt.restore(installed, err, INTERRUPTED)
        if interrupted:  # Python's handler raised while we waited; the kernels had ended
            raise KeyboardInterrupt

    def _parallel(self, threads: int, ngangs: int, n: int, err: np.ndarray,
                  args: list) -> bool:
        """The calling thread and ``threads - 1`` pool threads share the gangs; True if a
        ``KeyboardInterrupt`` arrived while the calling thread waited for the others
        (they stop at the stop word, so the wait goes on: no kernel outlives the run)."""
        # small chunks, handed out dynamically: a few dozen per thread
        chunk = max(1, min(64, ngangs // (threads * 32)))
        work = _pool(threads - 1)
        others = [work.submit(self.module.serial, chunk, ngangs, n, err, *args)
                  for _ in range(threads - 1)]
        interrupted = False
        try:
            self.module.serial(chunk, ngangs, n, err, *args)
        finally:
            for f in others:
                while True:
                    try:
                        f.result()
                        break
                    except KeyboardInterrupt:
                        interrupted = True
        return interrupted

    def _build(self, ngangs: int, n: int, err: np.ndarray, args: list) -> None:
        """Compile (or load from the disk cache) the driver for these argument types,
        before the run, so that the progress notice times the build alone."""
        sig = tuple(numba.typeof(a) for a in (ngangs, ngangs, n, err, *args))
        with progress(f"building the native code of {self.label}"):
            stage("numba: typing and lowering the driver")
            self.module.serial.compile(sig)
        self.built = True


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
