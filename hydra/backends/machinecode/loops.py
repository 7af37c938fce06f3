"""Generated loops as native functions in hydra's disk cache: the loop compiler a
backend hands the executor's planner (``compiled``; ``background.COMPILE_LOOP``).

Takes: the Python source of a generated function named ``fused`` that ``numbaloops``
compiles (``hydra.executor``: the fused elementwise chains, the ``np.stack`` copies and
the small per-lane products; any generated loop over NumPy arrays and scalars that uses
``numbaloops``' helpers).
Guarantees: ``Loop(source)(*args)`` runs it on ``args`` (NumPy arrays, NumPy or Python
scalars) as machine code called through ctypes, with the GIL released, as numba's
``@njit(nogil=True)`` dispatcher did.  Per signature of the arguments (each array's
dtype and rank, each scalar's dtype: ``signature``) the machine code is a native
function that ``engine.load_native`` loads once per process, through the path the phase
kernels take (``functions``): the same MCJIT engine, the same checksummed object files in the disk
cache (``diskcache``), the same names (the code's key, then the target's tag: CPU name
and features, llvmlite's version):

- the key is the SHA-256 of ``FORMAT``, the source and the signature: loops that
  differ in any constant of their source (the per-lane strides they are specialized
  on, the shape) or in an argument's dtype or rank get different entries;
- with ``CACHE`` true (the cpu backend's ``phases.Plan.run`` sets it for kernels compiled with
  ``cache=True``) the object file is read from and written to the disk cache: a new
  process loads it, compiling nothing and not importing numba, so a cached kernel
  with array chains starts as fast as one without; a damaged file (truncated,
  garbage, empty) or one for another CPU is a miss and is rebuilt, and processes
  racing on one entry each see a whole file or none (``diskcache``);
- a miss imports numba (``numbaloops``), which types and lowers the source to LLVM for
  that signature without a Python wrapper (``numbaloops.llvm_ir``); hydra links in a
  wrapper, ``@hydra_loop_<key>_call``, that reads each array's data pointer, shape and
  strides from NumPy's array struct (``functions.array_fields``, as the phases'
  wrappers do) and passes them as numba's array arguments, keeps only that entry
  exported (numba's names of two loops may coincide), and compiles the module with
  ``engine``'s pipeline.

Arrays are typed with numba's "any layout" (``A``): the generated loops index by their
strides (or by strides they are specialized on), never by layout.
"""

from __future__ import annotations

import contextvars
import ctypes
import hashlib

import numpy as np

from ...progress import progress, stage
from . import engine, functions

#: bump when the wrapper or ``numbaloops``' helpers change: older entries are then misses
FORMAT = 1
#: is the kernel that runs the loop compiled with ``cache=True``?  (cpu ``Plan.run``)
CACHE: contextvars.ContextVar[bool] = contextvars.ContextVar("hydra_cache_loops",
                                                            default=False)
#: the keys of the loops this process built (a cache hit builds none)
BUILT: list[str] = []
_CTYPES = {"i1": ctypes.c_int8, "i2": ctypes.c_int16,
           "i4": ctypes.c_int32, "i8": ctypes.c_int64, "u1": ctypes.c_uint8,
           "u2": ctypes.c_uint16, "u4": ctypes.c_uint32, "u8": ctypes.c_uint64,
           "f4": ctypes.c_float, "f8": ctypes.c_double}
_PYTHON = {int: "<i8", float: "<f8", bool: "|b1"}


def signature(args) -> tuple:
    """Per argument, ``("a", dtype, ndim)`` for an array, ``("s", dtype)`` for a
    scalar (dtypes as ``dtype.str``: byte order included)."""
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            out.append(("a", a.dtype.str, a.ndim))
        elif isinstance(a, np.generic):
            out.append(("s", a.dtype.str))
        else:
            out.append(("s", _PYTHON[type(a)]))
    return tuple(out)


def arg_types(args) -> tuple:
    """A cheap stand-in for ``signature`` that tells the same signatures apart (this runs
    at every step of every call)."""
    return tuple([(a.dtype, a.ndim) if isinstance(a, np.ndarray) else type(a) for a in args])


def argtypes(sig: tuple) -> list:
    """The entry point's ctypes argument types: arrays as Python objects (the wrapper
    reads their struct), scalars as C scalars."""
    out = []
    for t in sig:
        d = np.dtype(t[1])
        out.append(ctypes.py_object if t[0] == "a" else
                   ctypes.c_bool if d.kind == "b" else _CTYPES[f"{d.kind}{d.itemsize}"])
    return out


class Loop:
    """One generated loop's native functions, one per signature (see the module
    docstring).  ``label`` names it in the progress notice of a slow build ("building
    <label>")."""

    def __init__(self, source: str, label: str = "a generated loop",
                 reassoc: bool = False) -> None:
        self.source = source
        self.label = label
        self.reassoc = reassoc  # numba's ``fastmath={"reassoc"}``: sums may vectorize
        self._fns: dict[tuple, object] = {}  # signature -> ctypes function
        self._seen: dict[tuple, object] = {}  # argument types -> ctypes function

    def __call__(self, *args) -> None:
        seen = arg_types(args)
        fn = self._seen.get(seen)
        if fn is None:
            fn = self._seen[seen] = self.function(signature(args))
        fn(*args)

    def key(self, sig: tuple) -> str:
        text = f"{FORMAT}\n{sig!r}\n{self.reassoc}\n{self.source}"
        return "loop_" + hashlib.sha256(text.encode()).hexdigest()[:24]

    def function(self, sig: tuple):
        """The ctypes function for argument signature ``sig``, loaded or built."""
        key = self.key(sig)
        with progress(f"building {self.label}"):
            fn = engine.load_native(key, f"hydra_{key}_call", argtypes(sig),
                                    lambda: self.build(sig, key), CACHE.get())
        self._fns[sig] = fn
        return fn

    def build(self, sig: tuple, key: str) -> tuple[bytes, bool]:
        """The object file of the loop for ``sig`` (see the module docstring), and
        whether a process without numba can load it: every function it calls is in
        the process (libm's, found by the dynamic loader), none is one of numba's
        helpers (which only numba's import makes available); a loop that calls one
        runs, but is not stored."""
        mod = self.module(sig, key)
        process = ctypes.CDLL(None)
        calls = [f.name for f in mod.functions if f.is_declaration
                 and not f.name.startswith("llvm.")]
        return (engine.target()[0].emit_object(mod),
                all(hasattr(process, name) for name in calls))

    def module(self, sig: tuple, key: str):
        """The optimized LLVM module of the loop and its wrapper."""
        from . import numbaloops  # numba: only a loop that is not in the cache needs it
        with engine.numba_lock():
            stage("numba: typing and lowering the loop")
            ir, symbol = numbaloops.llvm_ir(self.source, sig, self.reassoc)
            stage("LLVM: optimizing and compiling the loop to machine code")
            entry = f"hydra_{key}_call"
            params = [str(a.type) for a in
                      engine.llvm.parse_assembly(ir).get_function(symbol).arguments]
            mod = engine.kernel_module(ir, [wrapper(entry, symbol, params, sig)], entry)
            mod.verify()
            BUILT.append(key)
            return engine.optimize(mod)

    def inspect_asm(self) -> str:
        """The assembly of the loop for each signature it ran with (built again)."""
        tm = engine.target()[0]
        return "".join(tm.emit_assembly(self.module(sig, self.key(sig))) for sig in self._fns)


def wrapper(entry: str, symbol: str, params: list[str], sig: tuple) -> str:
    """The LLVM text of ``@<entry>``: the loop's arguments as ctypes passes them (arrays
    as ``PyObject*``) in, numba's native arguments for ``symbol`` (LLVM parameter types
    ``params``: return pointer, exception pointer, then each argument, an array as
    meminfo, parent, item count, item size, data, shape, strides) out."""
    head, body, call = [], [], ["ptr %ret", "ptr %exc"]
    rest = params[2:]
    for i, t in enumerate(sig):
        if t[0] == "s":
            ty, rest = rest[0], rest[1:]
            if ty == "i1":  # numba's booleans: ctypes passes a byte
                head.append(f"i8 %a{i}")
                body.append(f"  %a{i}.b = icmp ne i8 %a{i}, 0")
                call.append(f"i1 %a{i}.b")
            else:
                head.append(f"{ty} %a{i}")
                call.append(f"{ty} %a{i}")
            continue
        nd = t[2]
        assert rest[:5] == ["ptr", "ptr", "i64", "i64", "ptr"], (symbol, params)
        rest = rest[5 + 2 * nd:]
        head.append(f"ptr %a{i}")
        lines, shape, strides = functions.array_fields(f"a{i}", nd)
        body += lines
        count = "1"
        for k in range(nd):
            body.append(f"  %a{i}.n{k} = mul i64 {count}, %a{i}.s{k}")
            count = f"%a{i}.n{k}"
        size = np.dtype(t[1]).itemsize
        call += ["ptr null", "ptr null", f"i64 {count}", f"i64 {size}", f"ptr %a{i}.d",
                 *shape, *strides]
    assert not rest and len(call) == len(params), (symbol, params, sig)
    return f"""{functions.FIELD}
define void @{entry}({", ".join(head)}) {{
  %ret = alloca [2 x i64]
  %exc = alloca ptr
{chr(10).join(body)}
  %status = call i32 @{symbol}({", ".join(call)})
  ret void
}}

declare i32 @{symbol}({", ".join(params)})
"""


#: one Loop per (source, reassoc) in this process (``compiled``)
_LOOPS: dict[tuple, "Loop"] = {}


def compiled(source: str, label: str = "a generated loop", reassoc: bool = False) -> "Loop":
    """The native loop of a generated source (one per source per process; its machine
    code per argument signature, in the disk cache with ``cache=True``); ``reassoc``:
    its float sums may be reassociated (``hydra.executor.products``)."""
    key = (source, reassoc)
    return _LOOPS.get(key) or _LOOPS.setdefault(key, Loop(source, label, reassoc))
