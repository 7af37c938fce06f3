"""The one MCJIT engine of the process, LLVM's pipeline, and loading object files.

Takes: LLVM modules (text) or object files, with the symbol to call.
Guarantees:

- ``target()``: the host CPU as numba's JIT sees it (``NUMBA_CPU_NAME``,
  ``NUMBA_CPU_FEATURES`` and ``NUMBA_ENABLE_AVX=0`` included), its target machine, one
  llvmlite MCJIT engine per process, and the tag of both that names cache entries.
- ``optimize(mod)``: the pipeline numba's ``JITCPUCodegen`` runs (per-function O3, a
  cheap O0 module pass with loop rotation, instcombine and jump threading, then O3 with
  the loop vectorizer; its reference-count pruning pass is left out: hydra's code holds
  no references), so the machine code is byte for byte the one numba's JIT made (a test
  compares them).
- ``load_native(key, entry, argtypes, build, cache)``: the ctypes function at ``entry``
  of the object file ``key`` names, loaded into the engine once per process: from the
  engine, else from the disk cache (``diskcache.read_object``, with ``cache``), else
  made by ``build()`` and stored.  One build per key per process: concurrent callers
  wait for the first one's (the compile lock) and get the same function.  The objects
  need no numba runtime: their only undefined symbols are libm's (``exactmath``: exp,
  log, sin, cos, sincos, erf), which the loader finds in the process (Python links libm).
- ``jit(text, symbol)``: a small unoptimized helper's address (``cpu/interrupt``).
- The first use tunes glibc's allocator for per-lane arrays (``_tune_malloc``).
- Compiles hold one lock, and numba's compiler lock when numba is imported (LLVM's
  global context is shared with numba's own compiles; a numba compile that starts on
  another thread while hydra compiles in a process that had not imported numba when
  hydra's compile began is not excluded).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import sys
import threading

import llvmlite
import llvmlite.binding as llvm

from . import diskcache

#: bump when the wrapper or the pipeline changes: older object files are then misses
FORMAT = 1
_LOCK = threading.RLock()
#: object key -> ctypes function, loaded in this process
_LOADED: dict[str, object] = {}


@functools.cache
def init_llvm() -> None:
    """llvmlite 0.50: ``llvm.initialize()`` raises; these three are what the JIT needs
    (the asm parser for the inline-asm identity on loop-carried masks)."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()


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
def numba_lock():
    from numba.core.compiler_lock import global_compiler_lock
    return global_compiler_lock


@contextlib.contextmanager
def locked():
    """hydra's compile lock, and numba's when numba is loaded (see the module docstring)."""
    with _LOCK, numba_lock() if "numba" in sys.modules else contextlib.nullcontext():
        yield


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


def load_native(key: str, entry: str, argtypes: list, build, cache: bool):
    """The ctypes function (``None`` result, ``argtypes``) at symbol ``entry`` of the
    object file ``key`` names: from this process's engine, else from the disk cache,
    else made by ``build()`` (which returns the object file's bytes and whether another
    process can load them; it runs holding the compile lock) and stored.  Every native
    function hydra makes (``functions``: phase kernels; ``loops``: generated loops) goes
    through here: one cache, one file format, one key scheme (the caller's key of the
    code, then the target's tag)."""
    with _LOCK:
        if key in _LOADED:
            return _LOADED[key]
    with locked():
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
    with locked():
        _, engine, _ = target()
        engine.add_module(llvm.parse_assembly(text))
        engine.finalize_object()
        return engine.get_function_address(symbol)
