"""aobench: 256x256 pixels, 3 spheres + a plane, 32 ambient-occlusion rays per hit,
float64, a per-pixel counter-based hash for the random directions.

One lane per pixel; sky pixels finish at once and hits cast 32 rays, so the work per
gang varies a lot (the test of dynamic load balancing)."""

import math

import numba
import numpy as np

NAME = "aobench"
VARYING = ("x", "y")
TRANSCENDENTAL = True
W = H = 256
NAO = 32
SPHERES = np.array([[-2.0, 0.0, -3.5, 0.5], [-0.5, 0.0, -3.0, 0.5], [1.0, 0.0, -2.2, 0.5]])


def kernel(x: int, y: int, w: int, h: int, nao: int) -> float:
    # camera ray from the origin through the pixel
    dx = (x + 0.5 - w / 2.0) / (w / 2.0)
    dy = -(y + 0.5 - h / 2.0) / (h / 2.0)
    dz = -1.0
    inv = 1.0 / math.sqrt(dx * dx + dy * dy + dz * dz)
    dx, dy, dz = dx * inv, dy * inv, dz * inv
    t = 1.0e17
    hit = False
    nx, ny, nz = 0.0, 0.0, 0.0
    for s in range(3):
        cx, cy, cz, rad = SPHERES[s, 0], SPHERES[s, 1], SPHERES[s, 2], SPHERES[s, 3]
        b = -(cx * dx + cy * dy + cz * dz)
        c = cx * cx + cy * cy + cz * cz - rad * rad
        disc = b * b - c
        if disc > 0.0:
            tt = -b - math.sqrt(disc)
            if tt > 0.0 and tt < t:
                t = tt
                hit = True
                nx, ny, nz = tt * dx - cx, tt * dy - cy, tt * dz - cz
                inv = 1.0 / math.sqrt(nx * nx + ny * ny + nz * nz)
                nx, ny, nz = nx * inv, ny * inv, nz * inv
    if abs(dy) > 1.0e-17:  # the plane y = -0.5
        tt = -0.5 / dy
        if tt > 0.0 and tt < t:
            t = tt
            hit = True
            nx, ny, nz = 0.0, 1.0, 0.0
    if not hit:
        return 0.0
    px = t * dx + 1.0e-4 * nx
    py = t * dy + 1.0e-4 * ny
    pz = t * dz + 1.0e-4 * nz
    # an orthonormal basis around the normal
    if abs(nx) < 0.6:
        ax, ay, az = 1.0, 0.0, 0.0
    elif abs(ny) < 0.6:
        ax, ay, az = 0.0, 1.0, 0.0
    else:
        ax, ay, az = 0.0, 0.0, 1.0
    sx, sy, sz = ay * nz - az * ny, az * nx - ax * nz, ax * ny - ay * nx
    inv = 1.0 / math.sqrt(sx * sx + sy * sy + sz * sz)
    sx, sy, sz = sx * inv, sy * inv, sz * inv
    ux, uy, uz = ny * sz - nz * sy, nz * sx - nx * sz, nx * sy - ny * sx
    occluded = 0
    for i in range(nao):
        # two 32-bit hashes of (pixel, sample): int64 arithmetic masked to 32 bits
        hsh = ((y * w + x) * 2 * nao + 2 * i) * 0x9E3779B1 & 0xFFFFFFFF
        hsh = ((hsh >> 16) ^ hsh) * 0x45D9F3B & 0xFFFFFFFF
        hsh = ((hsh >> 16) ^ hsh) * 0x45D9F3B & 0xFFFFFFFF
        r1 = ((hsh >> 16) ^ hsh) * (1.0 / 4294967296.0)
        hsh = ((y * w + x) * 2 * nao + 2 * i + 1) * 0x9E3779B1 & 0xFFFFFFFF
        hsh = ((hsh >> 16) ^ hsh) * 0x45D9F3B & 0xFFFFFFFF
        hsh = ((hsh >> 16) ^ hsh) * 0x45D9F3B & 0xFFFFFFFF
        r2 = ((hsh >> 16) ^ hsh) * (1.0 / 4294967296.0)
        theta = math.sqrt(r1)
        phi = 2.0 * math.pi * r2
        lx, ly, lz = math.cos(phi) * theta, math.sin(phi) * theta, math.sqrt(1.0 - theta * theta)
        rx = lx * sx + ly * ux + lz * nx
        ry = lx * sy + ly * uy + lz * ny
        rz = lx * sz + ly * uz + lz * nz
        blocked = False
        for s in range(3):
            cx, cy, cz = px - SPHERES[s, 0], py - SPHERES[s, 1], pz - SPHERES[s, 2]
            rad = SPHERES[s, 3]
            b = cx * rx + cy * ry + cz * rz
            c = cx * cx + cy * cy + cz * cz - rad * rad
            disc = b * b - c
            if disc > 0.0 and -b - math.sqrt(disc) > 0.0:
                blocked = True
        if abs(ry) > 1.0e-17 and -(py + 0.5) / ry > 0.0:
            blocked = True
        if blocked:
            occluded += 1
    return (nao - occluded) / nao


def setup():
    ys, xs = np.divmod(np.arange(W * H, dtype=np.int64), W)
    return xs, ys, W, H, NAO


def numpy_masks(x, y, w, h, nao):
    """The same algorithm on whole arrays: every pixel casts its rays, misses masked."""
    dx = (x + 0.5 - w / 2.0) / (w / 2.0)
    dy = -(y + 0.5 - h / 2.0) / (h / 2.0)
    dz = -np.ones_like(dx)
    inv = 1.0 / np.sqrt(dx * dx + dy * dy + dz * dz)
    dx, dy, dz = dx * inv, dy * inv, dz * inv
    t = np.full(dx.shape, 1.0e17)
    hit = np.zeros(dx.shape, bool)
    nx, ny, nz = np.zeros_like(dx), np.zeros_like(dx), np.zeros_like(dx)
    for cx, cy, cz, rad in SPHERES:
        b = -(cx * dx + cy * dy + cz * dz)
        disc = b * b - (cx * cx + cy * cy + cz * cz - rad * rad)
        tt = -b - np.sqrt(np.maximum(disc, 0.0))
        m = (disc > 0.0) & (tt > 0.0) & (tt < t)
        t = np.where(m, tt, t)
        hit |= m
        ex, ey, ez = tt * dx - cx, tt * dy - cy, tt * dz - cz
        inv = 1.0 / np.sqrt(ex * ex + ey * ey + ez * ez)
        nx, ny, nz = np.where(m, ex * inv, nx), np.where(m, ey * inv, ny), np.where(m, ez * inv, nz)
    with np.errstate(divide="ignore"):
        tt = np.where(np.abs(dy) > 1.0e-17, -0.5 / dy, -1.0)
    m = (tt > 0.0) & (tt < t)
    t = np.where(m, tt, t)
    hit |= m
    nx, ny, nz = np.where(m, 0.0, nx), np.where(m, 1.0, ny), np.where(m, 0.0, nz)
    px, py, pz = t * dx + 1.0e-4 * nx, t * dy + 1.0e-4 * ny, t * dz + 1.0e-4 * nz
    c0, c1 = np.abs(nx) < 0.6, np.abs(ny) < 0.6
    ax = np.where(c0, 1.0, 0.0)
    ay = np.where(~c0 & c1, 1.0, 0.0)
    az = np.where(~c0 & ~c1, 1.0, 0.0)
    sx, sy, sz = ay * nz - az * ny, az * nx - ax * nz, ax * ny - ay * nx
    inv = 1.0 / np.sqrt(sx * sx + sy * sy + sz * sz)
    sx, sy, sz = sx * inv, sy * inv, sz * inv
    ux, uy, uz = ny * sz - nz * sy, nz * sx - nx * sz, nx * sy - ny * sx
    occluded = np.zeros(dx.shape, np.int64)
    pix = (y * w + x) * 2 * nao
    for i in range(nao):
        rs = []
        for k in range(2):
            hsh = (pix + 2 * i + k) * 0x9E3779B1 & 0xFFFFFFFF
            hsh = ((hsh >> 16) ^ hsh) * 0x45D9F3B & 0xFFFFFFFF
            hsh = ((hsh >> 16) ^ hsh) * 0x45D9F3B & 0xFFFFFFFF
            rs.append(((hsh >> 16) ^ hsh) * (1.0 / 4294967296.0))
        theta, phi = np.sqrt(rs[0]), 2.0 * math.pi * rs[1]
        lx, ly, lz = np.cos(phi) * theta, np.sin(phi) * theta, np.sqrt(1.0 - theta * theta)
        rx = lx * sx + ly * ux + lz * nx
        ry = lx * sy + ly * uy + lz * ny
        rz = lx * sz + ly * uz + lz * nz
        blocked = np.zeros(dx.shape, bool)
        for cx, cy, cz, rad in SPHERES:
            ex, ey, ez = px - cx, py - cy, pz - cz
            b = ex * rx + ey * ry + ez * rz
            disc = b * b - (ex * ex + ey * ey + ez * ez - rad * rad)
            blocked |= (disc > 0.0) & (-b - np.sqrt(np.maximum(disc, 0.0)) > 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            blocked |= (np.abs(ry) > 1.0e-17) & (-(py + 0.5) / ry > 0.0)
        occluded += blocked
    return np.where(hit, (nao - occluded) / nao, 0.0)


_scalar = numba.njit(kernel)


@numba.njit
def numba_scalar(x, y, w, h, nao):
    out = np.empty(x.size)
    for i in range(x.size):
        out[i] = _scalar(x[i], y[i], w, h, nao)
    return out


@numba.njit(parallel=True)
def numba_parallel(x, y, w, h, nao):
    out = np.empty(x.size)
    for i in numba.prange(x.size):
        out[i] = _scalar(x[i], y[i], w, h, nao)
    return out
