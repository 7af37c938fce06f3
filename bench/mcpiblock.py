"""Monte Carlo pi written the way a user first writes it: one lane per block of 1,000
samples (``for i in range(start, min(start + block, n))`` with a varying start), a
uint32 counter hash of the sample index, a float64 test, ``lanesum`` of the count."""

import numba
import numpy as np

from hydra import lane, lanesum

NAME = "mc-pi-block"
VARYING = ()
SAMPLES = 10_000_000
BLOCK = 1000
LANES = (SAMPLES + BLOCK - 1) // BLOCK
M = np.uint32(0x45D9F3B)
G = np.uint32(0x9E3779B1)


def kernel(n: int, block: int) -> float:
    start = lane() * block
    hits = 0
    for i in range(start, min(start + block, n)):
        h = np.uint32(2 * i) * G
        h = ((h >> 16) ^ h) * M
        h = ((h >> 16) ^ h) * M
        x = float((h >> 16) ^ h) / 4294967296.0
        h = np.uint32(2 * i + 1) * G
        h = ((h >> 16) ^ h) * M
        h = ((h >> 16) ^ h) * M
        y = float((h >> 16) ^ h) / 4294967296.0
        if x * x + y * y < 1.0:
            hits += 1
    return 4.0 * lanesum(hits) / n


def setup():
    return (SAMPLES, BLOCK)


def _hash(c):
    """The uint32 hash in int64 arithmetic masked to 32 bits."""
    h = c * 0x9E3779B1 & 0xFFFFFFFF
    h = ((h >> 16) ^ h) * 0x45D9F3B & 0xFFFFFFFF
    h = ((h >> 16) ^ h) * 0x45D9F3B & 0xFFFFFFFF
    return (h >> 16) ^ h


def numpy_masks(n, block):
    hits = 0
    for s in range(0, n, 1_000_000):
        i = np.arange(s, min(s + 1_000_000, n), dtype=np.int64)
        x = _hash(2 * i & 0xFFFFFFFF) / 4294967296.0
        y = _hash(2 * i + 1 & 0xFFFFFFFF) / 4294967296.0
        hits += np.count_nonzero(x * x + y * y < 1.0)
    return 4.0 * hits / n


_hash_nb = numba.njit(_hash)


@numba.njit
def _block(start, n, block):
    hits = 0
    for i in range(start, min(start + block, n)):
        x = _hash_nb(2 * i & 0xFFFFFFFF) / 4294967296.0
        y = _hash_nb(2 * i + 1 & 0xFFFFFFFF) / 4294967296.0
        if x * x + y * y < 1.0:
            hits += 1
    return hits


@numba.njit
def numba_scalar(n, block):
    hits = 0
    for b in range((n + block - 1) // block):
        hits += _block(b * block, n, block)
    return 4.0 * hits / n


@numba.njit(parallel=True)
def numba_parallel(n, block):
    hits = 0
    for b in numba.prange((n + block - 1) // block):
        hits += _block(b * block, n, block)
    return 4.0 * hits / n
