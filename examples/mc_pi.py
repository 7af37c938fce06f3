"""Monte Carlo pi: each lane draws points from its own stream of ``hydra.random`` (Philox
4x32-10: the same numbers on every backend and at any lane count) and the lanes count
the hits together with ``lanesum``.

    python examples/mc_pi.py [--samples 10000000] [--lanes 4096] [--seed 2024]
"""

import argparse
import time

import numpy as np

import hydra
from hydra import lanesum


def count_inside(samples_per_lane, seed):
    hits = 0
    for k in range(samples_per_lane):
        x = hydra.random.uniform(seed, 2 * k)  # draws 2k and 2k + 1 of this lane's stream
        y = hydra.random.uniform(seed, 2 * k + 1)
        if x * x + y * y <= 1.0:
            hits += 1
    return lanesum(hits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000_000)
    parser.add_argument("--lanes", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args()
    per_lane = args.samples // args.lanes
    kernel = hydra.compile(count_inside, lanes=args.lanes)
    start = time.perf_counter()
    hits = kernel(per_lane, args.seed)
    elapsed = time.perf_counter() - start
    total = per_lane * args.lanes
    estimate = 4.0 * hits / total
    print(f"{total} samples on {args.lanes} lanes: pi ~ {estimate:.6f} "
          f"(error {abs(estimate - np.pi):.1e})")
    print(f"{elapsed:.3f} s on the {kernel.backend_name} backend (compile included)")
    # the same numbers in plain Python: lane 3's first point
    x, y = (hydra.random.uniform(args.seed, i, lane=3) for i in (0, 1))
    print(f"lane 3's first point, in plain Python: ({x:.6f}, {y:.6f})")


if __name__ == "__main__":
    main()
