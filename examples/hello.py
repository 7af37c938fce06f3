"""The four demos of Hydra.jl's README, in Python.

    python examples/hello.py
"""

import hydra
from hydra import lane, lanesum


def greet():
    print("Hello from lane", lane() + 1)
    print("Goodbye from lane", lane() + 1)


def greet_even():
    if (lane() + 1) % 2 == 0:
        print("Hello from lane", lane() + 1)


def main():
    # 1. Every lane runs the same statement.
    hydra.spmd(4, lambda: print("Hello, World!"))
    # 2. Lockstep: every lane finishes one statement before any lane starts the next.
    hydra.spmd(4, greet)
    # 3. A cross-lane reduction gives one (uniform) value.
    total = hydra.spmd(4, lambda: lanesum((lane() + 1) * 2))
    print("lanesum((lane() + 1) * 2) over 4 lanes =", total)
    # 4. Divergent control flow: only the lanes where the condition holds print.
    hydra.spmd(4, greet_even)


if __name__ == "__main__":
    main()
