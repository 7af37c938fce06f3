"""Per-lane Mandelbrot through hydra: one lane per pixel, divergent trip counts.

    python examples/mandelbrot.py        # ASCII picture, mandelbrot.png, speed vs NumPy and numba
    python examples/mandelbrot.py --width 1024 --height 768 --png m.png --no-compare
"""

import argparse
import time

import numpy as np

import hydra

CHARS = " .:-=+*#%@"


def mandel(c_re: np.float32, c_im: np.float32, max_iter: np.int32) -> np.int32:
    """Iterations until z = z*z + c escapes |z| > 2 (max_iter if it never does)."""
    z_re = c_re
    z_im = c_im
    i = np.int32(0)
    while i < max_iter:
        if z_re * z_re + z_im * z_im > 4.0:
            break
        new_re = z_re * z_re - z_im * z_im
        new_im = 2.0 * z_re * z_im
        z_re = c_re + new_re
        z_im = c_im + new_im
        i += 1
    return i


kernel = hydra.compile(mandel, varying=("c_re", "c_im"))


def render(width: int, height: int, max_iter: int) -> np.ndarray:
    """Counts for a width x height grid over x in [-2, 1], y in [-1, 1]."""
    c_re, c_im = grid(width, height)
    counts = kernel(c_re, c_im, np.int32(max_iter))
    return counts.reshape(height, width)


def ascii_art(counts: np.ndarray, max_iter: int) -> str:
    levels = (np.log1p(counts) / np.log1p(max_iter) * (len(CHARS) - 1)).astype(int)
    return "\n".join("".join(CHARS[v] for v in row) for row in levels)


def write_png(path: str, counts: np.ndarray, max_iter: int) -> None:
    """A grey-scale PNG written with zlib alone (no imaging library needed)."""
    import struct
    import zlib
    grey = (255 - counts * 255 // max_iter).astype(np.uint8)
    raw = b"".join(b"\x00" + row.tobytes() for row in grey)

    def chunk(tag, data):
        return (struct.pack(">I", len(data)) + tag + data
                + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))
    h, w = grey.shape
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(png)


def grid(width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    xs = np.linspace(-2.0, 1.0, width, dtype=np.float32)
    ys = np.linspace(-1.0, 1.0, height, dtype=np.float32)
    return np.tile(xs, height), np.repeat(ys, width)


def numpy_masks(c_re, c_im, max_iter):
    """The same computation written by hand with NumPy masks: what hydra saves you."""
    z_re, z_im = c_re.copy(), c_im.copy()
    counts = np.full(c_re.shape, max_iter, dtype=np.int32)
    active = np.ones(c_re.shape, dtype=bool)
    for i in range(max_iter):
        escaped = active & (z_re * z_re + z_im * z_im > np.float32(4.0))
        counts[escaped] = i
        active &= ~escaped
        if not active.any():
            break
        new_re = z_re * z_re - z_im * z_im
        new_im = np.float32(2.0) * z_re * z_im
        z_re = np.where(active, c_re + new_re, z_re)
        z_im = np.where(active, c_im + new_im, z_im)
    return counts


def best_of(fn, repeat=3):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def compare(width: int, height: int, max_iter: int) -> None:
    """Time hydra against NumPy masks and numba's scalar loop on the same picture."""
    c_re, c_im = grid(width, height)
    n = np.int32(max_iter)
    kernel(c_re, c_im, n)  # compile outside the timing
    t_hydra, ours = best_of(lambda: kernel(c_re, c_im, n))
    t_numpy, theirs = best_of(lambda: numpy_masks(c_re, c_im, max_iter), repeat=1)
    assert np.array_equal(ours, theirs), "hydra and NumPy disagree"
    line = (f"hydra ({kernel.backend_name}) {t_hydra * 1e3:8.1f} ms | NumPy masks "
            f"{t_numpy * 1e3:8.1f} ms ({t_numpy / t_hydra:5.1f}x)")
    try:
        import numba
    except ImportError:
        print(line)
        return
    scalar = numba.njit(mandel)

    @numba.njit
    def numba_loop(c_re, c_im, max_iter, out):
        for k in range(c_re.shape[0]):
            out[k] = scalar(c_re[k], c_im[k], max_iter)

    out = np.empty(c_re.shape, dtype=np.int32)
    numba_loop(c_re, c_im, n, out)
    t_numba, _ = best_of(lambda: numba_loop(c_re, c_im, n, out))
    print(f"{line} | numba @njit loop {t_numba * 1e3:8.1f} ms ({t_numba / t_hydra:5.1f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--height", type=int, default=768)
    parser.add_argument("--iterations", type=int, default=256)
    parser.add_argument("--png", default="mandelbrot.png", help="write the picture here")
    parser.add_argument("--no-compare", action="store_true",
                        help="skip the timing against NumPy and numba")
    args = parser.parse_args()
    print(ascii_art(render(78, 32, args.iterations), args.iterations))
    start = time.perf_counter()
    counts = render(args.width, args.height, args.iterations)
    elapsed = time.perf_counter() - start
    write_png(args.png, counts, args.iterations)
    print(f"wrote {args.png}: {args.width}x{args.height} pixels, {args.iterations} iterations, "
          f"{elapsed:.3f} s on the {kernel.backend_name} backend")
    if not args.no_compare:
        compare(args.width, args.height, args.iterations)


if __name__ == "__main__":
    main()
