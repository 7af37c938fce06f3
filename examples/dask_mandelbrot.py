"""A Mandelbrot image too large for one machine's patience, as a Dask array: one lane per
pixel, one Dask task per band of rows, on a LocalCluster of process workers.

    python examples/dask_mandelbrot.py                       # 4096x3072, 2 workers
    python examples/dask_mandelbrot.py --width 64 --height 32 --workers 1 --check

The kernel is the one of ``mandelbrot.py``; hydra ships it to the workers as source and
each worker compiles it once.  With a ``distributed.Client`` on a real cluster the same
code runs across machines.
"""

import argparse
import time

import dask.array as da
import numpy as np
from distributed import Client, LocalCluster

import hydra
from mandelbrot import grid, mandel, write_png


def pixels(width: int, height: int, rows_per_chunk: int):
    """The pixels' coordinates as lazy Dask arrays, one chunk per band of rows, made
    where they are used (the same values as ``mandelbrot.grid``)."""
    xs = np.linspace(-2.0, 1.0, width, dtype=np.float32)
    ys = np.linspace(-1.0, 1.0, height, dtype=np.float32)
    index = da.arange(width * height, chunks=width * rows_per_chunk, dtype=np.int64)
    return (index.map_blocks(lambda i: xs[i % width], dtype=np.float32),
            index.map_blocks(lambda i: ys[i // width], dtype=np.float32))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--height", type=int, default=3072)
    parser.add_argument("--iterations", type=int, default=256)
    parser.add_argument("--rows-per-chunk", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--png", default="dask_mandelbrot.png", help="write the picture here")
    parser.add_argument("--check", action="store_true",
                        help="also render locally and compare bit for bit")
    args = parser.parse_args()
    kernel = hydra.compile(mandel, varying=("c_re", "c_im"), threads=1)
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None, host="127.0.0.1") as cluster, Client(cluster):
        c_re, c_im = pixels(args.width, args.height, args.rows_per_chunk)
        counts = kernel(c_re, c_im, np.int32(args.iterations))  # lazy: nothing runs yet
        image = counts.reshape(args.height, args.width)
        print(f"{image.shape[1]}x{image.shape[0]} pixels in {counts.numblocks[0]} tasks "
              f"on {args.workers} worker(s)")
        start = time.perf_counter()
        picture = image.compute()
        elapsed = time.perf_counter() - start
    write_png(args.png, picture, args.iterations)
    print(f"wrote {args.png} in {elapsed:.2f} s (the workers' compiles included)")
    if args.check:
        local = kernel(*grid(args.width, args.height), np.int32(args.iterations))
        print("equal to a local call:", np.array_equal(local.reshape(picture.shape), picture))


if __name__ == "__main__":
    main()
