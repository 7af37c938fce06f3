"""Mandelbrot 1024x768, x in [-2, 1], y in [-1, 1], 256 iterations, float32, int32 counts."""

import numba
import numpy as np

NAME = "mandelbrot"
VARYING = ("c_re", "c_im")
TWO, FOUR = np.float32(2.0), np.float32(4.0)


def kernel(c_re: np.float32, c_im: np.float32, max_iter: np.int32) -> np.int32:
    # typed constants: Numba would widen float32 * 2.0 to float64 (hydra follows NumPy 2)
    z_re = c_re
    z_im = c_im
    i = np.int32(0)
    while i < max_iter:
        if z_re * z_re + z_im * z_im > FOUR:
            break
        new_re = z_re * z_re - z_im * z_im
        new_im = TWO * z_re * z_im
        z_re = c_re + new_re
        z_im = c_im + new_im
        i += 1
    return i


def setup():
    xs = np.linspace(-2.0, 1.0, 1024, dtype=np.float32)
    ys = np.linspace(-1.0, 1.0, 768, dtype=np.float32)
    return np.tile(xs, 768), np.repeat(ys, 1024), np.int32(256)


def numpy_masks(c_re, c_im, max_iter):
    z_re, z_im = c_re.copy(), c_im.copy()
    count = np.zeros(c_re.shape, np.int32)
    active = np.ones(c_re.shape, bool)
    for _ in range(int(max_iter)):
        zr, zi = z_re[active], z_im[active]
        escaped = zr * zr + zi * zi > np.float32(4.0)
        idx = np.nonzero(active)[0]
        active[idx[escaped]] = False
        idx = idx[~escaped]
        if idx.size == 0:
            break
        zr, zi = zr[~escaped], zi[~escaped]
        z_re[idx] = c_re[idx] + (zr * zr - zi * zi)
        z_im[idx] = c_im[idx] + np.float32(2.0) * zr * zi
        count[idx] += 1
    return count


_scalar = numba.njit(kernel)


@numba.njit
def numba_scalar(c_re, c_im, max_iter):
    out = np.empty(c_re.size, np.int32)
    for i in range(c_re.size):
        out[i] = _scalar(c_re[i], c_im[i], max_iter)
    return out


@numba.njit(parallel=True)
def numba_parallel(c_re, c_im, max_iter):
    out = np.empty(c_re.size, np.int32)
    for i in numba.prange(c_re.size):
        out[i] = _scalar(c_re[i], c_im[i], max_iter)
    return out


def jax_vmap(jax, jnp):
    def one(c_re, c_im, max_iter):
        def cond(s):
            zr, zi, i = s
            return (i < max_iter) & (zr * zr + zi * zi <= 4.0)

        def body(s):
            zr, zi, i = s
            return c_re + (zr * zr - zi * zi), c_im + 2.0 * zr * zi, i + 1
        return jax.lax.while_loop(cond, body, (c_re, c_im, jnp.int32(0)))[2]
    return jax.jit(jax.vmap(one, in_axes=(0, 0, None)))
