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
from .emit import ErrorSites

#: threads per block of these kernels (whole warps, a power of two)
BLOCK = 256
_REDUCTIONS = {"lanesum": "sum", "laneprod": "prod", "lanemin": "min", "lanemax": "max",
               "laneany": "any", "laneall": "all"}
#: the element types these kernels take (the shuffles' types); others: the host path
_TYPES = ("float32", "float64", "int32", "int64", "bool")
_COMBINE = {"sum": "a + b", "prod": "a * b", "any": "a | b", "all": "a & b",
            # NaN wins, as np.minimum / np.maximum
            "min": "a if (a != a or a <= b) else b", "max": "a if (a != a or a >= b) else b"}


def mode() -> str | None:
    """"warp" (real hardware), "block" (shared memory only: the simulator can run it),
    or None (the host runs the reference)."""
    chosen = os.environ.get("HYDRA_CUDA_CROSSLANE", "")
    if chosen in ("block", "warp"):
        return chosen
    if chosen == "host" or config.ENABLE_CUDASIM:
        return None
    return "warp"


def supports(op: Op) -> bool:
    """An intrinsic these kernels run, of an element type they take."""
    name = op.attrs.get("name")
    if name not in _REDUCTIONS and name not in ("prefixsum", "shuffle", "rotate", "broadcast"):
        return False
    return op.operands[0].type.name in _TYPES and (
        not op.results or op.result.type.name in _TYPES)


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
        _kernels[key] = launch.build(_fill(template, subs), label, "crosslane", {})
    return _kernels[key]


def _identity(kind: str, dtype: np.dtype) -> str:
    if kind in ("sum", "any"):
        return "0"
    if kind in ("prod", "all"):
        return "1"
    big = "math.inf" if dtype.kind == "f" else str(np.iinfo(dtype).max)
    return big if kind == "min" else ("-math.inf" if dtype.kind == "f"
                                      else str(np.iinfo(dtype).min))


_HEAD = ("import math\n\nimport numpy as np\nfrom numba import cuda\n\nFULL = 0xffffffff\n"
         "BLOCK = BLOCK_\nWARP = WARP_\n\n\n")

_REDUCE = _HEAD + '''@cuda.jit(device=True)
def combine(a, b):
    return CARRIER(COMBINE_)


def reduce_blocks(N, x, mask, has_mask, cin, has_counts, out, counts):
    """Block b's lanes combined in one fixed tree into out[b]; counts[b]: its active
    lanes."""
    vals = cuda.shared.array(BLOCK, CARRIER)
    cnt = cuda.shared.array(BLOCK, np.int64)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * BLOCK + t
    v = CARRIER(IDENTITY_)
    c = np.int64(0)
    if i < N and (has_mask == 0 or mask[i]):
        v = CARRIER(LOAD_)
        c = np.int64(cin[i]) if has_counts else np.int64(1)
    if WARP:
        # every thread of the block is here: full masks
        if BALLOT_:  # any / all of the warp: one vote
            v = CARRIER(VOTE_(cuda.ballot_sync(FULL, v != 0)))
        off = 16
        while off > 0:
            if not BALLOT_:
                v = combine(v, cuda.shfl_down_sync(FULL, v, off))
            c += cuda.shfl_down_sync(FULL, c, off)
            off //= 2
        if t % 32 == 0:
            vals[t // 32] = v
            cnt[t // 32] = c
        cuda.syncthreads()
        width = BLOCK // 32
    else:
        vals[t] = v
        cnt[t] = c
        cuda.syncthreads()
        width = BLOCK
    s = width // 2
    while s > 0:
        if t < s:
            vals[t] = combine(vals[t], vals[t + s])
            cnt[t] += cnt[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        out[cuda.blockIdx.x] = vals[0]
        counts[cuda.blockIdx.x] = cnt[0]
'''

_SCAN = _HEAD + '''def scan_blocks(N, x, mask, has_mask, out, totals):
    """out[i]: the inclusive sum of block b's active values up to i; totals[b]."""
    vals = cuda.shared.array(BLOCK, CARRIER)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * BLOCK + t
    v = CARRIER(0)
    if i < N and (has_mask == 0 or mask[i]):
        v = CARRIER(x[i])
    if WARP:
        lane = t % 32
        off = 1
        while off < 32:
            up = cuda.shfl_up_sync(FULL, v, off)
            if lane >= off:
                v = CARRIER(v + up)
            off *= 2
        if lane == 31:
            vals[t // 32] = v
        cuda.syncthreads()
        if t == 0:  # the warps' totals, in order
            run = CARRIER(0)
            for w in range(BLOCK // 32):
                run = CARRIER(run + vals[w])
                vals[w] = run
        cuda.syncthreads()
        if t >= 32:
            v = CARRIER(v + vals[t // 32 - 1])
    else:
        vals[t] = v
        cuda.syncthreads()
        off = 1
        while off < BLOCK:  # Hillis-Steele: a fixed tree
            add = vals[t - off] if t >= off else CARRIER(0)
            cuda.syncthreads()
            vals[t] = CARRIER(vals[t] + add)
            cuda.syncthreads()
            off *= 2
        v = vals[t]
    if i < N:
        out[i] = v
    if t == BLOCK - 1:
        totals[cuda.blockIdx.x] = v


def scan_totals(totals, blocks):
    """Exclusive sums of the block totals, in order (one thread)."""
    if cuda.grid(1) == 0:
        run = CARRIER(0)
        for b in range(blocks):
            here = totals[b]
            totals[b] = run
            run = CARRIER(run + here)


def add_offsets(N, x, mask, has_mask, out, totals):
    """Inclusive -> exclusive (NumPy's cumsum(v) - v), plus the blocks below."""
    i = cuda.grid(1)
    if i < N:
        v = CARRIER(0)
        if has_mask == 0 or mask[i]:
            v = CARRIER(x[i])
        out[i] = CARRIER(CARRIER(out[i] + totals[i // BLOCK]) - v)
'''

_GATHER = _HEAD + '''def gather(N, x, k, rotate, mask, has_mask, out, err):
    """out[i] = x[source of lane i]; range and inactive errors as the reference."""
    lane = cuda.grid(1)
    if lane >= N:
        return
    active = has_mask == 0 or mask[lane]
    if rotate:
        s = (np.int64(lane) + np.int64(k[lane])) % N
    else:
        s = np.int64(k[lane]) if active else np.int64(lane)
    ok = 0 <= s < N
    src = s if ok else np.int64(lane)
    mine = x[lane]
    if WARP:
        m = cuda.activemask()  # the lanes of this warp still here (a partial warp)
        w = src - (lane - lane % 32)
        got = cuda.shfl_sync(m, mine, w & 31)
        if w < 0 or w >= 32 or not ((m >> w) & 1):
            got = x[src]
    else:
        got = x[src]
    out[lane] = got
    if active and not ok:
        cuda.atomic.add(err, (N, 0), 1)
        err[lane, 0] = 1
        err[lane, 1] = s
        err[lane, 2] = N
        return
    if active and has_mask and not mask[src]:
        cuda.atomic.add(err, (N, 0), 1)
        err[lane, 0] = 2
        err[lane, 1] = src
'''


_ATOMIC = _HEAD + '''def atomic_check(N, a, i, mask, has_mask, err):
    """The reference's bounds check, before any lane adds (a failure adds nothing)."""
    lane = cuda.grid(1)
    if lane >= N or (has_mask and not mask[lane]):
        return
    j = np.int64(i[lane])
    n = a.shape[0]
    if j < -n or j >= n:
        cuda.atomic.add(err, (N, 0), 1)
        err[lane, 0] = 1
        err[lane, 1] = j
        err[lane, 2] = n


def atomic_apply(N, a, i, v, mask, has_mask):
    lane = cuda.grid(1)
    if lane >= N or (has_mask and not mask[lane]):
        return
    j = np.int64(i[lane])
    if j < 0:
        j += a.shape[0]
    cuda.atomic.add(a, j, v[lane])
'''
#: integer additions wrap: any order of the lanes' atomics gives NumPy's np.add.at
_ATOMIC_TYPES = ("int32", "int64", "uint32", "uint64")


def atomic_supports(op: Op) -> bool:
    """An ``atomic_add`` whose order cannot change the result (an integer array)."""
    return op.attrs.get("name") == "atomic_add" and \
        op.operands[0].type.dtype.name in _ATOMIC_TYPES


def atomic_add(a, i, v, mask, lanes: int, loc, errors) -> None:
    """``a[i] += v`` for every active lane, by device atomics, after the bounds check."""
    has_mask = mask is not None
    mask = mask if has_mask else _no_mask()
    sites = ErrorSites()
    sites.add("index", "atomic_add index {0} is out of bounds for axis 0 with size {1}", loc)
    subs = _subs(np.dtype(a.dtype), False)
    launch.launch(_kernel(_ATOMIC, "atomic_check", **subs), lanes,
                  [a, i, mask, has_mask, errors.get(lanes)])
    errors.check(lanes, sites)
    launch.launch(_kernel(_ATOMIC, "atomic_apply", **subs), lanes, [a, i, v, mask, has_mask])


def _subs(dtype: np.dtype, warp: bool) -> dict:
    carrier = "np.int64" if dtype == np.bool_ else f"np.{dtype.name}"
    return {"CARRIER": carrier, "BLOCK_": BLOCK, "WARP_": bool(warp)}


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
    """(the combined value as ``dtype``, the number of active lanes)."""
    vote = kind in ("any", "all")
    ballot = warp and vote
    kernel = _kernel(_REDUCE, "reduce_blocks", COMBINE_=_COMBINE[kind],
                     IDENTITY_=_identity(kind, np.dtype(dtype)),
                     LOAD_="x[i] != 0" if vote else "x[i]", BALLOT_=ballot,
                     VOTE_=("0 != " if kind == "any" else "FULL == ") if ballot else "",
                     **_subs(np.dtype(dtype), warp))
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
    active = int(launch.to_host(counts)[0])
    return np.asarray(value).astype(dtype)[()], active


def prefixsum(x, mask, lanes: int, dtype: np.dtype, warp: bool):
    """The exclusive sums of the active lanes, on the device."""
    subs = _subs(np.dtype(dtype), warp)
    carrier = np.int64 if np.dtype(dtype) == np.bool_ else dtype
    blocks = -(-lanes // BLOCK)
    has_mask = mask is not None
    mask = mask if has_mask else _no_mask()
    out = cuda.device_array(lanes, dtype=carrier)
    totals = cuda.device_array(blocks, dtype=carrier)
    _start(_kernel(_SCAN, "scan_blocks", **subs), blocks, BLOCK, np.int64(lanes), x, mask,
           has_mask, out, totals)
    _start(_kernel(_SCAN, "scan_totals", **subs), 1, 1, totals, blocks)
    _start(_kernel(_SCAN, "add_offsets", **subs), blocks, BLOCK, np.int64(lanes), x, mask,
           has_mask, out, totals)
    return out


def gather(name: str, x, k, mask, lanes: int, warp: bool, loc, errors):
    """shuffle (``k``: each lane's source) or rotate (``k``: each lane's offset)."""
    subs = _subs(np.dtype(x.dtype), warp)
    has_mask = mask is not None
    mask = mask if has_mask else _no_mask()
    out = cuda.device_array(lanes, dtype=x.dtype)
    sites = ErrorSites()
    sites.add("index", f"{name}: lane index {{0}} is out of range for {{1}} lanes", loc)
    sites.add("inactive", f"{name} reads lane {{0}}, which is not active", loc)
    launch.launch(_kernel(_GATHER, "gather", **subs), lanes,
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
            empty = INTRINSICS[name].monoid.identity
            if empty is None:
                raise RUNTIME_ERRORS["inactive"](f"{name} over no active lanes", None, op.loc)
            return np.asarray(empty, dtype=dtype)[()]
        return np.bool_(value) if name in ("laneany", "laneall") else value
    if name == "prefixsum":
        return prefixsum(x, mask, lanes, op.result.type.dtype, warp)
    if name == "broadcast":
        return np.asarray(broadcast(x, others[0], mask, lanes, op.loc)).astype(
            op.result.type.dtype)[()]
    return gather(name, x, others[0], mask, lanes, warp, op.loc, errors)


def typing_cases(warp: bool = True) -> list:
    """Every kernel of this module with the argument types it is launched with, for
    compiling to LLVM IR without a GPU (``tests/test_cuda_crosslane.py``): (source,
    entry, [(dtype name, ndim or None)])."""
    def a(dtype, ndim=1):
        return (np.dtype(dtype).name, ndim)

    def s(dtype):
        return (np.dtype(dtype).name, None)
    out = []
    for dtype in _TYPES:
        carrier = np.int64 if dtype == "bool" else dtype
        subs = _subs(np.dtype(dtype), warp)
        for kind in _COMBINE:
            if kind in ("any", "all") and dtype != "bool" or \
                    dtype == "bool" and kind not in ("any", "all", "sum"):
                continue
            vote = kind in ("any", "all")
            ballot = warp and vote
            fill = {"COMBINE_": _COMBINE[kind], "IDENTITY_": _identity(kind, np.dtype(dtype)),
                    "LOAD_": "x[i] != 0" if vote else "x[i]", "BALLOT_": ballot,
                    "VOTE_": ("0 != " if kind == "any" else "FULL == ") if ballot else "",
                    **subs}
            out.append((_fill(_REDUCE, fill), "reduce_blocks",
                        [s("int64"), a(dtype), a("bool"), s("bool"), a("int64"), s("bool"),
                         a(carrier), a("int64")]))
        if dtype == "bool":
            continue
        scan = _fill(_SCAN, subs)
        out.append((scan, "scan_blocks", [s("int64"), a(dtype), a("bool"), s("bool"),
                                          a(carrier), a(carrier)]))
        out.append((scan, "scan_totals", [a(carrier), s("int64")]))
        out.append((scan, "add_offsets", [s("int64"), a(dtype), a("bool"), s("bool"),
                                          a(carrier), a(carrier)]))
        out.append((_fill(_GATHER, subs), "gather",
                    [s("int64"), a(dtype), a("int64"), s("bool"), a("bool"), s("bool"),
                     a(dtype), a("int64", 2)]))
    for dtype in _ATOMIC_TYPES:
        atomic = _fill(_ATOMIC, _subs(np.dtype(dtype), False))
        out.append((atomic, "atomic_check", [s("int64"), a(dtype), a("int64"), a("bool"),
                                             s("bool"), a("int64", 2)]))
        out.append((atomic, "atomic_apply", [s("int64"), a(dtype), a("int64"), a(dtype),
                                             a("bool"), s("bool")]))
    return out


def _fill(template: str, subs: dict) -> str:
    for k, v in subs.items():
        template = template.replace(k, str(v))
    return template
