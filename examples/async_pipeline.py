"""Two simulations side by side feeding a reduction: hydra's asynchronous launches.

    python async_pipeline.py [--walkers N] [--steps S] [--svg FILE] [--backend B]

Two ensembles of random walkers run as two independent launches (they overlap, one
core each); each one's positions go, as a future, into a histogram launch that adds
into an array with ``atomic_add``; a last launch reads both histograms (it waits for
them because it reads what they write: a read-after-write dependency found by the
compiler, not written here); ``hydra.wait()`` waits for everything.  The launch graph is
saved as an SVG picture.
"""

import argparse

import numpy as np

import hydra
from hydra import atomic_add, lane, lanemax, lanesum, nlanes

A = np.uint32(1664525)
C = np.uint32(1013904223)


def walk(seed: np.uint32, steps: int) -> float:
    """One walker: ``steps`` steps of +-1 chosen by a linear congruential generator."""
    h = seed
    x = 0.0
    for _ in range(steps):
        h = h * A + C
        if (h >> np.uint32(16)) & np.uint32(1):
            x += 1.0
        else:
            x -= 1.0
    return x


def histogram(x: float, counts, width: float):
    """Add every walker to its bin (bins of ``width`` around 0, the outer ones open)."""
    nbins = len(counts)
    b = int(x / width + nbins / 2)
    atomic_add(counts, min(max(b, 0), nbins - 1), 1)


def spread(x: float):
    """Mean squared displacement of the ensemble (the steps, for a fair walk)."""
    return lanesum(x * x) / nlanes()


def compare(ca, cb):
    """Per bin: the larger of the two counts, and how far apart they are at most."""
    i = lane()
    return lanemax(max(ca[i], cb[i])), lanemax(abs(ca[i] - cb[i]))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--walkers", type=int, default=200_000)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--bins", type=int, default=40)
    ap.add_argument("--svg", default="async_pipeline.svg")
    ap.add_argument("--backend", default=None)
    a = ap.parse_args(argv)
    opts = {"backend": a.backend}
    # one thread each: the two simulations share the cores between them
    sim = hydra.compile(walk, varying="seed", threads=1, **opts)
    hist = hydra.compile(histogram, varying="x", **opts)
    msd = hydra.compile(spread, varying="x", **opts)
    both = hydra.compile(compare, lanes=a.bins, **opts)

    seeds_a = np.arange(a.walkers, dtype=np.uint32) * np.uint32(2654435761)
    seeds_b = seeds_a ^ np.uint32(0x5BD1E995)
    counts_a = np.zeros(a.bins, dtype=np.int64)
    counts_b = np.zeros(a.bins, dtype=np.int64)
    width = 4.0 * np.sqrt(a.steps) / a.bins * 2

    xa = sim.submit(seeds_a, a.steps)            # two independent simulations
    xb = sim.submit(seeds_b, a.steps)
    hist.submit(xa, counts_a, width)             # futures as arguments
    hist.submit(xb, counts_b, width)
    ma, mb = msd.submit(xa), msd.submit(xb)
    peak = both.submit(counts_a, counts_b)       # reads what the histograms write
    hydra.wait()

    print(f"{a.walkers} walkers x {a.steps} steps, twice")
    print(f"mean squared displacement: {ma.result():.1f} and {mb.result():.1f} "
          f"(a fair walk: {a.steps})")
    top, gap = peak.result()
    print(f"histograms: {counts_a.sum()} and {counts_b.sum()} walkers, fullest bin {top}, "
          f"largest difference {gap}")
    with np.errstate(over="ignore"):  # the generator wraps on purpose
        agree = all(walk(np.uint32(s), a.steps) == x
                    for s, x in zip(seeds_a[:5], xa.result()[:5]))
    print(f"plain Python agrees on the first walkers: {agree}")
    graph = hydra.launch_graph(last=7)
    print(graph)
    graph.save(a.svg)
    print(f"launch graph: {a.svg}")


if __name__ == "__main__":
    main()
