"""Collatz: the number of steps from n to 1 for every start 1..N, one lane per start.

Trip counts differ wildly between neighbouring lanes: the case ISPC-style masking
handles and a NumPy loop does badly.

    python examples/collatz.py [--count 1000000]
"""

import argparse
import time

import numpy as np

import hydra


def collatz_steps(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


kernel = hydra.compile(collatz_steps, varying=("n",))


def setup(count: int = 100_000):
    """The arguments of a call, for ``python -m hydra profile ... --setup setup``."""
    return (np.arange(1, count + 1, dtype=np.int64),), {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    args = parser.parse_args()
    starts = np.arange(1, args.count + 1, dtype=np.int64)
    start = time.perf_counter()
    steps = kernel(starts)
    elapsed = time.perf_counter() - start
    longest = int(np.argmax(steps))
    print(f"starts 1..{args.count}: the longest chain starts at {starts[longest]} "
          f"({steps[longest]} steps); plain Python agrees: "
          f"{collatz_steps(int(starts[longest])) == steps[longest]}")
    print(f"{elapsed:.3f} s on the {kernel.backend_name} backend (compile included)")


if __name__ == "__main__":
    main()
