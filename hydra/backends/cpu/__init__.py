"""CPU backend: the SIMD gang compiler.  Predicated SSA -> LLVM IR with explicit vectors,
made machine code by ``hydra.backends.machinecode`` and run on all cores (see
``backend.CpuBackend``).

Modules: ``vectors`` (gang geometry, value representations), ``emit`` (the LLVM text
builder), ``arith`` / ``memory`` (per-op rules), ``codegen`` (``lowerable``: what it
lowers, and one phase -> one kernel; ``persistent``: persistent lanes, eligibility in
``persistplan``), ``phases`` (the cutter's runs as kernels, host steps between them,
running it), ``driver`` (running a kernel on the threads), ``interrupt`` (Ctrl-C),
``backend`` (compile and dump), ``vecmath`` (vector math functions).  Compiling,
caching and loading the machine code, and the executor's generated loops, live in
``hydra.backends.machinecode``.

``hydra.backends.get_backend("cpu")`` imports ``CpuBackend`` from this package, and
``default_backend()`` picks "cpu" where it imports.
"""

from .backend import CpuBackend

__all__ = ["CpuBackend"]
