"""Machine code for the cpu backend without numba: compile, cache, load and call kernels.

Takes: a phase kernel's LLVM text (``codegen``), its vector-math modules, its symbol and
what each argument is ("scalar", "buf" = a per-lane buffer, "array").
Guarantees:

- ``load(...)`` returns a ctypes function ``call(chunk, ngangs, n, err, *args)`` that
  runs the kernel with the GIL released: a small generated wrapper, ``@<symbol>_call``,
  takes the buffers and arrays as Python objects and reads their data pointers, shapes
  and strides from NumPy's array struct (``PyArrayObject_fields``: data at byte 16,
  dimensions at 32, strides at 40), so a call costs what numba's dispatcher cost
  (reading ``arr.ctypes.data`` in Python costs 0.75 us per array).
- The module is optimized by the pipeline numba's ``JITCPUCodegen`` runs (per-function
  O3, a cheap O0 module pass with loop rotation, instcombine and jump threading, then
  O3 with the loop vectorizer, for the host CPU name and features; its reference-count
  pruning pass is left out: kernels hold no references), so the machine code is
  byte for byte the one numba's JIT made (a test compares them); it is compiled to an
  object file with the same target machine and loaded into one llvmlite MCJIT engine
  per process, the path a cache hit takes too.  The objects need no numba runtime: their
  only undefined symbols are libm's (``exactmath``: exp, log, sin, cos, sincos, erf),
  which the loader finds in the process (Python links libm).
- With ``cache=True`` the object file is stored under ``diskcache.cache_dir()``, named
  by the kernel and the target (triple, CPU name and features, llvmlite's version),
  checksummed (``diskcache.read_object``): a new process loads it without compiling and
  without importing numba; a damaged file is a miss and is rebuilt.  ``load_native``
  is that path for any native function hydra makes: the generated loops of
  ``nativeloops`` (fused chains) take it too.
- The first use tunes glibc's allocator for per-lane arrays (``_tune_malloc``).
- Compiles hold one lock, and numba's compiler lock when numba is imported (LLVM's
  global context is shared with numba's own compiles; a numba compile that starts on
  another thread while hydra compiles in a process that had not imported numba when
  hydra's compile began is not excluded).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
import sys
import threading

import llvmlite
import llvmlite.binding as llvm

from ...progress import stage
from .. import diskcache
from .vectors import init_llvm

#: bump when the wrapper or the pipeline changes: older object files are then misses
FORMAT = 1
_LOCK = threading.RLock()
#: kernel key -> ctypes function, loaded in this process
_LOADED: dict[str, object] = {}
#: the symbols of the kernels this process compiled (a cache hit compiles none)
BUILT: list[str] = []
_CTYPES = {"double": ctypes.c_double, "float": ctypes.c_float, "i64": ctypes.c_int64,
           "i32": ctypes.c_int32, "i16": ctypes.c_int16, "i8": ctypes.c_int8}
#: NumPy's ``PyArrayObject_fields``: byte offsets of data, dimensions, strides
_DATA, _DIMS, _STRIDES = 16, 32, 40


#: glibc's ``mallopt`` parameters, and the values ``target`` sets (see ``_tune_malloc``)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 << 20


def _tune_malloc() -> None:
    """Serve allocations below 32 MiB from the heap and keep up to 64 MiB of freed heap,
    as glibc itself does once the process has freed a 32 MiB block (its dynamic mmap
    threshold; glibc only, ``HYDRA_MALLOC=system`` leaves it alone).

    Why: per-lane arrays are fresh NumPy arrays of hundreds of KiB per step; at glibc's
    initial 128 KiB threshold each is an ``mmap``, page faults and an ``munmap`` (or a
    heap trimmed and regrown each step), which doubled the time of a digits training
    step.  A process that compiles with numba or LLVM raises the threshold on the way as
    a side effect; one that loads everything from the disk cache did not, and ran the
    same machine code twice as slowly."""
    if os.environ.get("HYDRA_MALLOC", "") == "system":
        return
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018  (glibc: the knobs below are its own)
    except (OSError, AttributeError):
        return
    libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    libc.mallopt(_M_TRIM_THRESHOLD, 2 * MMAP_THRESHOLD)


@functools.cache
def target():
    """(target machine, MCJIT engine, cache tag): the host CPU as numba's JIT sees it
    (``NUMBA_CPU_NAME``, ``NUMBA_CPU_FEATURES`` and ``NUMBA_ENABLE_AVX=0`` included).
    The first call also tunes the allocator (``_tune_malloc``)."""
    _tune_malloc()
    init_llvm()
    cpu = os.environ.get("NUMBA_CPU_NAME") or llvm.get_host_cpu_name()
    features = os.environ.get("NUMBA_CPU_FEATURES")
    if features is None:
        features = "" if cpu == "generic" else llvm.get_host_cpu_features().flatten()
        if os.environ.get("NUMBA_ENABLE_AVX", "") == "0":
            features = ",".join(f for f in features.split(",") if not f[1:].startswith("avx"))
    triple = llvm.get_process_triple()
    tm = llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=features, opt=3, reloc="static", codemodel="jitdefault", jit=True)
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
    tag = hashlib.sha256(f"{FORMAT} {triple} {cpu} {features} {llvmlite.__version__}"
                         .encode()).hexdigest()[:12]
    return tm, engine, tag


@functools.cache
def _numba_lock():
    from numba.core.compiler_lock import global_compiler_lock
    return global_compiler_lock


class _Locked:
    """hydra's compile lock, and numba's when numba is loaded (see the module docstring)."""

    def __enter__(self):
        _LOCK.acquire()
        self.numba = _numba_lock() if "numba" in sys.modules else None
        if self.numba is not None:
            self.numba.acquire()

    def __exit__(self, *exc):
        if self.numba is not None:
            self.numba.release()
        _LOCK.release()


def _pass_builder(tm, opt: int, loop_vectorize: bool):
    pto = llvm.create_pipeline_tuning_options()
    pto.speed_level = opt
    pto.slp_vectorization = False
    pto.loop_vectorization = loop_vectorize
    return llvm.create_pass_builder(tm, pto)


def optimize(mod):
    """``mod`` through numba's JIT pipeline (``CPUCodeLibrary.add_llvm_module`` and
    ``finalize``): the optimized module."""
    tm, engine, _ = target()
    layout = str(engine.target_data)
    mod.data_layout = layout
    for fn in mod.functions:
        pb = _pass_builder(tm, 3, True)
        pb.getFunctionPassManager().run(fn, pb)
    # numba links each module into an empty one that names the target
    final = llvm.parse_assembly(f'target triple = "{llvm.get_process_triple()}"\n'
                                f'target datalayout = "{layout}"\n')
    final.link_in(mod)
    pb = _pass_builder(tm, 0, False)
    cheap = pb.getModulePassManager()
    cheap.add_loop_rotate_pass()
    cheap.add_instruction_combine_pass()
    cheap.add_jump_threading_pass()
    cheap.run(final, pb)
    pb = _pass_builder(tm, 3, True)
    pb.getModulePassManager().run(final, pb)
    return final


def kernel_module(text: str, modules: list[str], symbol: str):
    """The kernel and its vector-math helpers as one module in which only the kernel is
    exported (kernels sharing helpers never clash)."""
    init_llvm()
    mod = llvm.parse_assembly(text)
    for t in modules:
        mod.link_in(llvm.parse_assembly(t))
    for fn in mod.functions:
        if not fn.is_declaration and fn.name != symbol:
            fn.linkage = "internal"
    for g in mod.global_variables:
        if not g.is_declaration:
            g.linkage = "internal"
    return mod


class _Param:
    def __init__(self, text: str) -> None:
        self.type, name = text.rsplit(" ", 1)
        self.name = name.lstrip("%")


def wrapper(text: str, symbol: str, kinds: list[str]) -> tuple[str, list]:
    """The LLVM text of ``@<symbol>_call`` (see the module docstring) and its ctypes
    argument types, from the kernel's signature in its LLVM ``text``."""
    head = re.search(rf"^define void @{symbol}\((.*)\)", text, re.M)
    params = [_Param(p) for p in head.group(1).split(", ")]
    rest = params[4:]
    sig = ["i64 %chunk", "i64 %ngangs", "i64 %n", "ptr %err"]
    body = [f"  %err.d = call ptr @hydra_data(ptr %err, i64 {_DATA})"]
    argtypes = [ctypes.c_int64] * 3 + [ctypes.py_object]
    call = ["i64 %chunk", "i64 %ngangs", "i64 %n", "ptr %err.d"]
    for i, kind in enumerate(kinds):
        ty = rest[0].type
        if kind == "scalar":
            sig.append(f"{ty} %a{i}")
            argtypes.append(_CTYPES[ty])
            call.append(f"{ty} %a{i}")
            rest = rest[1:]
            continue
        data, rest = rest[0], rest[1:]
        sig.append(f"ptr %a{i}")
        argtypes.append(ctypes.py_object)
        body.append(f"  %a{i}.d = call ptr @hydra_data(ptr %a{i}, i64 {_DATA})")
        call.append(f"ptr %a{i}.d")
        if kind == "array":  # the shape and strides parameters that follow the data
            nd = sum(1 for p in rest if p.name.startswith(f"{data.name}.s"))
            for field, off in (("s", _DIMS), ("t", _STRIDES)):
                body.append(f"  %a{i}.{field} = call ptr @hydra_data(ptr %a{i}, i64 {off})")
                for k in range(nd):
                    body.append(f"  %a{i}.{field}{k}.p = getelementptr i64, ptr %a{i}.{field}, "
                                f"i64 {k}")
                    body.append(f"  %a{i}.{field}{k} = load i64, ptr %a{i}.{field}{k}.p")
                    call.append(f"i64 %a{i}.{field}{k}")
            rest = rest[2 * nd:]
    assert not rest and len(call) == len(params), (symbol, kinds)
    types = ", ".join(p.type for p in params)
    text = f"""
define internal ptr @hydra_data(ptr %obj, i64 %off) alwaysinline {{
  %p = getelementptr i8, ptr %obj, i64 %off
  %v = load ptr, ptr %p
  ret ptr %v
}}

define void @{symbol}_call({", ".join(sig)}) {{
{chr(10).join(body)}
  call void @{symbol}({", ".join(call)})
  ret void
}}

declare void @{symbol}({types})
"""
    return text, argtypes


def compile_object(text: str, modules: list[str], symbol: str, kinds: list[str]) -> bytes:
    """The object file of the kernel and its wrapper (the caller holds ``_Locked``)."""
    stage(f"LLVM: optimizing and compiling the kernel ({text.count(chr(10))} lines of "
          f"LLVM IR) to machine code")
    mod = kernel_module(text, modules, symbol)
    # the kernel stays one function (not inlined into its wrapper): its machine code is
    # the kernel's alone, as ``dump-ir asm`` shows it
    mod.get_function(symbol).add_function_attribute("noinline")
    mod.link_in(llvm.parse_assembly(wrapper(text, symbol, kinds)[0]))
    mod.verify()
    mod = optimize(mod)
    BUILT.append(symbol)
    return target()[0].emit_object(mod)


def load(key: str, text: str, modules: list[str], symbol: str, kinds: list[str],
         cache: bool):
    """The kernel's ctypes function (see the module docstring), compiled or loaded from
    the disk cache once per process."""
    return load_native(key, f"{symbol}_call", wrapper(text, symbol, kinds)[1],
                       lambda: (compile_object(text, modules, symbol, kinds), True), cache)


def load_native(key: str, entry: str, argtypes: list, build, cache: bool):
    """The ctypes function (``None`` result, ``argtypes``) at symbol ``entry`` of the
    object file ``key`` names: from this process's engine, else from the disk cache,
    else made by ``build()`` (which returns the object file's bytes and whether another
    process can load them; it runs holding the compile lock) and stored.  Every native
    function hydra makes (phase kernels, ``nativeloops``' generated loops) goes through
    here: one cache, one file format, one key scheme (the caller's key of the code, then
    the target's tag)."""
    with _LOCK:
        if key in _LOADED:
            return _LOADED[key]
    with _Locked():
        if key in _LOADED:
            return _LOADED[key]
        name = f"hydra_{key}_{target()[2]}.o"
        data = diskcache.read_object(name) if cache else None
        if data is None:
            data, portable = build()
            if cache and portable:
                diskcache.write_object(name, data)
        engine = target()[1]
        engine.add_object_file(llvm.ObjectFileRef.from_data(data))
        engine.finalize_object()
        address = engine.get_function_address(entry)
        if not address:
            raise RuntimeError(f"hydra: {entry} is not in its object file")
        fn = ctypes.CFUNCTYPE(None, *argtypes)(address)
        _LOADED[key] = fn
        return fn


def jit(text: str, symbol: str) -> int:
    """The address of ``symbol`` in the LLVM module ``text``, compiled without
    optimization (for small helpers such as ``interrupt``'s signal handler)."""
    with _Locked():
        _, engine, _ = target()
        engine.add_module(llvm.parse_assembly(text))
        engine.finalize_object()
        return engine.get_function_address(symbol)
