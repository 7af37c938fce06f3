"""Loading generated machine code: LLVM functions and generated loops as ctypes functions,
in one MCJIT engine per process, behind a memory cache and a disk cache.

What it loads:

- an **LLVM function** called from Python with NumPy arrays (``functions.load``): its
  LLVM text, the modules it links in, its symbol and what each parameter is (scalar,
  an array's data pointer, or data + shape + strides); a generated wrapper reads the
  arrays' struct, so the call releases the GIL and costs what numba's dispatcher did.
  The cpu backend's phase kernels come this way (``cpu/driver.py``).
- a **generated loop** (``loops.compiled``): the Python source of a function ``fused``
  over arrays and scalars (the executor's fused chains, copies, small products), typed
  and lowered by numba (``numbaloops``, imported only on a miss), one native function
  per argument signature; ``background`` builds them on a thread after a kernel's first
  calls (``background.COMPILE_LOOP``: the loop compiler a backend hands the executor).
- an **object file** with an entry symbol (``engine.load_native``: the one path both
  take), and a small unoptimized helper (``engine.jit``: ``cpu/interrupt``'s handler).

Caches: in memory, one ctypes function per key per process (``engine``); on disk, the
object file under ``diskcache.cache_dir()`` named by the code's key and the target's tag
(CPU name and features, llvmlite's version, ``engine.FORMAT``), checksummed: a damaged
entry is a miss, racing writers each leave a whole file.  ``diskcache.load_module`` also
keeps the cuda backend's generated driver modules in numba's cache.  A cache hit needs
neither numba nor a compile.

Guarantees: the machine code is what numba's JIT would make of the same LLVM (its
pipeline, ``engine.optimize``); each key is built at most once per process, and threads
asking for one key at once wait for that one build (``engine.load_native`` holds the
compile lock, which also excludes numba's compiles); a ``Driver`` whose first run
happens on several threads builds once (its own lock).  Errors: a missing entry symbol
raises ``RuntimeError``; an unwritable cache directory warns once
(``diskcache.HydraCacheWarning``) and runs uncached.

Users: ``cpu/`` (the SIMD gang compiler's phases, its interrupt handler, its loop
compiler for the executor) and ``cuda/`` (its driver modules).  This package imports
neither ``cpu/`` nor ``cuda/`` nor ``hydra.executor`` (``tests/test_architecture.py``);
nothing here is imported by ``import hydra``.
"""
