"""``python -m bench dask``: one kernel run locally and as Dask tasks on a LocalCluster.

The mandelbrot kernel of ``bench/mandelbrot.py`` (2048x1536 pixels, 8192 iterations) on
a picture cut into 8 bands of rows, each band one task of at least ~100 ms: a local call
on one thread, then the same call with Dask arrays on a LocalCluster of 1 and of 2
process workers (one thread each, so that every configuration runs the same code on the
same cores).  For each cluster it
reports the first compute (the workers compile the kernel: the time to the first
result), the best of the warm computes, the scheduling overhead per task (one worker:
warm time minus the local time, over the tasks), and whether the picture equals the
local one bit for bit.
"""

from __future__ import annotations

import time

import numpy as np

import hydra

from .mandelbrot import kernel as mandel


def _picture(width: int, height: int):
    xs = np.linspace(-2.0, 1.0, width, dtype=np.float32)
    ys = np.linspace(-1.0, 1.0, height, dtype=np.float32)
    return np.tile(xs, height), np.repeat(ys, width)


def run(width: int = 2048, height: int = 1536, rows: int = 192, iterations: int = 8192,
        repeat: int = 3) -> None:
    import dask.array as da
    from distributed import Client, LocalCluster, wait

    k = hydra.compile(mandel, varying=("c_re", "c_im"), threads=1)
    c_re, c_im = _picture(width, height)
    n = np.int32(iterations)
    k(c_re, c_im, n)
    local = []
    for _ in range(repeat):
        t = time.perf_counter()
        expected = k(c_re, c_im, n)
        local.append(time.perf_counter() - t)
    t_local = min(local)
    chunk = width * rows
    tasks = -(-c_re.size // chunk)
    print(f"# mandelbrot {width}x{height}, {iterations} iterations, {tasks} tasks of {rows} rows "
          f"(~{t_local / tasks * 1e3:.0f} ms each on one thread)")
    print(f"{'configuration':24} {'first s':>8} {'best s':>7} {'speed-up':>9} "
          f"{'overhead/task ms':>17} {'equal':>6}")
    print(f"{'local, 1 thread':24} {'':>8} {t_local:7.3f} {1.0:8.2f}x {'':>17} {'yes':>6}")
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                          dashboard_address=None, host="127.0.0.1") as cluster, \
                Client(cluster) as client:
            # the pixels are made on the workers and wait there (no 24 MB graph to send)
            xs, ys = c_re[:width], c_im[::width]
            index = da.arange(c_re.size, chunks=chunk, dtype=np.int64)
            dr = index.map_blocks(lambda i: xs[i % width], dtype=np.float32)
            di = index.map_blocks(lambda i: ys[i // width], dtype=np.float32)
            dr, di = client.persist([dr, di])
            wait([dr, di])
            t = time.perf_counter()
            got = k(dr, di, n).compute()
            first = time.perf_counter() - t
            warm = []
            for _ in range(repeat):
                t = time.perf_counter()
                got = k(dr, di, n).compute()
                warm.append(time.perf_counter() - t)
            best = min(warm)
            overhead = (best * workers - t_local) / tasks
            same = "yes" if np.array_equal(got, expected) else "NO"
            print(f"{f'LocalCluster {workers} worker' + 's' * (workers > 1):24} {first:8.3f} "
                  f"{best:7.3f} {t_local / best:8.2f}x {overhead * 1e3:17.1f} {same:>6}",
                  flush=True)
