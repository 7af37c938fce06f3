"""Backends: each turns the IR into something that runs N lanes.

Each backend declares itself in ``PROTOCOLS`` (``Protocol``: its name, what every
option does there, the dump-ir stages it makes, and whether it takes the structured
IR as well), and the API asks that declaration instead of inspecting the backend.
A backend is a class with ``protocol``, ``lowerable(op) -> (bool, reason)`` (decided
before any code is generated), ``compile(fn, options, structured) -> runner`` and
``dump(fn, stage, options, structured) -> str`` (for its stages): ``fn`` is the
predicated SSA, ``structured()`` builds a fresh copy without linearization (varying
branches kept, sync points marked) for backends whose hardware handles divergence,
and ``runner(args, lanes)`` returns the leaves of the function's result
(``fn.body.terminator.operands``).  Each compiled backend also declares what it
never runs natively and why (``host_only``, which its ``lowerable`` reads).  For the
scheduler (``hydra.scheduler``), ``launch_cores(options, lanes)`` says how many cores one
launch keeps busy (``lanes`` None where unknown); 0 means it holds a stream instead, and
then the backend has ``new_stream()``, ``on_stream(stream)`` (a context: the launch's
device work goes on it) and ``record_event(stream)``.
``numpy`` is the reference and defines the semantics (``host.py``); the others must
agree with it.
"""

from __future__ import annotations

import os

from ..errors import HydraError
from .protocol import (BACKENDS, NO_EFFECT, OPTION_NAMES, PROTOCOLS, Protocol,  # noqa: F401
                       stage_backend)


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
