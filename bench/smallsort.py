"""Per-lane np.sort / np.argsort of short rows on cpu: hydra's native sorting network
(``hydra.executor.smallsort``) against NumPy's stable sort of the whole batch along
the last axis, and hydra with the network switched off (the host rule: that same NumPy
call).  Interleaved runs, best and median.

    python -m bench.smallsort [--lanes 100000] [--repeat 15]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import hydra
from hydra.executor import smallsort


def sorted_rows(x):
    return np.sort(x)


def ranks(x):
    return np.argsort(x)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lanes", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=15)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"{'fn':8} {'m':>3} {'dtype':8} {'hydra cpu':>16} {'numpy batch':>16} "
          f"{'host rule':>16} {'vs numpy':>9}   (ms: best / median)")
    for fn, numpy_fn in ((sorted_rows, np.sort), (ranks, np.argsort)):
        for m in (4, 8, 16):
            for dtype in (np.float64, np.float32):
                x = rng.normal(size=(a.lanes, m)).astype(dtype)
                native = hydra.compile(fn, varying="x", backend="cpu")
                saved, smallsort.SMALL = smallsort.SMALL, 0
                try:
                    host = hydra.compile(fn, varying="x", backend="cpu")
                    host(x)
                finally:
                    smallsort.SMALL = saved
                native(x)
                runs = {"hydra": [], "numpy": [], "host": []}
                for _ in range(a.repeat):
                    for name, f in (("hydra", lambda: native(x)),
                                    ("numpy", lambda: numpy_fn(x, axis=-1, kind="stable")),
                                    ("host", lambda: host(x))):
                        t = time.perf_counter()
                        f()
                        runs[name].append((time.perf_counter() - t) * 1e3)
                cells = {k: f"{min(v):7.2f} / {np.median(v):6.2f}" for k, v in runs.items()}
                ratio = np.median(runs["numpy"]) / np.median(runs["hydra"])
                print(f"{numpy_fn.__name__:8} {m:3d} {np.dtype(dtype).name:8} "
                      f"{cells['hydra']:>16} {cells['numpy']:>16} {cells['host']:>16} "
                      f"{ratio:8.1f}x")


if __name__ == "__main__":
    main()
