"""Hydra: an SPMD compiler for Python.

Write a per-lane function; ``hydra.compile(fn, lanes=N)`` runs N lanes of it in
lockstep, with masks for divergent control flow.
"""

from . import nn  # per-example layers: ``hydra.nn.softmax`` after ``import hydra`` (~0.3 ms)
from . import random as random  # hydra.random (not in __all__: see there)
from .api import Kernel, compile, spmd
from .dataflow import DependencyError, Future, wait
from .errors import CompileError, HydraError, HydraWarning
from .grad import grad, stop_gradient, value_and_grad
from .profiler import Profile, profile
from .intrinsics import (atomic_add, broadcast, lane, laneall, laneany, lanemax, lanemin,
                         laneprod, lanesum, nlanes, prefixsum, rotate, shuffle)

__version__ = "0.1.0"

__all__ = [
    "compile", "spmd", "Kernel", "Future", "wait", "launch_graph", "DependencyError",
    "CompileError", "HydraError", "HydraWarning", "lane", "nlanes", "lanesum", "laneprod",
    "lanemin", "lanemax", "laneany", "laneall", "broadcast", "shuffle", "rotate", "prefixsum",
    "atomic_add", "nn", "grad", "value_and_grad", "stop_gradient", "profile", "Profile",
]  # not "random": `from hydra import *` must not hide the standard library's


def launch_graph(last: int | None = None):
    """The recent launches with their dependencies and timings; shows itself as SVG."""
    from .launchview import LaunchGraph
    return LaunchGraph.recent(last)


def load_ipython_extension(shell) -> None:
    """``%load_ext hydra``: the ``%%spmd`` and ``%hydra_ir`` magics."""
    from .ipython import load_ipython_extension as load
    load(shell)
