"""The numba drivers that run a generated LLVM kernel over gangs, on one core or all.

Takes: the LLVM text of one phase kernel (``codegen``), its symbol, and what each of its
arguments is ("scalar", "buf" = a per-lane buffer, "array" = data + shape + strides).
Guarantees: ``Driver.run(n, args, err, threads)`` runs all gangs of ``n`` lanes (or
stops them all at Ctrl-C, see ``interrupt``):
small runs on the calling thread (a plain ``@njit`` driver), larger ones with a
``prange`` over the threads, each of which calls the kernel; the kernel takes small
chunks of gangs from a shared atomic counter until none are left (dynamic scheduling:
numba's own prange schedule is static, which left one core idle when cheap and
expensive gangs, like aobench's sky and hit pixels, sat in different halves).

The kernel is linked into a numba ``CodeLibrary`` from inside a small ``@intrinsic``
that unpacks arrays into data pointers, shapes and strides; LLVM then inlines it into
the driver.  With ``cache=True`` the driver source is written to a file under the cache
directory named by the kernel's hash and its functions use numba's disk cache: a second
process loads machine code and never builds the library (the intrinsic's codegen, which
needs the LLVM text, does not run on a cache hit).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys

import llvmlite.binding as llvm
import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from . import interrupt
from .stops import INTERRUPTED
from .vectors import init_llvm

#: key -> (kernel LLVM text, vecmath module texts), for the intrinsic's codegen
_SOURCES: dict[str, tuple[str, list[str]]] = {}
_LIBRARIES: dict[str, object] = {}
#: prange drivers are started only when a run has at least this many gangs
PARALLEL_GANGS = 64
#: a loop-free kernel over at least this many gangs (about 4 million lanes) still
#: listens for Ctrl-C
INTERRUPTIBLE_GANGS = 1 << 18


def cache_dir() -> str:
    return os.environ.get("HYDRA_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "hydra")


def _library(context, key: str):
    """The CodeLibrary holding kernel ``key`` (built once per process)."""
    lib = _LIBRARIES.get(key)
    if lib is None:
        init_llvm()
        text, extra = _SOURCES[key]
        lib = context.codegen().create_library(f"hydra_{key}")
        for t in [text, *extra]:
            mod = llvm.parse_assembly(t)
            mod.verify()
            lib.add_llvm_module(mod)
        _LIBRARIES[key] = lib
    return lib


def make_call(key: str, symbol: str, kinds: list[str]):
    """An ``@intrinsic`` ``call(chunk, ngangs, n, err, *args)`` that calls the kernel."""
    def codegen(context, builder, sig, args):
        context.active_code_library.add_linking_library(_library(context, key))
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
def serial(ngangs, n, err, {args}):
    _call(ngangs, ngangs, n, err, {args})


@numba.njit(parallel=True, nogil=True, cache={cache})
def parallel(threads, ngangs, chunk, n, err, {args}):
    # one call per thread; each takes chunks from the shared counter (dynamic schedule)
    for t in numba.prange(threads):
        _call(chunk, ngangs, n, err, {args})
'''

_CALLS: dict[str, object] = {}


def registered_call(key: str):
    return _CALLS[key]


class Driver:
    """Runs one phase kernel; see the module docstring."""

    def __init__(self, text: str, modules: list[str], symbol: str, kinds: list[str],
                 lanes_per_gang: int, cache: bool, loops: bool = True) -> None:
        self.key = hashlib.sha256((text + "".join(modules) + repr(kinds)).encode()
                                  ).hexdigest()[:24]
        self.G = lanes_per_gang
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
        if not cache:
            scope = {"__name__": name}
            exec(compile(self.source, f"<hydra driver {self.key}>", "exec"), scope)
            mod = type(sys)(name)
            mod.__dict__.update(scope)
            return mod
        os.makedirs(cache_dir(), exist_ok=True)
        path = os.path.join(cache_dir(), name + ".py")
        if not os.path.exists(path):  # numba's cache keys on the file's mtime: write once
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write(self.source)
            os.replace(tmp, path)
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod

    def run(self, n: int, args: list, err: np.ndarray, threads: int,
            one_gang: bool = False) -> None:
        """``err``: from ``stops.error_buffer``.  Ctrl-C stops the run with
        ``KeyboardInterrupt`` (``interrupt``)."""
        ngangs = 1 if one_gang else (n + self.G - 1) // self.G
        installed = (self.loops or ngangs >= INTERRUPTIBLE_GANGS) and interrupt.install()
        try:
            if threads <= 1 or ngangs < PARALLEL_GANGS:
                self.module.serial(ngangs, n, err, *args)
            else:
                # small chunks, handed out dynamically: a few dozen per thread
                chunk = max(1, min(64, ngangs // (threads * 32)))
                old = numba.get_num_threads()
                numba.set_num_threads(threads)
                try:
                    self.module.parallel(threads, ngangs, chunk, n, err, *args)
                finally:
                    numba.set_num_threads(old)
        finally:
            interrupt.restore(installed, err, INTERRUPTED)
