"""What each backend declares about itself (``Protocol``, ``PROTOCOLS``): its options
and what each does there, the dump-ir stages it makes, whether it takes the structured
IR, and what it never runs natively and why.  The API and the backends read these
declarations; this module imports no backend (``hydra.backends`` finds them)."""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass, field

import numpy as np

from ..intrinsics import INTRINSICS
from ..executor import policy

BACKENDS = ("numpy", "cpu", "cuda")
#: means "accepted, so that code can switch backends, but nothing changes here"
NO_EFFECT = "no effect"


@dataclass(frozen=True)
class Protocol:
    """What a backend declares about itself."""

    name: str
    #: every option a kernel accepts -> what it does on this backend
    options: dict[str, str]
    #: the dump-ir stages it makes (beyond ast, ssa and predicated)
    stages: tuple[str, ...]
    #: does ``compile``/``dump`` use the structured IR (divergence left to hardware)?
    structured: bool
    #: what its code generator never lowers and why: "opcode", "intrinsic NAME" or
    #: "math FN" -> reason (such ops run on the host, all lanes at once, by
    #: ``host.run_op``); a test checks that everything else is lowered natively
    host_only: dict[str, str] = field(default_factory=dict)

    def check_options(self, options: dict) -> None:
        """``TypeError`` naming any option no backend has; ``TypeError``/``ValueError``
        for a value of the wrong kind."""
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise TypeError(f"unknown option(s) {', '.join(map(repr, unknown))}; the "
                            f"options are {', '.join(self.options)}")
        threads = options.get("threads")
        if threads is not None:
            why = f"threads must be a positive int or None (all cores), not {threads!r}"
            if isinstance(threads, (bool, np.bool_)) or not isinstance(threads,
                                                                        (int, np.integer)):
                raise TypeError(why)
            if threads < 1:
                raise ValueError(why)
        if options.get("compaction") is not None:
            policy.of(options["compaction"])


#: the options of ``hydra.compile``: every backend accepts all of them (switching backends
#: never breaks a call), and says what each does there
OPTION_NAMES = ("threads", "fastmath", "boundscheck", "cache", "exactmath", "compaction")


def _options(**meanings: str) -> dict[str, str]:
    return {name: meanings.get(name, NO_EFFECT) for name in OPTION_NAMES}


_HOST_ONLY = {
    "print": "prints come out in lane order, from the host",
    **{f"intrinsic {n}": "cross-lane: runs over all lanes on the host, by its reference"
       for n, e in INTRINSICS.items() if e.cross_lane},
}

_ARRAY_REASON = "per-lane array operation: batched NumPy/BLAS on all lanes"
#: math.gamma and math.lgamma: what the per-example Python program computes
_GAMMA = ("CPython's own math.gamma / math.lgamma (a Lanczos sum, not libm's tgamma / "
          "lgamma, so no native call gives their bits): the host computes them for all lanes "
          "(thread-safe: no global signgam)")
_ARRAY_CUDA = ("per-lane array operation: a host step between the phase kernels, on the "
               "launch's array namespace (CuPy on a GPU, NumPy under the simulator) where "
               "its step is written once for it, else its host rule with explicit, counted "
               "transfers (hydra/backends/cuda/arraysteps.py)")
#: hydra.grad's tape: per-lane stacks in one growable store that the host keeps (a
#: loop that pushes or pops runs on the host: correct first, fast in a later issue)
_TAPE = {op: "hydra.grad's tape (per-lane stacks, grown as lanes push) is kept by the "
             "host" for op in ("tape_push", "tape_pop")}

PROTOCOLS = {
    "numpy": Protocol("numpy", _options(
        compaction="none: the reference runs masked over all lanes, always (it is what "
                   "compaction is checked against)"), (), False),
    "cpu": Protocol("cpu", _options(
        threads="how many cores run the gangs (default: all)",
        fastmath="FMA contraction and reassociation (results may differ in the last bits)",
        boundscheck="False skips the bounds checks of array indexing",
        cache="kernels' object files on disk: a second process compiles nothing, "
              "imports no numba",
        exactmath="math functions call libm per lane: the numpy backend's bits (slower), "
                  "except those NumPy computes with its own SIMD code (float32 exp, log, "
                  "sin, cos, tanh; float64 tanh)",
        compaction="'auto' (default): per-lane array products and varying loops run on "
                   "the active lanes' rows only where few are active; 'off': masked over "
                   "all lanes",
    ), ("numba", "llvm", "asm", "steps"), False, {
        **_HOST_ONLY,
        "global_array": "a captured array: its data is passed to the kernels",
        "local_array": "per-lane arrays are allocated by the host (NumPy)",
        "array": _ARRAY_REASON, "array_store": _ARRAY_REASON,
        "math gamma": _GAMMA, "math lgamma": _GAMMA,
        **_TAPE,
    }),
    "cuda": Protocol("cuda", _options(
        fastmath="numba's fast-math flags and FMA contraction (without it every float +, - "
                 "and * is rounded on its own, as NumPy's)",
        boundscheck="False skips the bounds checks of array indexing",
        cache="numba-cuda's disk cache for the kernels: a second process skips compilation",
    ), ("numba", "ptx", "steps"), True, {
        **_HOST_ONLY,
        # hydra/backends/cuda/crosslane.py
        **{f"intrinsic {n}": "cross-lane: over all lanes on the host by its reference; with "
                             "HYDRA_CUDA_CROSSLANE=warp on a GPU (opt-in, not yet right on "
                             "hardware) warp shuffles, ballots and block trees (crosslane.py)"
           for n in ("lanesum", "laneprod", "lanemin", "lanemax", "laneany", "laneall",
                     "broadcast", "shuffle", "rotate", "prefixsum")},
        "intrinsic atomic_add": "cross-lane: on the host, by its reference; with "
                                "HYDRA_CUDA_CROSSLANE=warp on a GPU, into an integer GPU "
                                "array argument, device atomics (integer sums wrap: any "
                                "order gives the reference's)",
        "any": "the any of a mask reads all lanes: the host computes it",
        "global_array": "a captured array: passed to the kernels as a parameter",
        "array": _ARRAY_CUDA, "array_store": _ARRAY_CUDA,
        "math gamma": _GAMMA, "math lgamma": _GAMMA,
    }),
}


def stage_backend(name: str, stage: str) -> str:
    """The backend that makes dump stage ``stage`` for a kernel of backend ``name``:
    its own if it makes that stage, else the first that does (asm of a numpy kernel)."""
    if stage in PROTOCOLS[name].stages:
        return name
    for other in BACKENDS:
        if stage in PROTOCOLS[other].stages:
            return other
    raise ValueError(f"no backend makes stage {stage!r}")


def cores() -> int:
    """The cores a launch may use by default (the cpu backend's threads, the scheduler's
    budget): numba's ``NUMBA_NUM_THREADS`` (the environment variable, else the CPUs this
    process may run on), read without importing numba."""
    numba = sys.modules.get("numba")
    if numba is not None and hasattr(numba, "config"):
        return int(numba.config.NUMBA_NUM_THREADS)
    return _cores()


@functools.cache
def _cores() -> int:
    env = os.environ.get("NUMBA_NUM_THREADS")
    if env:
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)
