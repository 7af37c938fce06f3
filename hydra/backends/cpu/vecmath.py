"""Vector math functions as textual LLVM IR, for linking into cpu-backend kernels.

Takes: a function name, a dtype ("float32"/"float64") and a vector width.
Guarantees: `llvm_ir` returns `(symbol, module_text)`; the module defines
`<W x T> @symbol(<W x T> %x[, <W x T> %y])` as `linkonce_odr` + `alwaysinline`, so any
number of kernel modules may link the same function without clashing, and the
inliner removes the call. Results are within `ULP[name]` ulp of NumPy's float64 result
(for float32: of NumPy's float64 result rounded to float32, since NumPy's own float32
functions vary by CPU; measured by tests/test_vecmath.py) and special values (nan,
+-inf, +-0, subnormals, overflow, domain errors) come out as NumPy's do.

All 26 functions are inline vector code (range reduction + polynomial, no libm call in
the hot path). float32 exp/log/sin/cos compute in float; the other float32 functions
widen to double, which makes them accurate to 1 ulp of the correctly rounded result at
about half the float speed. libm is called per lane only for lanes that need it, behind
a branch: sin/cos/tan of |x| > 1e9 (2**18 in native float32) and fmod with quotients
>= 2**52. `load_runtime()` (of `vecbuild`, which emits those calls) makes libm's symbols
visible to llvmlite's JIT (llvmlite does not search the process by default); `llvm_ir`
calls it.

Layout: the algorithms (one function per name, table `_IMPL`, built with `vecbuild`'s
`Builder` and `Vec`: Python operators emit LLVM instructions; their numbers are in
`vecconst`) and `llvm_ir`.  The JIT'd
array driver the tests use and the benchmark against libm and libmvec live in
`bench/vecmath.py` (`python -m bench.vecmath [names]`).
"""

from __future__ import annotations

import functools
import math

from .vecbuild import (MAGIC, MAGIC_F, Builder, Vec, clamp, copysign, define, fabs, fast2sum,
                       i2d, isinf, load_runtime, poly, pow2, scale, signbit, taylor)
from .vecconst import (ATAN_Q32, ATAN_Q64, ERF_H32, ERF_H64, ERF_P32, ERF_P64, ERFC_H32,
                       ERFC_H64, INVLN2, INVLN10, LN2, LN2_F, LN2_F16, LN2_HI, LN2_LO,
                       LN2_TAIL, LOG10_2, PIO2, PIO2_F, PIO4_HI, PIO4_LO, SIN_BIG, SIN_BIG_F)

# Max error in ulp vs NumPy (math.erf/erfc for erf/erfc) over 3 x 100k samples per
# dtype (tests/test_vecmath.py's sampling). Part of it is NumPy's own: its float32 log
# is up to 3 ulp off the correctly rounded result, its tanh 2 ulp, glibc's erfc 2 ulp.
# Against correctly rounded float32 results (float64 NumPy, rounded) every float32
# function here is within 1 ulp.
ULP: dict[str, float] = {
    "exp": 2, "exp2": 1, "expm1": 2, "log": 4, "log2": 1, "log10": 2, "log1p": 1, "pow": 1,
    "sin": 2, "cos": 2, "tan": 3, "asin": 2, "acos": 2, "atan": 2, "atan2": 2, "sinh": 3,
    "cosh": 2, "tanh": 3, "erf": 1, "erfc": 5, "cbrt": 3, "hypot": 1, "fmod": 0,
    "asinh": 2, "acosh": 2, "atanh": 1,
}
_FT = {"float32": "float", "float64": "double"}


# ---------------------------------------------------------------------------------
# Algorithms. Each in _IMPL takes double vectors (float32 arguments are widened, so
# range reduction and rounding error stay far below a float ulp) and `f32`, which picks
# shorter polynomials when the result will be rounded to float32; _NATIVE32 computes
# exp, log, sin, cos in float (the shared helpers look at the vector's type). Their
# polynomials are Taylor series where they converge fast, else the fits of `vecconst`.


def _exp_reduce(x, lo, xmin, xmax):
    """x = n ln2 + r with |r| <= ln2/2 (Cody-Waite with fma; r1 is exact)."""
    b = x.b
    xc = clamp(x, xmin, xmax)
    n = b.call("llvm.rint", xc * INVLN2[0])
    ln2 = LN2_F if x.ty == "float" else (LN2_HI, LN2_LO)
    r = b.fma(-n, ln2[1], b.fma(-n, ln2[0], xc))
    if lo is not None:
        r = r + lo
    return n, r


def _exp_poly(r, f32):
    return poly(r, taylor(0, 7 if f32 else 13))


def _expm1_poly(r, f32):
    """exp(r) - 1 = r + r*r (1/2 + r/6 + ...): only the small term carries rounding."""
    return r.b.fma(r * r, poly(r, taylor(2, 8 if f32 else 14)), r)


def _exp(x, f32, lo=None, mul=None):
    """exp(x + lo) * mul, rounded once (also into subnormals)."""
    n, r = _exp_reduce(x, lo, *((-104.0, 89.0) if x.ty == "float" else (-760.0, 720.0)))
    p = _exp_poly(r, f32)
    return scale(p if mul is None else p * mul, n)


def _nanfix(res, x):
    return x.b.select(x.isnan(), x, res)


def exp(b, x, f32):
    return _nanfix(_exp(x, f32), x)


def exp2(b, x, f32):
    xc = clamp(x, -1100.0, 1100.0)
    n = b.call("llvm.rint", xc)
    f = xc - n
    rh = f * LN2
    rl = b.fma(f, LN2, -rh) + f * LN2_TAIL
    p = _exp_poly(rh, f32)
    return _nanfix(scale(b.fma(p, rl, p), n), x)


def expm1(b, x, f32):
    n, r = _exp_reduce(x, None, -40.0, 710.0)
    half = pow2(n - 1.0)
    res = b.fma(half, _expm1_poly(r, f32), half - 0.5) * 2.0
    return _nanfix(b.select(fabs(x).lt(2.0 ** -54), x, res), x)


def _hyper(x, f32):
    """(|x|, sign-less expm1(|x|) for |x| < 22, exp(|x|)/2, exp(|x|)) for sinh/cosh."""
    b = x.b
    ax = fabs(x)
    n, r = _exp_reduce(ax, None, 0.0, 712.0)
    q = _expm1_poly(r, f32)
    half = pow2(n - 1.0)
    em1 = b.fma(half, q, half - 0.5) * 2.0
    p = q + 1.0
    return ax, em1, scale(p, n - 1.0), scale(p, n)


def sinh(b, x, f32):
    ax, e, half_e, _ = _hyper(x, f32)
    small = (e + e / (e + 1.0)) * 0.5
    return _nanfix(copysign(b.select(ax.lt(22.0), small, half_e), x), x)


def cosh(b, x, f32):
    ax, em1, half_e, e = _hyper(x, f32)
    res = b.select(ax.lt(0.3465), em1 * em1 / ((em1 + 1.0) * 2.0) + 1.0, e * 0.5 + 0.5 / e)
    return _nanfix(b.select(ax.lt(22.0), res, half_e), x)


def tanh(b, x, f32):
    ax = fabs(x)
    big = ax.ge(1.0)
    t = expm1(b, b.select(big, ax * 2.0, ax * -2.0), f32)
    res = b.select(big, 1.0 - 2.0 / (t + 2.0), -t / (t + 2.0))
    return _nanfix(copysign(b.select(ax.lt(22.0), res, 1.0), x), x)


def _asinh_acosh(b, x, ax, f32, sign):
    """log(ax + sqrt(x*x + sign)) by fdlibm's three ranges: log1p of the small excess
    over 1 (ax <= 2), log(2 ax +- 1/(ax + sqrt(...))) (ax <= 2**28), log(ax) + ln2."""
    t = x * x
    if sign > 0:  # asinh: ax + t / (1 + sqrt(1 + t)) = ax + sqrt(1 + t) - 1, no cancelling
        excess = ax + t / (b.call("llvm.sqrt", t + 1.0) + 1.0)
    else:  # acosh: u + sqrt(2u + u*u), u = x - 1 exact
        u = x - 1.0
        excess = u + b.call("llvm.sqrt", u * 2.0 + u * u)
    mid = ax * 2.0 + sign / (b.call("llvm.sqrt", t + sign) + ax)
    w = b.select(ax.gt(2.0), log(b, mid, f32), log1p(b, excess, f32))
    return b.select(ax.gt(2.0 ** 28), log(b, ax, f32) + LN2, w)


def asinh(b, x, f32):
    ax = fabs(x)
    w = b.select(ax.lt(2.0 ** -28), ax, _asinh_acosh(b, x, ax, f32, 1.0))
    return _nanfix(copysign(w, x), x)


def acosh(b, x, f32):
    return b.select(x.lt(1.0) | x.isnan(), math.nan, _asinh_acosh(b, x, x, f32, -1.0))


def atanh(b, x, f32):
    """0.5 log1p(2a / (1 - a)), a = |x|; below 0.5 as 2a + 2a a / (1 - a), so that
    the big term is exact; |x| = 1 gives inf, |x| > 1 nan (log1p below -1)."""
    ax = fabs(x)
    t = ax + ax
    arg = b.select(ax.lt(0.5), t + t * ax / (1.0 - ax), t / (1.0 - ax))
    w = b.select(ax.lt(2.0 ** -28), ax, log1p(b, arg, f32) * 0.5)
    return _nanfix(copysign(w, x), x)


def _log_parts(x, f32, dd=False):
    """(k, hi, lo): x = 2**k m, log(m) = hi + lo, m in [sqrt(.5), sqrt(2)), f = m - 1.

    log(m) = 2 atanh(u), u = f/(2+f), |u| < 0.172: 2u + 2u**3/3 + u**5 R(u**2), written
    f - (f*f/2 - u (f*f/2 + R')) as in fdlibm so the big term f is exact. With dd (for
    pow), u and the u**3 term are carried in double-double: ~1 ulp up to |y log x| = 709.
    """
    b = x.b
    tiny = x.lt(2.2250738585072014e-308)
    ix = b.select(tiny, x * 2.0 ** 54, x).bits() + ((0x3FF00000 - 0x3FE6A09E) << 32)
    k = i2d(ix.lshr(52) - b.select(tiny, b.const(1023 + 54, "i64"), 1023))
    m = ((ix & 0x000FFFFFFFFFFFFF) + (0x3FE6A09E << 32)).asfloat()
    f = m - 1.0
    if not dd:
        u = f / (f + 2.0)
        z = u * u
        r = z * poly(z, [2 / (2 * j + 1) for j in range(6 if f32 else 12, 0, -1)])
        hfsq = f * f * 0.5
        return k, *fast2sum(f, u * (hfsq + r) - hfsq)
    d = f + 2.0
    dl = f - (d - 2.0)
    inv = 1.0 / d
    uh = f * inv  # the double-double correction below absorbs its extra rounding
    ul = (b.fma(-uh, d, f) - uh * dl) * inv
    u2 = uh * uh
    e2 = b.fma(uh, uh, -u2)
    u3 = u2 * uh
    e3 = b.fma(u2, uh, -u3) + e2 * uh
    t_hi = u3 * (2 / 3)
    t_err = b.fma(u3, 2 / 3, -t_hi) + e3 * (2 / 3) + u3 * 3.700743415417188e-17
    tail = u3 * u2 * poly(u2, [2 / (2 * j + 1) for j in range(12, 1, -1)])
    hi, err = fast2sum(uh * 2.0, t_hi)
    return k, hi, err + (ul * 2.0 + (t_err + u2 * ul * 2.0 + tail))


def _log_dd(x, f32, dd=False):
    k, mh, ml = _log_parts(x, f32, dd)
    hi, err = fast2sum(k * LN2_HI, mh)
    return hi, err + (k * LN2_LO + ml)


def _logfix(res, x, pole=0.0):
    """-inf at the pole, nan below it and for nan, inf at inf (in a rarely taken block)."""
    b = x.b

    def fix():
        r = b.select(x.eq(pole), -math.inf, res)
        r = b.select(x.eq(math.inf), x, r)
        return b.select(x.lt(pole) | x.isnan(), math.nan, r)

    return b.rare((x.gt(pole) & x.lt(math.inf)) ^ True, res, fix)


def _log_f32(b, x, f32):
    """Native float32 log: the fdlibm form of _log_parts in float, 2u**9 truncation."""
    tiny = x.lt(1.1754943508222875e-38)
    ix = b.select(tiny, x * 2.0 ** 25, x).bits() + (0x3F800000 - 0x3F3504F3)
    k = (ix.lshr(23) - b.select(tiny, b.const(127 + 25, "i32"), 127)).cast("sitofp", "float")
    f = ((ix & 0x007FFFFF) + 0x3F3504F3).asfloat() - 1.0
    u = f / (f + 2.0)
    z = u * u
    hfsq = f * f * 0.5
    lm = f - (hfsq - u * (hfsq + z * poly(z, [2 / 9, 2 / 7, 2 / 5, 2 / 3])))
    return _logfix(k * LN2_F16[0] + (lm + k * LN2_F16[1]), x)


def log(b, x, f32):
    hi, lo = _log_dd(x, f32)
    return _logfix(hi + lo, x)


def _log_base(x, f32, c, kc):
    """log(x) * (c[0] + c[1]) with k * (kc[0] + kc[1]) added exactly first (log2, log10)."""
    b = x.b
    k, mh, ml = _log_parts(x, f32)
    p = mh * c[0]
    pe = b.fma(mh, c[0], -p) + (mh * c[1] + ml * c[0])
    hi, err = fast2sum(k * kc[0], p)
    return _logfix(hi + (err + pe + k * kc[1]), x)


def log2(b, x, f32): return _log_base(x, f32, INVLN2, (1.0, 0.0))
def log10(b, x, f32): return _log_base(x, f32, INVLN10, LOG10_2)


def log1p(b, x, f32):
    u = x + 1.0
    c = b.select(u.ge(2.0), 1.0 - (u - x), x - (u - 1.0)) / u
    k, mh, ml = _log_parts(u, f32)
    hi, err = fast2sum(k * LN2_HI, mh)
    res = hi + (err + k * LN2_LO + ml + c)
    return b.select(fabs(x).lt(2.0 ** -60), x, _logfix(res, x, -1.0))


def pow(b, x, y, f32):
    ax, ay = fabs(x), fabs(y)
    hi, lo = _log_dd(ax, f32, not f32)
    ph = y * hi
    pl = b.fma(y, hi, -ph) + y * lo
    mag = _exp(ph, f32, b.select(fabs(ph).lt(1000.0), pl, 0.0))
    common = x.gt(0.0) & x.lt(math.inf) & ay.lt(math.inf)  # x = 1 and y = 0 give 1 there
    return b.rare(common ^ True, mag, lambda: _pow_special(x, y, ax, ay, mag))


def _pow_special(x, y, ax, ay, mag):
    """C99/NumPy pow for zeros, infinities, nans and negative bases."""
    b = x.b
    ylt0 = y.lt(0.0)
    mag = b.select(ax.eq(0.0), b.select(ylt0, math.inf, 0.0), mag)
    mag = b.select(ax.eq(math.inf), b.select(ylt0, 0.0, math.inf), mag)
    inf_y = b.select(ax.eq(1.0), 1.0, b.select(ax.lt(1.0) ^ ylt0, 0.0, math.inf))
    mag = b.select(ay.eq(math.inf), inf_y, mag)
    yint = b.call("llvm.trunc", y).eq(y)
    yh = y * 0.5
    odd = yint & b.call("llvm.trunc", yh).ne(yh)
    res = b.select(signbit(x) & odd, -mag, mag)
    res = b.select(x.lt(0.0) & ax.ne(math.inf) & (yint ^ True), math.nan, res)
    res = b.select(x.isnan() | y.isnan(), math.nan, res)
    return b.select(y.eq(0.0) | x.eq(1.0), 1.0, res)


def _trig(b, x, f32, which):
    """sin/cos/tan: x = n pi/2 + r by a three-part Cody-Waite with fma (the first step is
    exact), Taylor polynomials on |r| <= pi/4, quadrant from n; nan, inf and |x| > 1e9
    (2**18 in native float32) go to libm. (One polynomial after reducing by pi instead
    was 30% faster but 2.9 ulp: near |r| = pi/2, r + r**3 S(r**2) cancels to ~1.)"""
    native32 = x.ty == "float"
    pio2 = PIO2_F if native32 else PIO2
    ax = fabs(x)
    ok = ax.le(SIN_BIG_F if native32 else SIN_BIG)
    xr = b.select(ok, x, 0.0)
    n = b.call("llvm.rint", xr * 0.6366197723675814)
    r = b.fma(-n, pio2[2], b.fma(-n, pio2[1], b.fma(-n, pio2[0], xr)))
    q = (n + (MAGIC_F if native32 else MAGIC)).bits() + (1 if which == "cos" else 0)
    z = r * r
    s = b.fma(r * z, poly(z, taylor(3, 9 if f32 else 17, 2, -1)), r)
    hz = z * 0.5
    w = 1.0 - hz
    c = w + (((1.0 - w) - hz) + z * z * poly(z, taylor(4, 10 if f32 else 16, 2)))
    odd = (q & 1).ne(0)
    if which == "tan":
        res = b.select(odd, -c, s) / b.select(odd, s, c)
    else:
        res = b.select(odd, c, s)
        res = b.select((q & 2).ne(0), -res, res)
    if which != "cos":
        res = b.select(x.eq(0.0), x, res)
    return b.fallback(ok ^ True, res, which + "f" * native32, [x])


def sin(b, x, f32): return _trig(b, x, f32, "sin")
def cos(b, x, f32): return _trig(b, x, f32, "cos")
def tan(b, x, f32): return _trig(b, x, f32, "tan")


def atan2(b, y, x, f32):
    """atan(a/c), a = min(|x|,|y|), c = max, with one division: a/c if a/c <= tan(pi/8)
    else pi/4 + atan((a-c)/(a+c)); then k pi/4 +- p for the octant (k pi/4 exact)."""
    ax, ay = fabs(x), fabs(y)
    a, c = b.call("llvm.minnum", ax, ay), b.call("llvm.maxnum", ax, ay)
    big = c.gt(2.0 ** 1000)
    a, c = b.select(big, a * 2.0 ** -200, a), b.select(big, c * 2.0 ** -200, c)
    infs = a.eq(math.inf)  # atan2(+-inf, +-inf): an odd multiple of pi/4
    mid = a.gt(c * 0.41421356237309503) | infs
    num = b.select(infs, 0.0, b.select(mid, a - c, a))
    den = b.select(infs | c.eq(0.0), 1.0, b.select(mid, a + c, c))
    t = num / den
    z = t * t
    p = b.fma(t * z, poly(z, ATAN_Q32 if f32 else ATAN_Q64), t)
    k = b.select(mid, 1.0, 0.0)
    swap = ay.gt(ax)
    k, p = b.select(swap, 2.0 - k, k), b.select(swap, -p, p)
    neg = signbit(x)
    k, p = b.select(neg, 4.0 - k, k), b.select(neg, -p, p)
    res = copysign(k * PIO4_HI + (p + k * PIO4_LO), y)
    return b.select(x.isnan() | y.isnan(), x + y, res)


def atan(b, x, f32): return atan2(b, x, b.const(1.0), f32)


def _cos_of_asin(b, x):
    """sqrt(1 - x*x), with x*x exact by fma (1 - x2 is exact where it cancels)."""
    x2 = x * x
    return b.call("llvm.sqrt", (1.0 - x2) - b.fma(x, x, -x2))


def asin(b, x, f32): return atan2(b, x, _cos_of_asin(b, x), f32)
def acos(b, x, f32): return atan2(b, _cos_of_asin(b, x), x, f32)


def _erfc_tail(ax, f32, for_erf=False):
    """erfc(ax) for ax >= 0.5: exp(-ax**2) H(t) t, t = 1/ax, H piecewise polynomial."""
    b = ax.b
    t = 1.0 / ax
    if for_erf:
        segs, cuts, mids = (ERF_H32 if f32 else ERF_H64), [0.5], [1 / 3, 0.75]
    else:
        segs, cuts = (ERFC_H32 if f32 else ERFC_H64), [0.25, 0.5, 1.0]
        mids = [0.125, 0.375, 0.75, 1.5]
    sel = [t.gt(c) for c in cuts]

    def pick(values):
        c = b.const(values[0])
        for i in range(1, len(values)):
            c = b.select(sel[i - 1], values[i], c)
        return c

    ts = t - pick(mids)  # each piece is fitted around its middle
    h = poly(ts, [pick([seg[j] for seg in segs]) for j in range(len(segs[0]))])
    x2 = ax * ax
    x2l = b.fma(ax, ax, -x2)
    return _exp(-x2, f32, b.select(x2.lt(1000.0), -x2l, 0.0), h * t)


def _erf_small(x, f32):
    """x P(x**2) as fma(x, P(0), x z Q(z)): the big term is rounded once."""
    p = ERF_P32 if f32 else ERF_P64
    z = x * x
    return copysign(x.b.fma(x, p[-1], x * z * poly(z, p[:-1])), x)  # keeps erf(-0) = -0


def erf(b, x, f32):
    ax = fabs(x)
    # erf(6) rounds to 1; the clamp keeps t inside the fitted [1/6, 1]
    big = copysign(1.0 - _erfc_tail(b.call("llvm.minnum", ax, b.const(6.0)), f32, True), x)
    return _nanfix(b.select(ax.lt(1.0), _erf_small(x, f32), big), x)


def erfc(b, x, f32):
    e = _erfc_tail(fabs(x), f32)
    big = b.select(x.lt(0.0), 2.0 - e, e)
    return _nanfix(b.select(fabs(x).lt(0.5), 1.0 - _erf_small(x, f32), big), x)


def cbrt(b, x, f32):
    """Bit-trick first guess (exponent / 3), Newton steps, a double-double last step."""
    ax = fabs(x)
    tiny = ax.lt(2.0 ** -1022)
    a = b.select(tiny, ax * 2.0 ** 54, ax)
    hi = a.bits().lshr(32).cast("trunc", "i32").cast("sitofp", "double") * (1 / 3)
    y = ((hi.cast("fptosi", "i32") + 0x2A9F7893).cast("zext", "i64") << 32).asfloat()
    for _ in range(3 if f32 else 4):
        y = (y * 2.0 + a / (y * y)) * (1 / 3)
    y2 = y * y
    y3 = y2 * y
    e3 = b.fma(y2, y, -y3) + b.fma(y, y, -y2) * y
    y = y + ((a - y3) - e3) / (y2 * 3.0)
    res = copysign(b.select(tiny, y * 2.0 ** -18, y), x)
    return _nanfix(b.select(ax.eq(0.0) | ax.eq(math.inf), x, res), x)


def hypot(b, x, y, f32):
    """sqrt(a**2 + c**2) with the squares in double-double, scaled, one Newton fix-up."""
    ax, ay = fabs(x), fabs(y)
    a, c = b.call("llvm.maxnum", ax, ay), b.call("llvm.minnum", ax, ay)
    big, small = a.gt(2.0 ** 500), a.lt(2.0 ** -500)
    sc = b.select(big, 2.0 ** -600, b.select(small, 2.0 ** 600, 1.0))
    a, c = a * sc, c * sc
    a2, c2 = a * a, c * c
    s, se = fast2sum(a2, c2)
    lo = se + b.fma(a, a, -a2) + b.fma(c, c, -c2)
    h = b.call("llvm.sqrt", s)
    h = h + (b.fma(-h, h, s) + lo) / (h * 2.0)
    res = b.select(a.eq(0.0), 0.0, h / sc)
    res = b.select(x.isnan() | y.isnan(), math.nan, res)
    return b.select(isinf(x) | isinf(y), math.inf, res)


def fmod(b, x, y, f32):
    """x - trunc(x/y) y with the product inside an fma: exact while |x/y| < 2**52 (the
    quotient is then off by at most one, fixed up); larger quotients go to libm."""
    ax, ay = fabs(x), fabs(y)
    q = b.call("llvm.trunc", ax / ay)
    r = b.fma(-q, ay, ax)
    r = b.select(r.lt(0.0), r + ay, r)
    r = b.select(r.ge(ay), r - ay, r)
    res = b.select(ay.eq(math.inf), x, copysign(r, x))
    res = b.select(ay.eq(0.0) | ax.eq(math.inf) | x.isnan() | y.isnan(), math.nan, res)
    return b.fallback(ax.gt(ay * 2.0 ** 52) & ax.ne(math.inf), res, "fmod", [x, y])


_IMPL = {f.__name__: f for f in (exp, exp2, expm1, sinh, cosh, tanh, log, log2, log10, log1p,
                                 pow, sin, cos, tan, atan2, atan, asin, acos, erf, erfc,
                                 cbrt, hypot, fmod, asinh, acosh, atanh)}
#: name -> number of arguments (each algorithm's, after `b`; before `f32`); every name
#: has a libm counterpart (name + "f" for float32)
_ARITY = {name: f.__code__.co_argcount - 2 for name, f in _IMPL.items()}
SUPPORTED: frozenset[str] = frozenset(_IMPL)
#: computed in float on float32 vectors (the shared helpers look at the vector's type);
#: tan stays in double: s/c in float costs 3 ulp
_NATIVE32 = {"exp": exp, "log": _log_f32, "sin": sin, "cos": cos}


@functools.cache
def llvm_ir(name: str, dtype: str, width: int) -> tuple[str, str]:
    """Return `(symbol, module_text)` defining `name` on `<width x dtype>` vectors."""
    if name not in SUPPORTED:
        raise KeyError(f"vecmath has no function {name!r}")
    ft = _FT[dtype]
    load_runtime()
    b = Builder(ft, width)
    args = [Vec(b, f"%a{i}", ft) for i in range(_ARITY[name])]
    if ft == "float" and name in _NATIVE32:
        res = _NATIVE32[name](b, *args, True)
    else:
        wide = [a.cast("fpext", "double") for a in args] if ft == "float" else args
        b.ft = "double"  # constants now default to double
        res = _IMPL[name](b, *wide, ft == "float")
        if ft == "float":
            res = res.cast("fptrunc", "float")
    return define(b, f"hydra_vm_{name}_{'f32' if ft == 'float' else 'f64'}x{width}", args, res)
