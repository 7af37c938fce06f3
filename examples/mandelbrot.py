"""Per-lane Mandelbrot through hydra: one lane per pixel, divergent trip counts.

    python examples/mandelbrot.py            # ASCII picture on the terminal
    python examples/mandelbrot.py --png m.png --width 1024 --height 768
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
    xs = np.linspace(-2.0, 1.0, width, dtype=np.float32)
    ys = np.linspace(-1.0, 1.0, height, dtype=np.float32)
    c_re = np.tile(xs, height)
    c_im = np.repeat(ys, width)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=78)
    parser.add_argument("--height", type=int, default=32)
    parser.add_argument("--iterations", type=int, default=256)
    parser.add_argument("--png", default=None, help="also write the picture to this PNG file")
    args = parser.parse_args()
    start = time.perf_counter()
    counts = render(args.width, args.height, args.iterations)
    elapsed = time.perf_counter() - start
    if args.png:
        write_png(args.png, counts, args.iterations)
        print(f"wrote {args.png}")
    if args.width <= 200:
        print(ascii_art(counts, args.iterations))
    print(f"{args.width}x{args.height} pixels, {args.iterations} iterations: "
          f"{elapsed:.3f} s on the {kernel.backend_name} backend (compile included)")


if __name__ == "__main__":
    main()
