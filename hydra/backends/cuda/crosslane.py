"""Warp- and block-level paths of the cross-lane intrinsics, for values on a GPU.

Takes: a cross-lane intrinsic (``lanesum``/``laneprod``/``lanemin``/``lanemax``/
``laneany``/``laneall``, ``prefixsum``, ``shuffle``, ``rotate``, ``broadcast``) whose
per-lane operand a phase kernel left on the device, and the active mask (on the
device, or None: every lane).  Guarantees: the intrinsic's reference result (its
errors too: same class, message and lane, through an error buffer) without moving
the N values to the host:

- reductions: each block combines its lanes in one fixed tree (a warp by
  ``shfl_down_sync``, ``any``/``all`` by ``ballot_sync``, then the warps' partials
  through shared memory), and the block partials are combined again the same way
  until one is left (the grid-level combine): the same result run to run.
  Integer sums and products wrap, so any order gives NumPy's result exactly; a float
  sum or product may differ from NumPy's pairwise order in the last bits.
- ``prefixsum``: a scan per block (``shfl_up_sync`` within a warp, then the warps'
  totals), the block totals scanned in order by one thread, added back.
- ``shuffle``/``rotate``: a source lane in the reader's own warp that is active
  (``activemask``: the warp may be partial) is read by ``shfl_sync``, any other from
  global memory.
- ``broadcast``: one element of the value (and of the mask) is read back.

Atomics only where their order cannot change the result: ``atomic_add`` into an
integer array that is on the device (a GPU array argument) checks every active lane's
index first (a failure adds nothing, as the reference) and then adds by
``cuda.atomic.add``; into a float array (whose sum depends on the order) or a host
array the host runs it.

``mode()`` selects these paths only on real hardware ("warp"); the CUDA simulator
has no warp intrinsics and keeps the portable path (the host runs the reference),
which CI covers.  ``HYDRA_CUDA_CROSSLANE=block`` selects the same kernels with the
warp steps done in shared memory instead, which the simulator can run (the tests);
``=host`` turns them off.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
from numba import config, cuda

from ... import arraynamespace as an
from ...errors import RUNTIME_ERRORS
from ...intrinsics import INTRINSICS
from ...ir.core import Op
from . import devarrays, launch
from . import warpkernels as wk
from .emit import ErrorSites

#: threads per block of these kernels (whole warps, a power of two)
BLOCK = 256
_REDUCTIONS = {"lanesum": "sum", "laneprod": "prod", "lanemin": "min", "lanemax": "max",
               "laneany": "any", "laneall": "all"}


def mode() -> str | None:
    """"warp" (real hardware), "block" (shared memory only: the simulator can run it),
    or None (the host runs the reference): None unless ``HYDRA_CUDA_CROSSLANE`` asks
    for a device path.  Opt-in until proven on hardware: their first GPU run (an H200,
    2026-11-27) gave wrong ``laneany`` and ``shuffle`` results and an illegal address
    that broke the context for every later launch."""
    chosen = os.environ.get("HYDRA_CUDA_CROSSLANE", "")
    if chosen == "block" or chosen == "warp" and not config.ENABLE_CUDASIM:
        return chosen
    return None


def supports(op: Op) -> bool:
    """An intrinsic these kernels run, of an element type they take."""
    name = op.attrs.get("name")
    if name not in _REDUCTIONS and name not in ("prefixsum", "shuffle", "rotate", "broadcast"):
        return False
    if name in ("shuffle", "rotate") and op.operands[0].type.name == "bool":
        return False  # shfl_sync moves 32- and 64-bit numbers only
    return op.operands[0].type.name in wk.TYPES and (
        not op.results or op.result.type.name in wk.TYPES)


def portable(op: Op) -> bool:
    """A reduction or ``prefixsum`` of a type the kernels do not take: ``run_portable``
    runs it through the launch's array namespace (CuPy on a GPU) where there is one."""
    name = op.attrs.get("name")
    return (name in _REDUCTIONS or name == "prefixsum") and (
        config.ENABLE_CUDASIM or an.choose("cuda") is not np)


def run_portable(op: Op, x, mask, lanes: int):
    """``op`` by the namespace-generic rules of ``hydra.arraynamespace``, on the device:
    a uniform result is one explicit transfer (two where the reduction has no identity
    and must know that some lane is active)."""
    xp = an.choose("cuda")
    name = op.attrs["name"]
    dtype = op.result.type.dtype
    xv = devarrays.view(xp, x)
    mv = None if mask is None else devarrays.view(xp, mask)
    if name == "prefixsum":
        return devarrays.from_view(an.exclusive_sum(xp, xv, mv, dtype))
    monoid = INTRINSICS[name].monoid
    if monoid.identity is None and an.active_count(xp, mv, lanes) == 0:
        raise RUNTIME_ERRORS["inactive"](f"{name} over no active lanes", None, op.loc)
    identity = 0 if monoid.identity is None else monoid.identity
    reduced = an.lane_reduce(xp, monoid.ufunc.__name__, xp.asarray(xv, dtype=dtype), mv,
                             identity)
    devarrays.count("host_round_trips")
    return an.to_host(xp, reduced).astype(dtype)[()]


_kernels: dict = {}


def _kernel(template: str, label: str, **subs):
    key = (label, tuple(sorted(subs.items())))
    if key not in _kernels:
        _kernels[key] = launch.build(wk.fill(template, subs), label, "crosslane", {})
    return _kernels[key]


def atomic_supports(op: Op) -> bool:
    """An ``atomic_add`` whose order cannot change the result (an integer array)."""
    return op.attrs.get("name") == "atomic_add" and \
        op.operands[0].type.dtype.name in wk.ATOMIC_TYPES


def atomic_add(a, i, v, mask, lanes: int, loc, errors) -> None:
    """``a[i] += v`` for every active lane, by device atomics, after the bounds check."""
    has_mask = mask is not None
    mask = mask if has_mask else _no_mask()
    sites = ErrorSites()
    sites.add("index", "atomic_add index {0} is out of bounds for axis 0 with size {1}", loc)
    subs = wk.subs(np.dtype(a.dtype), False, BLOCK)
    launch.launch(_kernel(wk.ATOMIC, "atomic_check", **subs), lanes,
                  [a, i, mask, has_mask, errors.get(lanes)])
    errors.check(lanes, sites)
    launch.launch(_kernel(wk.ATOMIC, "atomic_apply", **subs), lanes, [a, i, v, mask, has_mask])


def _start(kernel, grid: int, block: int, *args) -> None:
    """One launch on this thread's stream, counted; integers wrap silently (the
    simulator's NumPy scalars would warn)."""
    launch.count("launches")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        kernel[grid, block, launch.stream_now()](*args)


def _no_mask():
    return cuda.device_array(1, dtype=np.bool_)


def reduce(kind: str, x, mask, lanes: int, dtype: np.dtype, warp: bool):
    """(the combined value as ``dtype``, the number of active lanes: min and max only,
    else None; the identity is the value of no lanes)."""
    vote = kind in ("any", "all")
    ballot = warp and vote
    kernel = _kernel(wk.REDUCE, "reduce_blocks", COMBINE_=wk.COMBINE[kind],
                     IDENTITY_=wk.identity(kind, np.dtype(dtype)),
                     LOAD_="x[i] != 0" if vote else "x[i]", BALLOT_=ballot,
                     VOTE_=("0 != " if kind == "any" else "FULL == ") if ballot else "",
                     **wk.subs(np.dtype(dtype), warp, BLOCK))
    carrier = np.int64 if np.dtype(dtype) == np.bool_ else dtype
    has_mask = mask is not None
    mask = mask if has_mask else _no_mask()
    counts_in = cuda.device_array(1, dtype=np.int64)
    n, has_counts = lanes, False
    while True:
        blocks = -(-n // BLOCK)
        out = cuda.device_array(blocks, dtype=carrier)
        counts = cuda.device_array(blocks, dtype=np.int64)
        _start(kernel, blocks, BLOCK, np.int64(n), x, mask, has_mask, counts_in, has_counts,
               out, counts)
        if blocks == 1:
            break
        # the grid-level combine: the block partials, the same way
        x, counts_in, n, has_mask, has_counts = out, counts, blocks, False, True
    value = launch.to_host(out)[0]
    # only a reduction without an identity must know that some lane was active
    active = int(launch.to_host(counts)[0]) if kind in ("min", "max") else None
    return np.asarray(value).astype(dtype)[()], active


def prefixsum(x, mask, lanes: int, dtype: np.dtype, warp: bool):
    """The exclusive sums of the active lanes, on the device."""
    subs = wk.subs(np.dtype(dtype), warp, BLOCK)
    carrier = np.int64 if np.dtype(dtype) == np.bool_ else dtype
    blocks = -(-lanes // BLOCK)
    has_mask = mask is not None
    mask = mask if has_mask else _no_mask()
    out = cuda.device_array(lanes, dtype=carrier)
    totals = cuda.device_array(blocks, dtype=carrier)
    _start(_kernel(wk.SCAN, "scan_blocks", **subs), blocks, BLOCK, np.int64(lanes), x, mask,
           has_mask, out, totals)
    _start(_kernel(wk.SCAN, "scan_totals", **subs), 1, 1, totals, blocks)
    _start(_kernel(wk.SCAN, "add_offsets", **subs), blocks, BLOCK, np.int64(lanes), x, mask,
           has_mask, out, totals)
    return out


def gather(name: str, x, k, mask, lanes: int, warp: bool, loc, errors):
    """shuffle (``k``: each lane's source) or rotate (``k``: each lane's offset)."""
    subs = wk.subs(np.dtype(x.dtype), warp, BLOCK)
    has_mask = mask is not None
    mask = mask if has_mask else _no_mask()
    out = cuda.device_array(lanes, dtype=x.dtype)
    sites = ErrorSites()
    sites.add("index", f"{name}: lane index {{0}} is out of range for {{1}} lanes", loc)
    sites.add("inactive", f"{name} reads lane {{0}}, which is not active", loc)
    launch.launch(_kernel(wk.GATHER, "gather", **subs), lanes,
                  [x, k, name == "rotate", mask, has_mask, out, errors.get(lanes)])
    errors.check(lanes, sites)
    return out


def broadcast(x, k: int, mask, lanes: int, loc):
    """x on lane k, reading one element (and one of the mask)."""
    k = int(k)
    first = None

    def first_active():
        m = np.ones(lanes, dtype=bool) if mask is None else launch.to_host(mask)
        return int(np.argmax(m)) if m.any() else None
    if not 0 <= k < lanes:
        first = first_active()
        if first is not None:
            raise RUNTIME_ERRORS["index"](f"broadcast: lane index {k} is out of range for "
                                          f"{lanes} lanes", first, loc)
        k = 0
    if mask is not None and not launch.to_host(mask[k:k + 1])[0]:
        first = first_active()
        if first is not None:
            raise RUNTIME_ERRORS["inactive"](f"broadcast reads lane {k}, which is not "
                                             f"active", first, loc)
    return launch.to_host(x[k:k + 1])[0]


def run(op: Op, x, others: list, mask, lanes: int, errors):
    """Run ``op`` on the device: a uniform result on the host, a varying one on the
    device; the reference's error where it has one."""
    name = op.attrs["name"]
    warp = mode() == "warp"
    if name in _REDUCTIONS:
        kind = _REDUCTIONS[name]
        dtype = op.result.type.dtype
        value, active = reduce(kind, x, mask, lanes, dtype, warp)
        if active == 0:
            raise RUNTIME_ERRORS["inactive"](f"{name} over no active lanes", None, op.loc)
        return np.bool_(value) if name in ("laneany", "laneall") else value
    if name == "prefixsum":
        return prefixsum(x, mask, lanes, op.result.type.dtype, warp)
    if name == "broadcast":
        return np.asarray(broadcast(x, others[0], mask, lanes, op.loc)).astype(
            op.result.type.dtype)[()]
    return gather(name, x, others[0], mask, lanes, warp, op.loc, errors)

