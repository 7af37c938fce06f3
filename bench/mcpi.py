"""Monte Carlo pi: 1e7 samples, 100 per lane, a per-lane uint32 counter-based hash RNG,
the hits summed across lanes with ``lanesum``."""

import numba
import numpy as np

from hydra import lane, lanesum, nlanes

NAME = "mc-pi"
VARYING = ()
LANES = 100_000
PER_LANE = 100
M = np.uint32(0x45D9F3B)
G = np.uint32(0x9E3779B1)
SCALE = np.float32(1.0 / 16777216.0)  # 24 random bits -> [0, 1)


def kernel(per_lane: int) -> float:
    hits = 0
    base = np.uint32(lane() * per_lane * 2)
    for k in range(per_lane):
        h = (base + np.uint32(2 * k)) * G
        h = ((h >> 16) ^ h) * M
        h = ((h >> 16) ^ h) * M
        x = np.float32((h >> 16) ^ h >> 8) * SCALE
        h = (base + np.uint32(2 * k + 1)) * G
        h = ((h >> 16) ^ h) * M
        h = ((h >> 16) ^ h) * M
        y = np.float32((h >> 16) ^ h >> 8) * SCALE
        if x * x + y * y < 1.0:
            hits += 1
    return 4.0 * lanesum(hits) / (nlanes() * per_lane)


def setup():
    return (PER_LANE,)


def _hash(c):
    """The same uint32 hash in int64 arithmetic masked to 32 bits (Numba would widen
    uint32 products to 64 bits)."""
    h = c * 0x9E3779B1 & 0xFFFFFFFF
    h = ((h >> 16) ^ h) * 0x45D9F3B & 0xFFFFFFFF
    h = ((h >> 16) ^ h) * 0x45D9F3B & 0xFFFFFFFF
    return (h >> 16) ^ h >> 8


def numpy_masks(per_lane):
    c = np.arange(LANES, dtype=np.int64)[:, None] * per_lane * 2 + 2 * np.arange(per_lane)
    x = _hash(c & 0xFFFFFFFF).astype(np.float32) * SCALE
    y = _hash(c + 1 & 0xFFFFFFFF).astype(np.float32) * SCALE
    return 4.0 * np.count_nonzero(x * x + y * y < np.float32(1.0)) / (LANES * per_lane)


_hash_nb = numba.njit(_hash)


@numba.njit
def _one(i, per_lane):
    hits = 0
    for k in range(per_lane):
        c = i * per_lane * 2 + 2 * k
        x = np.float32(_hash_nb(c & 0xFFFFFFFF)) * SCALE
        y = np.float32(_hash_nb(c + 1 & 0xFFFFFFFF)) * SCALE
        if x * x + y * y < np.float32(1.0):
            hits += 1
    return hits


@numba.njit
def numba_scalar(per_lane):
    hits = 0
    for i in range(LANES):
        hits += _one(i, per_lane)
    return 4.0 * hits / (LANES * per_lane)


@numba.njit(parallel=True)
def numba_parallel(per_lane):
    hits = 0
    for i in numba.prange(LANES):
        hits += _one(i, per_lane)
    return 4.0 * hits / (LANES * per_lane)
