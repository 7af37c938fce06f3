"""Monte Carlo pi with ``hydra.random`` (Philox 4x32-10) against the same kernel with a
hand-written counter hash: ``python -m bench random [--repeat N] [--rounds R]``.

Every row counts the hits of 1e7 points (100,000 lanes, 100 points each) on hydra's cpu
backend and prints its best time and its time relative to the hash rows (``x hash``:
the row's time over the hash's; above 1 is slower):

- ``hash f32``: the mc-pi workload's kernel (``bench/mcpi.py``): a 3-multiply uint32
  hash per coordinate, 24 bits to float32;
- ``lowbias32 f64``: the kernel ``examples/mc_pi.py`` had before ``hydra.random``: a
  2-multiply hash per coordinate, 32 bits to float64;
- ``uniform f32`` / ``uniform f64``: ``hydra.random.uniform`` for each coordinate (one
  Philox block per draw: two blocks per point);
- ``bits f32``: ``hydra.random.bits``, one Philox block per point (x from word 0, y from
  word 1, 24 bits each).

Philox 4x32-10 does 20 32x32->64 multiplies per block, the hashes 2 or 3 per
coordinate: the rows show what that costs.  Rows run interleaved, ``rounds`` passes of
``repeat`` calls each, best kept.
"""

from __future__ import annotations

import time

import numba
import numpy as np

import hydra
from hydra import lane, lanesum, nlanes
from hydra import random as hr

from . import mcpi

LANES, PER_LANE, SEED = mcpi.LANES, mcpi.PER_LANE, 2024
TO_UNIT = 1.0 / 4294967296.0
F32_UNIT = np.float32(1.0 / 16777216.0)


def _lowbias32(x):
    """lowbias32 (Chris Wellons), as examples/mc_pi.py wrote it by hand."""
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
    return x


def lowbias32_f64(per_lane: int, seed: int) -> float:
    hits = 0
    counter = np.uint32(lane()) * np.uint32(2) * np.uint32(per_lane)
    for _ in range(per_lane):
        x = float(_lowbias32(counter)) * TO_UNIT
        y = float(_lowbias32(counter + np.uint32(1))) * TO_UNIT
        counter += np.uint32(2)
        if x * x + y * y <= 1.0:
            hits += 1
    return 4.0 * lanesum(hits) / (nlanes() * per_lane)


def uniform_f32(per_lane: int, seed: int) -> float:
    hits = 0
    for k in range(per_lane):
        x = hr.uniform(seed, 2 * k, dtype=np.float32)
        y = hr.uniform(seed, 2 * k + 1, dtype=np.float32)
        if x * x + y * y < 1.0:
            hits += 1
    return 4.0 * lanesum(hits) / (nlanes() * per_lane)


def uniform_f64(per_lane: int, seed: int) -> float:
    hits = 0
    for k in range(per_lane):
        x = hr.uniform(seed, 2 * k)
        y = hr.uniform(seed, 2 * k + 1)
        if x * x + y * y <= 1.0:
            hits += 1
    return 4.0 * lanesum(hits) / (nlanes() * per_lane)


def bits_f32(per_lane: int, seed: int) -> float:
    hits = 0
    for k in range(per_lane):
        w0, w1, w2, w3 = hr.bits(seed, k)
        x = np.float32(w0 >> np.uint32(8)) * F32_UNIT
        y = np.float32(w1 >> np.uint32(8)) * F32_UNIT
        if x * x + y * y < 1.0:
            hits += 1
    return 4.0 * lanesum(hits) / (nlanes() * per_lane)


def hash_f32(per_lane: int, seed: int) -> float:
    return mcpi.kernel(per_lane)


ROWS = {"hash f32": hash_f32, "lowbias32 f64": lowbias32_f64, "uniform f32": uniform_f32,
        "uniform f64": uniform_f64, "bits f32": bits_f32}
HASHES = {"f32": "hash f32", "f64": "lowbias32 f64"}


def measure(repeat: int, rounds: int, threads: int) -> dict[str, tuple[float, float]]:
    """Row -> (best seconds, estimate of pi)."""
    kernels = {name: hydra.compile(fn, lanes=LANES, backend="cpu", threads=threads)
               for name, fn in ROWS.items()}
    best = {name: (float("inf"), k(PER_LANE, SEED)) for name, k in kernels.items()}
    for _ in range(rounds):
        for name, k in kernels.items():
            for _ in range(repeat):
                t = time.perf_counter()
                k(PER_LANE, SEED)
                best[name] = (min(best[name][0], time.perf_counter() - t), best[name][1])
    return best


def main(repeat: int = 5, rounds: int = 3) -> None:
    print(f"# mc-pi, {LANES * PER_LANE:.0e} points: hydra.random (Philox 4x32-10) against "
          f"hand-written hashes, cpu backend")
    print(f"{'row':16} {'threads':>7} {'best ms':>9} {'x hash f32':>10} {'x hash f64':>10} "
          f"{'pi':>9}")
    for threads in (1, numba.config.NUMBA_NUM_THREADS):
        times = measure(repeat, rounds, threads)
        for name, (t, pi) in times.items():
            ratios = [t / times[h][0] for h in HASHES.values()]
            print(f"{name:16} {threads:7} {t * 1e3:9.2f} {ratios[0]:10.2f} {ratios[1]:10.2f} "
                  f"{pi:9.5f}", flush=True)
