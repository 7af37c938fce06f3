"""The passes and the one pipeline list that the compiler, dump-ir, the notebook magics
and the tests all use.

Each pass is a module with one public function ``Function -> Function``.
"""

from __future__ import annotations

from typing import Callable

from ..ir.core import Function
from ..ir.verifier import verify
from .instrument import Sites, instrument
from .linearize import linearize
from .simplify import simplify
from .syncpoints import find_sync_points
from .uniformity import analyze_uniformity

#: (name, function, is the result predicated?) in order.  ``uniformity`` takes the
#: varying parameter names as well; the others take only the function.
PIPELINE: list[tuple[str, Callable, bool]] = [
    ("uniformity", analyze_uniformity, False),
    ("linearize", linearize, True),
    ("simplify", simplify, True),
    ("syncpoints", find_sync_points, True),
]
PASS_NAMES = [name for name, _, _ in PIPELINE]
#: passes that run only when asked for (``run_pipeline``'s arguments), after the named
#: pass: ``instrument`` for a kernel's profiled twin (``profile=``, hydra.profile)
OPTIONAL: dict[str, tuple[str, Callable]] = {"instrument": ("uniformity", instrument)}


def run_pipeline(fn: Function, varying_params: set[str], stop_after: str | None = None,
                 check: bool = False, linearized: bool = True,
                 profile: Sites | None = None) -> Function:
    """Run the passes in order (up to and including ``stop_after``), verifying the IR
    after each one when ``check`` is set.  ``linearized=False`` skips linearization:
    the structured form with varying branches, sync points marked, for backends
    whose hardware handles divergence (one GPU thread per lane).  ``profile``: count
    lanes per region into these sites (``instrument``, after uniformity)."""
    if stop_after is not None and stop_after not in PASS_NAMES:
        raise ValueError(f"unknown pass {stop_after!r}; the passes are {', '.join(PASS_NAMES)}")
    if check:
        verify(fn)
    for name, run, predicated in PIPELINE:
        if name == "linearize" and not linearized:
            continue
        predicated = predicated and linearized
        fn = run(fn, varying_params) if name == "uniformity" else run(fn)
        if name == OPTIONAL["instrument"][0] and profile is not None:
            fn = instrument(fn, profile)  # (verified with the pass it follows)
        if check:
            verify(fn, predicated=predicated)
        if name == stop_after:
            break
    return fn


__all__ = ["PIPELINE", "PASS_NAMES", "OPTIONAL", "run_pipeline", "analyze_uniformity", "linearize",
           "simplify", "find_sync_points", "instrument", "Sites"]
