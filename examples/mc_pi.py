"""Monte Carlo pi: each lane draws points from its own counter-based hash RNG and the
lanes count the hits together with ``lanesum``.

    python examples/mc_pi.py [--samples 10000000] [--lanes 4096]
"""

import argparse
import time

import numpy as np

import hydra
from hydra import lane, lanesum

TO_UNIT = 1.0 / 4294967296.0  # 2**-32


def hash32(x):
    """lowbias32 (Chris Wellons): a well-mixed uint32 -> uint32 hash; wraps like C."""
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
    return x


def count_inside(samples_per_lane):
    hits = 0
    counter = np.uint32(lane()) * np.uint32(2) * np.uint32(samples_per_lane)
    for _ in range(samples_per_lane):
        x = float(hash32(counter)) * TO_UNIT
        y = float(hash32(counter + np.uint32(1))) * TO_UNIT
        counter += np.uint32(2)
        if x * x + y * y <= 1.0:
            hits += 1
    return lanesum(hits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000_000)
    parser.add_argument("--lanes", type=int, default=4096)
    args = parser.parse_args()
    per_lane = args.samples // args.lanes
    kernel = hydra.compile(count_inside, lanes=args.lanes)
    start = time.perf_counter()
    hits = kernel(per_lane)
    elapsed = time.perf_counter() - start
    total = per_lane * args.lanes
    estimate = 4.0 * hits / total
    print(f"{total} samples on {args.lanes} lanes: pi ~ {estimate:.6f} "
          f"(error {abs(estimate - np.pi):.1e})")
    print(f"{elapsed:.3f} s on the {kernel.backend_name} backend (compile included)")


if __name__ == "__main__":
    main()
