"""Collatz stopping times of 1..1e6, int64."""

import numba
import numpy as np

from examples.collatz import collatz_steps  # the per-lane function of the example

NAME = "collatz"
VARYING = ("n",)


kernel = collatz_steps


def setup():
    return (np.arange(1, 1_000_001, dtype=np.int64),)


def numpy_masks(n):
    n = n.copy()
    steps = np.zeros(n.shape, np.int64)
    idx = np.nonzero(n != 1)[0]
    while idx.size:
        x = n[idx]
        even = x % 2 == 0
        x = np.where(even, x // 2, 3 * x + 1)
        n[idx] = x
        steps[idx] += 1
        idx = idx[x != 1]
    return steps


_scalar = numba.njit(kernel)


@numba.njit
def numba_scalar(n):
    out = np.empty(n.size, np.int64)
    for i in range(n.size):
        out[i] = _scalar(n[i])
    return out


@numba.njit(parallel=True)
def numba_parallel(n):
    out = np.empty(n.size, np.int64)
    for i in numba.prange(n.size):
        out[i] = _scalar(n[i])
    return out


def jax_vmap(jax, jnp):
    def one(n):
        def body(s):
            x, k = s
            return jnp.where(x % 2 == 0, x // 2, 3 * x + 1), k + 1
        return jax.lax.while_loop(lambda s: s[0] != 1, body, (n, jnp.int64(0)))[1]
    return jax.jit(jax.vmap(one))
