"""The sources of the cross-lane kernels (``crosslane.py`` runs them): templates
filled per element type, combining operation and variant (``WARP``: shuffles, ballots
and activemask; else shared memory only, which the CUDA simulator can run), and every
kernel with its argument types for compiling without a GPU (``typing_cases``)."""

from __future__ import annotations

import numpy as np

#: the element types these kernels take (the shuffles' types); others: the host path
TYPES = ("float32", "float64", "int32", "int64", "bool")
COMBINE = {"sum": "a + b", "prod": "a * b", "any": "a | b", "all": "a & b",
            # NaN wins, as np.minimum / np.maximum
            "min": "a if (a != a or a <= b) else b", "max": "a if (a != a or a >= b) else b"}


def identity(kind: str, dtype: np.dtype) -> str:
    """The source of the value a lane that is not active contributes."""
    if dtype == np.bool_ or kind in ("sum", "prod", "any", "all"):
        return "1" if kind in ("prod", "all", "min") else "0"
    if dtype.kind == "f":
        return "math.inf" if kind == "min" else "-math.inf"
    return str(np.iinfo(dtype).max if kind == "min" else np.iinfo(dtype).min)


_HEAD = ("import math\n\nimport numpy as np\nfrom numba import cuda\n\nFULL = 0xffffffff\n"
         "BLOCK = BLOCK_\nWARP = WARP_\n\n\n")

REDUCE = _HEAD + '''@cuda.jit(device=True)
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

SCAN = _HEAD + '''def scan_blocks(N, x, mask, has_mask, out, totals):
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

GATHER = _HEAD + '''def gather(N, x, k, rotate, mask, has_mask, out, err):
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


ATOMIC = _HEAD + '''def atomic_check(N, a, i, mask, has_mask, err):
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
ATOMIC_TYPES = ("int32", "int64", "uint32", "uint64")


def subs(dtype: np.dtype, warp: bool, block: int = 256) -> dict:
    """What every template takes: the carrier type (bools are carried as int64), the
    threads per block, the variant."""
    carrier = "np.int64" if dtype == np.bool_ else f"np.{dtype.name}"
    return {"CARRIER": carrier, "BLOCK_": block, "WARP_": bool(warp)}


def typing_cases(warp: bool = True) -> list:
    """Every kernel of this module with the argument types it is launched with, for
    compiling to LLVM IR without a GPU (``tests/test_cuda_crosslane.py``): (source,
    entry, [(dtype name, ndim or None)])."""
    def a(dtype, ndim=1):
        return (np.dtype(dtype).name, ndim)

    def s(dtype):
        return (np.dtype(dtype).name, None)
    out = []
    for dtype in TYPES:
        carrier = np.int64 if dtype == "bool" else dtype
        common = subs(np.dtype(dtype), warp)
        for kind in COMBINE:
            if kind in ("any", "all") and dtype != "bool":
                continue
            vote = kind in ("any", "all")
            ballot = warp and vote
            values = {"COMBINE_": COMBINE[kind], "IDENTITY_": identity(kind, np.dtype(dtype)),
                      "LOAD_": "x[i] != 0" if vote else "x[i]", "BALLOT_": ballot,
                      "VOTE_": ("0 != " if kind == "any" else "FULL == ") if ballot else "",
                      **common}
            out.append((fill(REDUCE, values), "reduce_blocks",
                        [s("int64"), a(dtype), a("bool"), s("bool"), a("int64"), s("bool"),
                         a(carrier), a("int64")]))
        scan = fill(SCAN, common)
        out.append((scan, "scan_blocks", [s("int64"), a(dtype), a("bool"), s("bool"),
                                          a(carrier), a(carrier)]))
        out.append((scan, "scan_totals", [a(carrier), s("int64")]))
        out.append((scan, "add_offsets", [s("int64"), a(dtype), a("bool"), s("bool"),
                                          a(carrier), a(carrier)]))
        if dtype != "bool":  # (shfl_sync moves 32- and 64-bit numbers only)
            out.append((fill(GATHER, common), "gather",
                        [s("int64"), a(dtype), a("int64"), s("bool"), a("bool"), s("bool"),
                         a(dtype), a("int64", 2)]))
    for dtype in ATOMIC_TYPES:
        atomic = fill(ATOMIC, subs(np.dtype(dtype), False))
        out.append((atomic, "atomic_check", [s("int64"), a(dtype), a("int64"), a("bool"),
                                             s("bool"), a("int64", 2)]))
        out.append((atomic, "atomic_apply", [s("int64"), a(dtype), a("int64"), a(dtype),
                                             a("bool"), s("bool")]))
    return out


def fill(template: str, values: dict) -> str:
    """The template with each placeholder replaced by its value."""
    for k, v in values.items():
        template = template.replace(k, str(v))
    return template
