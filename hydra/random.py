"""Per-lane random numbers from a counter-based generator: Philox 4x32-10.

Philox (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3",
SC'11; the Random123 library) is a keyed bijection of a 128-bit counter: its output
depends on (key, counter) only.  So the ``i``-th draw of a lane depends on the seed,
``i`` and the lane's global index, never on how many lanes run, how they are grouped
into gangs, threads, GPU blocks or Dask chunks, or which backend runs them.

Everything here is ordinary hydra code on ``np.uint64`` scalars (32-bit words held in
uint64, so that products of two words are exact): inside a kernel the frontend compiles
these bodies like any helper (as ``hydra.nn.relu``), so the numpy reference, cpu (SIMD:
the 32x32->64 multiplies become ``vpmuludq``) and cuda run the same definition; outside
a kernel the same functions run in plain Python with an explicit ``lane=``.  The layout
(pinned: changing it changes users' numbers):

- key: the seed as two 32-bit words, ``(seed mod 2**32, (seed >> 32) mod 2**32)``, for
  a seed in int64's range (a negative seed or ``i`` as its 64-bit two's complement);
- counter: ``(i mod 2**32, (i >> 32) mod 2**32, lane, block)``: draw ``i`` of the lane
  is one Philox block with ``block = 0``; ``integers`` takes blocks 1, 2, ... only for
  its rare rejections;
- element ``j`` of ``size=k`` is draw ``i * k + j``;
- float32 ``uniform``: the top 24 bits of word 0, times 2**-24; float64: the top 27
  bits of word 0 and the top 26 of word 1, ``(a * 2**26 + b) * 2**-53`` (MT19937's
  ``genrand_res53``): both in ``[0, 1)`` and exact in every backend;
- ``normal``: Box-Muller of ``u1 = 1 - (words 0, 1 as above)`` in ``(0, 1]`` and ``u2 =
  (words 2, 3)``: ``sqrt(-2 log u1) * cos(2 pi u2)``, in float64 (float32 rounds it),
  with a ``log`` and ``cos`` of its own (below) so that every backend gives the same bits;
- ``integers(low, high)``: Lemire's multiply-shift with rejection ("Fast random
  integer generation in an interval", 2019): ``m = w * (high - low)`` in 64 bits, taken
  when its low word is at least ``2**32 mod (high - low)``, so every value is equally
  likely (no modulo bias); a rejected word is followed by the next word of the block,
  then by blocks 1, 2, ...  ``high - low`` is between 1 and 2**32.
"""

from __future__ import annotations

import math

import numpy as np

# Philox 4x32's multipliers and Weyl key increments (Random123, philox.h)
PHILOX_M0 = np.uint64(0xD2511F53)
PHILOX_M1 = np.uint64(0xCD9E8D57)
PHILOX_W0 = np.uint64(0x9E3779B9)
PHILOX_W1 = np.uint64(0xBB67AE85)
_LOW = np.uint64(0xFFFFFFFF)
_32 = np.uint64(32)
_0, _5, _6, _8, _26 = (np.uint64(v) for v in (0, 5, 6, 8, 26))
_TWO53 = np.uint64(2**53)
_TWO32 = np.uint64(4294967296)

#: the functions a kernel may call (their records: ``hydra.registry``, kind "random")
FUNCTIONS = ("philox4x32", "bits", "uniform", "normal", "integers")


def _kernel_lane():
    raise RuntimeError("hydra.random outside a kernel needs lane=: the global index of "
                       "the lane whose numbers to draw")


# in a kernel this is the lane() intrinsic (the global lane index, under Dask too)
_kernel_lane.__hydra_intrinsic__ = "lane"


def _round(c0, c1, c2, c3, k0, k1):
    """One Philox round and the key's Weyl step, on 32-bit words held in uint64: each
    product of two words is exact, its high word is ``p >> 32`` and its low word ``p &
    0xFFFFFFFF``.  (In uint64 the words stay in 64-bit vector lanes on the cpu backend:
    the multiplies are ``vpmuludq`` with no packing to 32-bit lanes and back between
    rounds, 2x faster than rounds on uint32 words.)"""
    p0 = c0 * PHILOX_M0
    p1 = c2 * PHILOX_M1
    return ((p1 >> _32) ^ c1 ^ k0, p1 & _LOW, (p0 >> _32) ^ c3 ^ k1, p0 & _LOW,
            (k0 + PHILOX_W0) & _LOW, (k1 + PHILOX_W1) & _LOW)


def philox4x32(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 of the counter ``(c0, c1, c2, c3)`` and key ``(k0, k1)`` (uint32
    words): the block's four uint32 words, as Random123's ``philox4x32``."""
    w0, w1, w2, w3 = _philox(np.uint64(c0), np.uint64(c1), np.uint64(c2), np.uint64(c3),
                             np.uint64(k0), np.uint64(k1))
    return np.uint32(w0), np.uint32(w1), np.uint32(w2), np.uint32(w3)


def _philox(c0, c1, c2, c3, k0, k1):
    """``philox4x32`` on words held in uint64 (below 2**32), returned so."""
    # ten rounds written out: straight-line code, which the cpu backend keeps in
    # registers (a loop of ten, carrying six values through phis, was 3.7x slower)
    c0, c1, c2, c3, k0, k1 = _round(c0, c1, c2, c3, k0, k1)
    c0, c1, c2, c3, k0, k1 = _round(c0, c1, c2, c3, k0, k1)
    c0, c1, c2, c3, k0, k1 = _round(c0, c1, c2, c3, k0, k1)
    c0, c1, c2, c3, k0, k1 = _round(c0, c1, c2, c3, k0, k1)
    c0, c1, c2, c3, k0, k1 = _round(c0, c1, c2, c3, k0, k1)
    c0, c1, c2, c3, k0, k1 = _round(c0, c1, c2, c3, k0, k1)
    c0, c1, c2, c3, k0, k1 = _round(c0, c1, c2, c3, k0, k1)
    c0, c1, c2, c3, k0, k1 = _round(c0, c1, c2, c3, k0, k1)
    c0, c1, c2, c3, k0, k1 = _round(c0, c1, c2, c3, k0, k1)
    c0, c1, c2, c3, k0, k1 = _round(c0, c1, c2, c3, k0, k1)
    return c0, c1, c2, c3


def _block(seed, i, ln, block):
    """The Philox block of draw ``i`` of lane ``ln`` (the layout in the module doc), its
    words held in uint64."""
    # through int64, a cast that wraps: the words of a negative value are its two's
    # complement, with no range check at run time (np.uint64 of a Python int has one)
    s, c = np.uint64(np.int64(seed)), np.uint64(np.int64(i))
    return _philox(c & _LOW, c >> _32, np.uint64(np.int64(ln)) & _LOW, np.uint64(block),
                   s & _LOW, s >> _32)


def _bits53(a, b):
    """A 53-bit integer from the top 27 bits of word ``a`` and the top 26 of ``b``."""
    return ((a >> _5) << _26) | (b >> _6)


def _uniform(seed, i, ln, dtype, low, high):
    w0, w1, w2, w3 = _block(seed, i, ln, 0)
    if dtype is np.float32:
        return np.float32(w0 >> _8) * np.float32(1.0 / 16777216.0)
    return np.float64(_bits53(w0, w1)) * (1.0 / 9007199254740992.0)  # exact


def _normal(seed, i, ln, dtype, low, high):
    w0, w1, w2, w3 = _block(seed, i, ln, 0)
    # u1 = 1 - (words 0, 1) = n * 2**-53 in (0, 1], u2 = (words 2, 3) = m * 2**-53
    n, m = _TWO53 - _bits53(w0, w1), _bits53(w2, w3)
    z = np.sqrt(-2.0 * _log2m53(n)) * _cos2pi2m53(m)
    if dtype is np.float32:
        return np.float32(z)
    return z


# --- log and cos of the draws, from +, -, *, / and selects alone: IEEE rounds each of
# these exactly, so every backend (and plain Python) gives the same bits, where vector
# math libraries differ by an ulp or two.  Both take the 53-bit integer the uniform is
# made of, so their range reductions are exact integer operations. ----------------------

# fdlibm's split of log(2): k * _LN2_HI is exact for |k| < 2**11
_LN2_HI = float.fromhex("0x1.62e42fee00000p-1")
_LN2_LO = float.fromhex("0x1.a39ef35793c76p-33")
_SQRT2 = math.sqrt(2.0)
_PI_2 = math.pi / 2
# 2 atanh(f) = log((1 + f) / (1 - f)) = 2 (f + f**3/3 + ... + f**21/21 + ...): for |f| <=
# 3 - 2 sqrt(2) the next term is below 2**-60 of the sum
_L3, _L5, _L7, _L9, _L11, _L13, _L15, _L17, _L19, _L21 = (1.0 / k for k in range(3, 22, 2))
# Taylor series of cos and sin on [-pi/4, pi/4]: the first terms left out are below 2**-58
_C2, _C4, _C6, _C8, _C10, _C12, _C14, _C16 = (1.0 / math.factorial(k) for k in range(2, 17, 2))
_S3, _S5, _S7, _S9, _S11, _S13, _S15, _S17 = (1.0 / math.factorial(k) for k in range(3, 18, 2))


def _halving(n, e, s):
    return e + s if (n >> (e + s)) != _0 else e


def _log2m53(n):
    """log(n * 2**-53) for a uint64 ``1 <= n <= 2**53``, within about 1 ulp."""
    e = _halving(n, _0, _32)  # e = floor(log2(n)) by halving steps
    e = _halving(n, e, np.uint64(16))
    e = _halving(n, e, _8)
    e = _halving(n, e, np.uint64(4))
    e = _halving(n, e, np.uint64(2))
    e = _halving(n, e, np.uint64(1))
    x = np.float64(n) / np.float64(np.uint64(1) << e)  # n / 2**e in [1, 2): exact
    big = x > _SQRT2
    x = x * 0.5 if big else x  # [sqrt(2) / 2, sqrt(2)]
    k = np.float64(np.int64(e)) - (52.0 if big else 53.0)
    f = (x - 1.0) / (x + 1.0)
    f2 = f * f
    p = _L3 + f2 * (_L5 + f2 * (_L7 + f2 * (_L9 + f2 * (_L11 + f2 * (
        _L13 + f2 * (_L15 + f2 * (_L17 + f2 * (_L19 + f2 * _L21))))))))
    return k * _LN2_HI + (k * _LN2_LO + (2.0 * f + 2.0 * f * f2 * p))


def _cos2pi2m53(m):
    """cos(2 pi m 2**-53) for a uint64 ``0 <= m < 2**53``, within about 1 ulp."""
    q = m >> np.uint64(51)  # the quadrant, then the fraction of it in [-1/2, 1/2)
    t = np.float64(m & np.uint64(0x7FFFFFFFFFFFF)) * (1.0 / 2251799813685248.0)
    up = t >= 0.5
    t = t - 1.0 if up else t
    q = (q + np.uint64(1)) & np.uint64(3) if up else q
    a = t * _PI_2  # cos(q pi/2 + a), |a| <= pi/4
    a2 = a * a
    c = 1.0 - a2 * (_C2 - a2 * (_C4 - a2 * (_C6 - a2 * (_C8 - a2 * (
        _C10 - a2 * (_C12 - a2 * (_C14 - a2 * _C16)))))))
    s = a - a * a2 * (_S3 - a2 * (_S5 - a2 * (_S7 - a2 * (_S9 - a2 * (
        _S11 - a2 * (_S13 - a2 * (_S15 - a2 * _S17)))))))
    return c if q == _0 else -s if q == np.uint64(1) else -c if q == np.uint64(2) else s


def _integer(seed, i, ln, dtype, low, high):
    r = np.uint64(np.int64(high) - np.int64(low))  # int64: int32 bounds may not fit
    t = (_TWO32 - r) % r  # 2**32 mod r: low words below it are rejected
    w0, w1, w2, w3 = _block(seed, i, ln, 0)
    m = w0 * r
    used = 1
    while (m & _LOW) < t:  # rare: probability t / 2**32 < r / 2**32 per word
        if used % 4 == 0:
            w0, w1, w2, w3 = _block(seed, i, ln, used // 4)
        else:
            w0, w1, w2, w3 = w1, w2, w3, w0
        m = w0 * r
        used += 1
    out = np.int64(low) + np.int64(m >> _32)
    if dtype is np.int32:
        return np.int32(out)
    return out


def bits(seed, i, lane=None):
    """Draw ``i`` of this lane's stream for ``seed`` as the raw Philox block: four
    uint32 words (128 random bits; ``uniform`` uses one or two of them)."""
    ln = _kernel_lane() if lane is None else lane
    w0, w1, w2, w3 = _block(seed, i, ln, 0)
    return np.uint32(w0), np.uint32(w1), np.uint32(w2), np.uint32(w3)


def _sized(draw, seed, i, lane, size, dtype, low=0, high=1):
    """One draw, or with ``size=k`` a per-lane array of draws ``i*k .. i*k+k-1``."""
    ln = _kernel_lane() if lane is None else lane
    if size is None:
        return draw(seed, i, ln, dtype, low, high)
    out = np.empty(size, dtype)
    for j in range(size):
        out[j] = draw(seed, i * size + j, ln, dtype, low, high)
    return out


def uniform(seed, i, dtype=np.float64, size=None, lane=None):
    """Draw ``i`` of this lane's stream for ``seed``: a float in [0, 1) (``dtype``
    np.float64 or np.float32); with ``size=k`` a per-lane array of draws ``i*k ..
    i*k+k-1``.  Outside a kernel give ``lane=`` (a global lane index)."""
    assert dtype is np.float64 or dtype is np.float32, "dtype is np.float64 or np.float32"
    return _sized(_uniform, seed, i, lane, size, dtype)


def normal(seed, i, dtype=np.float64, size=None, lane=None):
    """Draw ``i`` of this lane's stream for ``seed``: a standard normal (Box-Muller;
    ``dtype`` np.float64 or np.float32); ``size=`` and ``lane=`` as in ``uniform``."""
    assert dtype is np.float64 or dtype is np.float32, "dtype is np.float64 or np.float32"
    return _sized(_normal, seed, i, lane, size, dtype)


def integers(seed, i, low, high, dtype=np.int64, size=None, lane=None):
    """Draw ``i`` of this lane's stream for ``seed``: an integer in ``[low, high)``,
    every value equally likely (``1 <= high - low <= 2**32``; ``dtype`` np.int64 or
    np.int32); ``size=`` and ``lane=`` as in ``uniform``."""
    assert dtype is np.int64 or dtype is np.int32, "dtype is np.int64 or np.int32"
    assert 0 < np.int64(high) - np.int64(low) <= 4294967296, \
        "integers needs 1 <= high - low <= 2**32"
    return _sized(_integer, seed, i, lane, size, dtype, low, high)
