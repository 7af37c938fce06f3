"""The cuda lowerings of the lane-local intrinsics (registered in ``hydra.intrinsics``).

A lowering takes the op and returns the per-lane source expression of the kernel
(``lane`` is the thread's global index, ``N`` the kernel's lane count).  The
cross-lane intrinsics have none: they are sync points, which the host runs between
two kernels by the intrinsic's reference, on the values copied back from the device
(the path that works everywhere, the simulator included: it has no warp shuffles,
ballots or working grid sync).
"""

from __future__ import annotations

from ...intrinsics import lowers
from ...ir.core import Op
from .emit import np_type


@lowers("cuda", "lane")
def _lane(op: Op) -> str:
    return f"{np_type(op.result.type)}(lane)"


@lowers("cuda", "nlanes")
def _nlanes(op: Op) -> str:
    return f"{np_type(op.result.type)}(N)"

