"""CPU backend: predicated SSA -> LLVM IR with explicit vectors, compiled by llvmlite and run
on all cores (see ``backend.CpuBackend``).

Modules: ``vectors`` (gang geometry, value representations), ``emit`` (the LLVM text
builder), ``arith`` / ``memory`` (per-op rules), ``codegen`` (``lowerable``: what it
lowers, and one phase -> one kernel), ``phases`` (the cutter's runs as kernels, host
steps between them, running it), ``driver`` (running a kernel on the threads),
``native`` (compiling, caching, loading and calling machine code), ``backend`` (compile
and dump), ``vecmath`` (vector math functions).

``hydra.backends.get_backend("cpu")`` imports ``CpuBackend`` from this package, and
``default_backend()`` picks "cpu" where it imports.
"""

from .backend import CpuBackend

__all__ = ["CpuBackend"]
