"""aobench: ambient occlusion of 3 spheres on a plane, one lane per pixel (float64).

One primary ray per pixel; where it hits, 32 occlusion rays from a per-pixel hash
RNG.  Vectors are tuples, and the helper functions are inlined into the kernel.

    python examples/aobench.py [--size 256] [--png ao.png]
"""

import argparse
import math
import time

import numpy as np

import hydra

AO_RAYS = 32
FAR = 1.0e17


def dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def normalize(v):
    length = math.sqrt(dot(v, v))
    if length > 1.0e-17:
        return (v[0] / length, v[1] / length, v[2] / length)
    return v


def cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def hit_sphere(t_best, org, d, cx, cy, cz, radius):
    """The distance to the sphere if it is nearer than t_best, else t_best."""
    rs = (org[0] - cx, org[1] - cy, org[2] - cz)
    b = dot(rs, d)
    c = dot(rs, rs) - radius * radius
    disc = b * b - c
    if disc > 0.0:
        t = -b - math.sqrt(disc)
        if 0.0 < t < t_best:
            return t
    return t_best


def hit_plane(t_best, org, d):
    """The plane y = -0.5 facing up."""
    v = d[1]
    if abs(v) < 1.0e-17:
        return t_best
    t = -(org[1] + 0.5) / v
    if 0.0 < t < t_best:
        return t
    return t_best


def nearest(org, d):
    """(distance, object): object -1 for nothing, 0..2 spheres, 3 the plane."""
    t = FAR
    which = -1
    t0 = hit_sphere(t, org, d, -2.0, 0.0, -3.5, 0.5)
    if t0 < t:
        t, which = t0, 0
    t1 = hit_sphere(t, org, d, -0.5, 0.0, -3.0, 0.5)
    if t1 < t:
        t, which = t1, 1
    t2 = hit_sphere(t, org, d, 1.0, 0.0, -2.2, 0.5)
    if t2 < t:
        t, which = t2, 2
    t3 = hit_plane(t, org, d)
    if t3 < t:
        t, which = t3, 3
    return t, which


def rand(state):
    """A counter-based uint32 hash (lowbias32) -> (next state, uniform float in [0, 1))."""
    x = state
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
    return state + np.uint32(1), float(x >> np.uint32(8)) * (1.0 / 16777216.0)


def shade(pixel, width, height):
    """The grey level of one pixel, in [0, 1]."""
    x = pixel % width
    y = pixel // width
    px = (x + 0.5 - width / 2.0) / (width / 2.0)
    py = -(y + 0.5 - height / 2.0) / (height / 2.0)
    org = (0.0, 0.0, 0.0)
    d = normalize((px, py, -1.0))
    t, which = nearest(org, d)
    if which < 0:
        return 0.0
    p = (org[0] + t * d[0], org[1] + t * d[1], org[2] + t * d[2])
    if which == 0:
        n = normalize((p[0] + 2.0, p[1], p[2] + 3.5))
    elif which == 1:
        n = normalize((p[0] + 0.5, p[1], p[2] + 3.0))
    elif which == 2:
        n = normalize((p[0] - 1.0, p[1], p[2] + 2.2))
    else:
        n = (0.0, 1.0, 0.0)
    # An orthonormal basis around the normal.
    if n[0] < 0.6 and n[0] > -0.6:
        b1 = normalize(cross((1.0, 0.0, 0.0), n))
    elif n[1] < 0.6 and n[1] > -0.6:
        b1 = normalize(cross((0.0, 1.0, 0.0), n))
    else:
        b1 = normalize(cross((0.0, 0.0, 1.0), n))
    b0 = cross(b1, n)
    eps = 1.0e-4
    origin = (p[0] + eps * n[0], p[1] + eps * n[1], p[2] + eps * n[2])
    state = np.uint32(pixel) * np.uint32(2 * AO_RAYS)
    occluded = 0
    for _ in range(AO_RAYS):
        state, u = rand(state)
        state, v = rand(state)
        theta = math.sqrt(u)
        phi = 2.0 * math.pi * v
        lx = math.cos(phi) * theta
        ly = math.sin(phi) * theta
        lz = math.sqrt(1.0 - theta * theta)
        ray = (lx * b0[0] + ly * b1[0] + lz * n[0],
               lx * b0[1] + ly * b1[1] + lz * n[1],
               lx * b0[2] + ly * b1[2] + lz * n[2])
        t_occ, hit = nearest(origin, ray)
        if hit >= 0:
            occluded += 1
    return (AO_RAYS - occluded) / AO_RAYS


kernel = hydra.compile(shade, varying=("pixel",))


def render(size: int) -> np.ndarray:
    pixels = np.arange(size * size, dtype=np.int64)
    return kernel(pixels, size, size).reshape(size, size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--png", default=None, help="write the picture to this PNG file")
    args = parser.parse_args()
    start = time.perf_counter()
    image = render(args.size)
    elapsed = time.perf_counter() - start
    if args.png:
        from mandelbrot import write_png
        write_png(args.png, (255 - image * 255).astype(np.int64), 255)
        print(f"wrote {args.png}")
    print(f"{args.size}x{args.size} pixels, {AO_RAYS} occlusion rays per hit: mean "
          f"brightness {image.mean():.4f}")
    print(f"{elapsed:.3f} s on the {kernel.backend_name} backend (compile included)")


if __name__ == "__main__":
    main()
