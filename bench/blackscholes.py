"""Black-Scholes call prices: 1e6 options, float64, math.erf for the normal CDF."""

import math

import numba
import numpy as np

NAME = "black-scholes"
VARYING = ("S", "K", "T", "v")
TRANSCENDENTAL = True


def kernel(S: float, K: float, T: float, v: float, r: float) -> float:
    sqrt_t = math.sqrt(T)
    d1 = (math.log(S / K) + (r + 0.5 * v * v) * T) / (v * sqrt_t)
    d2 = d1 - v * sqrt_t
    nd1 = 0.5 * (1.0 + math.erf(d1 / math.sqrt(2.0)))
    nd2 = 0.5 * (1.0 + math.erf(d2 / math.sqrt(2.0)))
    return S * nd1 - K * math.exp(-r * T) * nd2


def setup():
    rng = np.random.default_rng(1)
    n = 1_000_000
    return (rng.uniform(5.0, 30.0, n), rng.uniform(1.0, 100.0, n), rng.uniform(0.25, 10.0, n),
            rng.uniform(0.1, 0.5, n), 0.02)


def _erf(x):
    try:
        from scipy.special import erf
    except ImportError:  # plain NumPy has no erf
        return np.frompyfunc(math.erf, 1, 1)(x).astype(np.float64)
    return erf(x)


def numpy_masks(S, K, T, v, r):
    sqrt_t = np.sqrt(T)
    d1 = (np.log(S / K) + (r + 0.5 * v * v) * T) / (v * sqrt_t)
    d2 = d1 - v * sqrt_t
    nd1 = 0.5 * (1.0 + _erf(d1 / math.sqrt(2.0)))
    nd2 = 0.5 * (1.0 + _erf(d2 / math.sqrt(2.0)))
    return S * nd1 - K * np.exp(-r * T) * nd2


_scalar = numba.njit(kernel)


@numba.njit
def numba_scalar(S, K, T, v, r):
    out = np.empty(S.size)
    for i in range(S.size):
        out[i] = _scalar(S[i], K[i], T[i], v[i], r)
    return out


@numba.njit(parallel=True)
def numba_parallel(S, K, T, v, r):
    out = np.empty(S.size)
    for i in numba.prange(S.size):
        out[i] = _scalar(S[i], K[i], T[i], v[i], r)
    return out


def jax_vmap(jax, jnp):
    def one(S, K, T, v, r):
        sqrt_t = jnp.sqrt(T)
        d1 = (jnp.log(S / K) + (r + 0.5 * v * v) * T) / (v * sqrt_t)
        d2 = d1 - v * sqrt_t
        cdf = jax.scipy.special.erf
        nd1 = 0.5 * (1.0 + cdf(d1 / math.sqrt(2.0)))
        nd2 = 0.5 * (1.0 + cdf(d2 / math.sqrt(2.0)))
        return S * nd1 - K * jnp.exp(-r * T) * nd2
    return jax.jit(jax.vmap(one, in_axes=(0, 0, 0, 0, None)))
