"""Backends: each turns predicated SSA into something that runs N lanes.

A backend is a class with ``compile(fn, options, structured) -> runner`` where ``fn``
is the predicated SSA, ``structured()`` builds a fresh copy of the IR without
linearization (varying branches kept, sync points marked) for backends whose
hardware handles divergence, and ``runner(args, lanes)`` returns the leaves of the
function's result (``fn.body.terminator.operands``).  An optional
``dump(fn, stage, options) -> str`` gives the backend's dump-ir stages.  ``numpy`` is
the reference and defines the semantics; the others must agree with it.
"""

from __future__ import annotations

import os

from ..errors import HydraError

BACKENDS = ("numpy", "cpu", "cuda")


def default_backend() -> str:
    """``HYDRA_BACKEND`` if set, else the fastest backend that is available."""
    env = os.environ.get("HYDRA_BACKEND")
    if env:
        return env
    return "cpu" if available("cpu") else "numpy"


def available(name: str) -> bool:
    try:
        get_backend(name)
    except (HydraError, ImportError):
        return False
    return True


def get_backend(name: str):
    if name == "numpy":
        from .numpy_backend import NumpyBackend
        return NumpyBackend
    if name == "cpu":
        from .cpu import CpuBackend  # noqa: F401  (lands with the CPU backend)
        return CpuBackend
    if name == "cuda":
        from .cuda import CudaBackend
        return CudaBackend
    raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
