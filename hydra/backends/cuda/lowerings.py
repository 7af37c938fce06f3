"""The cuda lowerings of every lane intrinsic (registered in ``hydra.intrinsics``).

Two kinds, by where they run:

- ``lane`` and ``nlanes`` are lane-local: their lowering takes the op and returns
  the per-lane source expression of the kernel (``lane`` is the thread's global
  index, ``N`` the kernel's lane count).
- The cross-lane intrinsics are sync points: the host runs them between two kernel
  phases, on the phase's values copied back from the device.  Their lowering takes
  ``(args, mask, lanes, fail)`` like the reference and computes the same thing; this
  is the path that works everywhere, the simulator included (it has no warp
  shuffles, ballots or working grid sync).
"""

from __future__ import annotations

import numpy as np

from ...intrinsics import INTRINSICS, lowers
from ...ir.core import Op
from .emit import np_type


@lowers("cuda", "lane")
def _lane(op: Op) -> str:
    return f"{np_type(op.result.type)}(lane)"


@lowers("cuda", "nlanes")
def _nlanes(op: Op) -> str:
    return f"{np_type(op.result.type)}(N)"


def _on_host(name: str):
    reference = INTRINSICS[name].reference

    def run(args, mask, lanes, fail):
        host = [np.asarray(a.copy_to_host() if hasattr(a, "copy_to_host") else a)
                if not isinstance(a, np.ndarray) else a for a in args]
        return reference(host, np.asarray(mask, dtype=bool), lanes, fail)
    run.__name__ = f"cuda_{name}"
    run.__doc__ = f"{name} between two kernel phases, on the host"
    return run


for _name, _entry in INTRINSICS.items():
    if _entry.cross_lane:
        lowers("cuda", _name)(_on_host(_name))

#: intrinsics a kernel computes itself; the others are sync points run by the host
LANE_LOCAL = frozenset(n for n, e in INTRINSICS.items() if not e.cross_lane)
