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
>= 2**52. `load_runtime()` makes libm's symbols visible to llvmlite's JIT (llvmlite does
not search the process by default); `llvm_ir` calls it.

Layout: the algorithms (one function per name, table `_IMPL`, built with `vecbuild`'s
`Builder` and `Vec`: Python operators emit LLVM instructions) and `llvm_ir`.  The JIT'd
array driver the tests use and the benchmark against libm and libmvec live in
`bench/vecmath.py` (`python -m bench.vecmath [names]`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math

import llvmlite.binding as llvm

from ..machinecode.engine import init_llvm
from .vecbuild import (MAGIC, MAGIC_F, Builder, Vec, clamp, copysign, fabs, fast2sum, i2d,
                       isinf, poly, pow2, scale, signbit, taylor)

# name -> number of arguments; every name has a libm counterpart (name + "f" for float32).
_ARITY = {
    "exp": 1, "log": 1, "sin": 1, "cos": 1, "tan": 1, "atan2": 2, "pow": 2, "erf": 1,
    "erfc": 1, "exp2": 1, "log2": 1, "log10": 1, "expm1": 1, "log1p": 1, "asin": 1,
    "acos": 1, "atan": 1, "sinh": 1, "cosh": 1, "tanh": 1, "cbrt": 1, "hypot": 2,
    "fmod": 2, "asinh": 1, "acosh": 1, "atanh": 1,
}
SUPPORTED: frozenset[str] = frozenset(_ARITY)

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


@functools.cache
def load_runtime() -> None:
    """Load libm so the JIT resolves its symbols (the rare-lane fallbacks call it)."""
    init_llvm()
    llvm.load_library_permanently(ctypes.util.find_library("m") or "libm.so.6")


# ---------------------------------------------------------------------------------
# Algorithms. Each in _IMPL takes double vectors (float32 arguments are widened, so
# range reduction and rounding error stay far below a float ulp) and `f32`, which picks
# shorter polynomials when the result will be rounded to float32; _NATIVE32 computes
# exp, log, sin, cos in float (the shared helpers look at the vector's type).
# Polynomial coefficients are listed highest degree first. Taylor series where they
# converge fast; elsewhere Chebyshev fits computed with mpmath.chebyfit (50 digits):
# atan: (atan(sqrt z) - sqrt z) / z**1.5 on [0, tan(pi/8)**2]; erf: erf(x)/x in x**2 on
# [0, 1]; erfc: x erfc(x) exp(x**2) in t = 1/x on [0, .25], [.25, .5], [.5, 1], [1, 2],
# each in t - (middle of its piece); the same for erf (which needs only absolute
# accuracy there, so fewer terms) on [1/6, .5], [.5, 1].
_ATAN_Q64 = [
    -0.01917688711906226, 0.03923165829558719, -0.0508544973794026, 0.0585814891280221,
    -0.06664511447381948, 0.07692183190826087, -0.09090904578123903, 0.11111111015256361,
    -0.14285714284666542, 0.1999999999999552, -0.3333333333333333,
]
_ATAN_Q32 = [
    0.050481385120797445, -0.08624676145249494, 0.11071365021884794, -0.14284151193628614,
    0.19999977258688387, -0.333333332792548,
]
_ERF_P64 = [
    -7.795898827002142e-10, 1.3720064546777686e-08, -1.6208483801871705e-07,
    1.6447424703317362e-06, -1.492473690741966e-05, 0.00012055294904839707, -0.0008548325975389692,
    0.0052239776071164225, -0.02686617064323777, 0.11283791670945006, -0.37612638903183543,
    1.1283791670955126,
]
_ERF_P32 = [
    -9.667044571486996e-06, 0.00011265959025606609, -0.0008484080405535107, 0.005221031807858023,
    -0.026865430727670243, 0.11283782495236845, -0.3761263846802871, 1.1283791670615435,
]
_ERFC_H64 = [
    [-5019.833916386822, 1218.746319094701, 756.9579249089564, -440.64074002931113,
     17.653050914262444, 74.9712088665612, -31.96320211021684, -3.7507716878457567,
     8.807653834656346, -2.4991635639972816, -1.4157021539601473, 1.3150929499597734,
     -0.05036415615046152, -0.48903640825413364, 0.22738055057931875, 0.1757515400420844,
     -0.24594346562627237, -0.06739860157050143, 0.5598813296070474],
    [-9.352094583089702, 0.6950357482269871, 3.957765953988684, -3.703030166754961,
     2.0381592412585086, -0.4262249975849692, -0.5348718533293658, 0.7810577144455758,
     -0.5550809758310852, 0.1702847364139219, 0.13611580543670107, -0.25568449620863865,
     0.19624233325376422, -0.037808075518363356, -0.116281926915381, 0.17726803412603162,
     -0.09203998771159042, -0.1515855295741559, 0.530860349316975],
    [-0.004979566847164364, 0.008511955575503476, -0.00915547159608212, 0.008131369780628775,
     -0.005205044014682195, 0.0003742892856856971, 0.005639680087307556, -0.011588248910783033,
     0.015771747736036804, -0.016227454746723567, 0.011128915088945559, 0.0005608110255211365,
     -0.018116937854317592, 0.03768872001146378, -0.050465735252150604, 0.040293199742531254,
     0.01934787262869018, -0.16908097778547482, 0.46817959203854037],
    [7.343789842831182e-07, -1.5469077369386098e-06, 2.1001508282365934e-06,
     -3.3825456726344564e-06, 5.125490500443794e-06, -5.6320422643848516e-06,
     1.4804377388763347e-06, 1.5647927875714964e-05, -6.387404410449392e-05, 0.0001778161575761965,
     -0.0004147425322285611, 0.0008465768328512575, -0.0014927625233907005, 0.00206370318901489,
     -0.0011647369991920615, -0.005933200786440649, 0.033156950954030935, -0.11839802134553727,
     0.35952293862040013],
]
_ERFC_H32 = [
    [-1.1319107698242752, 1.2252379629123749, -0.053595465224285245, -0.48797783664297234,
     0.22739440049136067, 0.1757469367350201, -0.2459434817810031, -0.06739859617241989,
     0.5598813296070474],
    [0.11619479834664061, -0.24906237014471228, 0.19647722203945825, -0.03788800844744492,
     -0.1162829490244581, 0.177268385385203, -0.09203998651267647, -0.15158552998766148,
     0.530860349316975],
    [0.013415034631655406, -0.0018729054297422843, -0.018225061426297283, 0.03780502977355441,
     -0.05046385111025249, 0.04029116389796547, 0.019347863784750775, -0.16908096821373814,
     0.46817959203854037],
    [-0.000449973551028167, 0.0009494506197271118, -0.0014862092419565937, 0.0020442595258435385,
     -0.0011651903469807683, -0.005931846126535882, 0.03315695944179951, -0.11839804677544254,
     0.35952293862040013],
]
_ERF_H64 = [
    [-3.9055020306055037, 4.888240614250362, -2.5226137985197723, 0.17226400879233422,
     0.9219272184259424, -0.9581638909724762, 0.48309537057298746, 0.018884051250474414,
     -0.28477053349362974, 0.27599994374070075, -0.09665767437852878, -0.10262206212061609,
     0.19568021007956413, -0.11537284741590684, -0.14295934043884223, 0.5370034535441699],
    [0.010259384173708948, -0.007678713972961919, 0.0001581570285569124, 0.00589706811289269,
     -0.011576818227021732, 0.015757978082473825, -0.016227789665166522, 0.011129321121083587,
     0.0005608163549034182, -0.018116944339171766, 0.0376887199698081, -0.05046573520136991,
     0.0402931997426554, 0.01934787262853887, -0.16908097778547487, 0.4681795920385405],
]
_ERF_H32 = [
    [0.2753167733450921, -0.10964162673107773, -0.10260593858643871, 0.195856887198198,
     -0.11537291106441525, -0.1429599496402226, 0.5370034535441699],
    [-0.016761851385002982, 0.03760462345753168, -0.05050938639952684, 0.04029721901564966,
     0.019348217061764837, -0.16908101283403948, 0.46817959203854037],
]
_PIO2 = (1.5707963267948966, 6.123233995736766e-17, -1.4973849048591698e-33)
_PIO4_HI, _PIO4_LO = 0.7853981633974492, -8.575622497214414e-16  # hi has 48 bits
_LN2_HI, _LN2_LO = 0.6931471806019545, -4.2009150726810846e-11  # hi has 32 bits
_LN2, _LN2_TAIL = 0.6931471805599453, 2.3190468138462996e-17
_INVLN2 = (1.4426950408889634, 2.0355273740931033e-17)
_INVLN10 = (0.4342944819032518, 1.098319650216765e-17)
_LOG10_2 = (0.3010299956658855, -1.9043128467164274e-12)  # hi has 32 bits
_SIN_BIG = 1e9  # beyond: libm's exact reduction (rare lanes, behind a branch)
# Native float32 (exp, log, sin, cos compute in float, twice the lanes per register).
_PIO2_F = (1.5707963705062866, -4.371138828673793e-08, -1.7151245100058819e-15)
_LN2_F = (0.6931471824645996, -1.9046542121259336e-09)  # for Cody-Waite with fma
_LN2_F16 = (0.693145751953125, 1.428606765330187e-06)  # hi has 16 bits: k * hi is exact
_SIN_BIG_F = 262144.0  # 2**18: r1 = x - n*p1 stays exact; beyond, libm's sinf & co


def _exp_reduce(x, lo, xmin, xmax):
    """x = n ln2 + r with |r| <= ln2/2 (Cody-Waite with fma; r1 is exact)."""
    b = x.b
    xc = clamp(x, xmin, xmax)
    n = b.call("llvm.rint", xc * _INVLN2[0])
    ln2 = _LN2_F if x.ty == "float" else (_LN2_HI, _LN2_LO)
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


def _nanfix(res, *xs):
    for x in xs:
        res = x.b.select(x.isnan(), x, res)
    return res


def exp(b, x, f32):
    return _nanfix(_exp(x, f32), x)


def exp2(b, x, f32):
    xc = clamp(x, -1100.0, 1100.0)
    n = b.call("llvm.rint", xc)
    f = xc - n
    rh = f * _LN2
    rl = b.fma(f, _LN2, -rh) + f * _LN2_TAIL
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
    return b.select(ax.gt(2.0 ** 28), log(b, ax, f32) + _LN2, w)


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
    hi, err = fast2sum(k * _LN2_HI, mh)
    return hi, err + (k * _LN2_LO + ml)


def _logfix(res, x, pole=0.0):
    """-inf at the pole, nan below it and for nan, inf at inf (in a rarely taken block)."""
    b = x.b

    def fix():
        r = b.select(x.eq(pole), -math.inf, res)
        r = b.select(x.eq(math.inf), x, r)
        return b.select(x.lt(pole) | x.isnan(), math.nan, r)

    return b.rare((x.gt(pole) & x.lt(math.inf)) ^ True, res, fix)


def _log_f32(b, x):
    """Native float32 log: the fdlibm form of _log_parts in float, 2u**9 truncation."""
    tiny = x.lt(1.1754943508222875e-38)
    ix = b.select(tiny, x * 2.0 ** 25, x).bits() + (0x3F800000 - 0x3F3504F3)
    k = (ix.lshr(23) - b.select(tiny, b.const(127 + 25, "i32"), 127)).cast("sitofp", "float")
    f = ((ix & 0x007FFFFF) + 0x3F3504F3).asfloat() - 1.0
    u = f / (f + 2.0)
    z = u * u
    hfsq = f * f * 0.5
    lm = f - (hfsq - u * (hfsq + z * poly(z, [2 / 9, 2 / 7, 2 / 5, 2 / 3])))
    return _logfix(k * _LN2_F16[0] + (lm + k * _LN2_F16[1]), x)


_NATIVE32 = {
    "exp": lambda b, x: _nanfix(_exp(x, True), x), "log": _log_f32,
    "sin": lambda b, x: _trig(b, x, True, "sin"), "cos": lambda b, x: _trig(b, x, True, "cos"),
}  # tan stays in double: s/c in float costs 3 ulp


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


def log2(b, x, f32):
    return _log_base(x, f32, _INVLN2, (1.0, 0.0))


def log10(b, x, f32):
    return _log_base(x, f32, _INVLN10, _LOG10_2)


def log1p(b, x, f32):
    u = x + 1.0
    c = b.select(u.ge(2.0), 1.0 - (u - x), x - (u - 1.0)) / u
    k, mh, ml = _log_parts(u, f32)
    hi, err = fast2sum(k * _LN2_HI, mh)
    res = hi + (err + k * _LN2_LO + ml + c)
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
    pio2 = _PIO2_F if native32 else _PIO2
    ax = fabs(x)
    ok = ax.le(_SIN_BIG_F if native32 else _SIN_BIG)
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


def _atan2(y, x, f32):
    """atan(a/c), a = min(|x|,|y|), c = max, with one division: a/c if a/c <= tan(pi/8)
    else pi/4 + atan((a-c)/(a+c)); then k pi/4 +- p for the octant (k pi/4 exact)."""
    b = y.b
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
    p = b.fma(t * z, poly(z, _ATAN_Q32 if f32 else _ATAN_Q64), t)
    k = b.select(mid, 1.0, 0.0)
    swap = ay.gt(ax)
    k, p = b.select(swap, 2.0 - k, k), b.select(swap, -p, p)
    neg = signbit(x)
    k, p = b.select(neg, 4.0 - k, k), b.select(neg, -p, p)
    res = copysign(k * _PIO4_HI + (p + k * _PIO4_LO), y)
    return b.select(x.isnan() | y.isnan(), x + y, res)


def atan2(b, y, x, f32): return _atan2(y, x, f32)
def atan(b, x, f32): return _atan2(x, b.const(1.0), f32)


def _cos_of_asin(b, x):
    """sqrt(1 - x*x), with x*x exact by fma (1 - x2 is exact where it cancels)."""
    x2 = x * x
    return b.call("llvm.sqrt", (1.0 - x2) - b.fma(x, x, -x2))


def asin(b, x, f32): return _atan2(x, _cos_of_asin(b, x), f32)
def acos(b, x, f32): return _atan2(_cos_of_asin(b, x), x, f32)


def _erfc_tail(ax, f32, for_erf=False):
    """erfc(ax) for ax >= 0.5: exp(-ax**2) H(t) t, t = 1/ax, H piecewise polynomial."""
    b = ax.b
    t = 1.0 / ax
    if for_erf:
        segs, cuts, mids = (_ERF_H32 if f32 else _ERF_H64), [0.5], [1 / 3, 0.75]
    else:
        segs, cuts = (_ERFC_H32 if f32 else _ERFC_H64), [0.25, 0.5, 1.0]
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
    p = _ERF_P32 if f32 else _ERF_P64
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


def llvm_ir(name: str, dtype: str, width: int) -> tuple[str, str]:
    """Return `(symbol, module_text)` defining `name` on `<width x dtype>` vectors."""
    return _module(name, dtype, width)


@functools.cache
def _module(name: str, dtype: str, width: int) -> tuple[str, str]:
    """`llvm_ir`, cached."""
    if name not in SUPPORTED:
        raise KeyError(f"vecmath has no function {name!r}")
    ft = _FT[dtype]
    load_runtime()
    b = Builder(ft, width)
    args = [Vec(b, f"%a{i}", ft) for i in range(_ARITY[name])]
    if ft == "float" and name in _NATIVE32:
        res = _NATIVE32[name](b, *args)
    else:
        wide = [a.cast("fpext", "double") for a in args] if ft == "float" else args
        b.ft = "double"  # constants now default to double
        res = _IMPL[name](b, *wide, ft == "float")
        if ft == "float":
            res = res.cast("fptrunc", "float")
    return define(b, f"hydra_vm_{name}_{'f32' if ft == 'float' else 'f64'}x{width}", args, res)


def define(b: Builder, sym: str, args: list[Vec], res: Vec) -> tuple[str, str]:
    """`(sym, module text)` of the function `res(args)` that `b` built, inlinable and
    mergeable across modules."""
    vt = b.vt(args[0].ty)
    params = ", ".join(f"{vt} {a.ref}" for a in args)
    text = "\n".join([
        *sorted(b.decls),
        f"define linkonce_odr {vt} @{sym}({params}) #0 {{",
        "entry:",
        *b.lines,
        f"  ret {vt} {res.ref}",
        "}",
        "attributes #0 = { alwaysinline nounwind }",
        "",
    ])
    return sym, text
