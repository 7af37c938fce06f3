"""Device functions the generated kernels call (as ``dev.NAME``).

Each is written once so that it computes NumPy's result for one lane on both
targets: compiled by numba for a GPU, where ``math.*`` goes to libdevice and never
raises, and run as Python by the CUDA simulator, where ``math.*`` raises on a
domain error (``math.sqrt(-1)``, ``math.exp(1000)``) and ``math.floor`` returns an
``int``.  So every function handles its special values itself before calling
``math``.  NumPy ufuncs that numba-cuda implements (``np.sin``, ``np.log``, ...)
need no helper; those it lacks in device code (``np.sqrt``, ``np.exp``,
``np.floor``, ...) are here.  Callers wrap the result in the lane type.

On the simulator the "device" is NumPy itself: there the math helpers are NumPy's
own ufuncs, which give the reference's results bit for bit (float32 included,
where NumPy's float32 ``exp`` differs from a rounded double ``exp`` in the last
bit).  ``tests/test_cuda_device.py`` checks the GPU helpers against NumPy as plain
Python functions.
"""

import math
import operator
import types

import numpy as np
from numba import config, cuda

#: beyond this, exp overflows float64
_EXP_MAX = 709.782712893384
_UP, _DOWN, _CBRT_UP, _CBRT_DOWN = 2.0 ** 900, 2.0 ** -900, 2.0 ** 300, 2.0 ** -300


@cuda.jit(device=True)
def ipow(a, b, one):
    """Integer power by squaring; wraps like NumPy; a negative exponent gives 1
    (the reference clamps it to 0)."""
    r = one
    base = a
    e = b
    while e > 0:
        if e & 1:
            r = r * base
        base = base * base
        e = e >> 1
    return r


@cuda.jit(device=True)
def sqrt(x):
    if x >= 0:
        return math.sqrt(x)
    return math.nan


def _overflowing(f):
    """math's ``exp`` or ``expm1`` (``f``), infinite where the result overflows."""
    @cuda.jit(device=True)
    def overflowing(x):
        if x > _EXP_MAX:
            return math.inf
        return f(x)
    return overflowing


exp, expm1 = _overflowing(math.exp), _overflowing(math.expm1)


@cuda.jit(device=True)
def exp2(x):
    if x >= 1024.0:
        return math.inf
    return 2.0 ** x


@cuda.jit(device=True)
def log1p(x):
    if x > -1.0:
        return math.log1p(x)
    if x == -1.0:
        return -math.inf
    return math.nan


@cuda.jit(device=True)
def fmod(x, y):
    if y == 0 or math.isinf(x) or x != x or y != y:
        return math.nan
    return math.fmod(x, y)


@cuda.jit(device=True)
def _signed_zero(r, x):
    # NumPy keeps the sign of x on a zero result: floor(-0.0), ceil(-0.5) are -0.0
    if r == 0:
        return math.copysign(0.0, x)
    return r


#: from 2**52 up every float is an integer (float32's from 2**23): and math.floor of one
#: past 2**63 is an int64 on the device, which overflows
_INTEGRAL = 4503599627370496.0


def _integral(f):
    """NumPy's floor, ceil or trunc by math's (``f``): a float, its sign kept on zero."""
    @cuda.jit(device=True)
    def integral(x):
        if not math.isfinite(x) or abs(x) >= _INTEGRAL:
            return x
        return _signed_zero(float(f(x)), x)
    return integral


floor, ceil, trunc = _integral(math.floor), _integral(math.ceil), _integral(math.trunc)


@cuda.jit(device=True)
def rint(x):
    """Round half to even, as ``np.rint``."""
    if not math.isfinite(x):
        return x
    r = float(math.floor(x))
    d = x - r
    if d > 0.5 or (d == 0.5 and r % 2.0 != 0.0):
        r += 1.0
    return _signed_zero(r, x)


@cuda.jit(device=True)
def cbrt(x):
    if x == 0 or not math.isfinite(x):
        return x
    a = abs(x)
    scale = 1.0
    # keep y * y * y in range: scale by 2 ** +-900 (exact), take 2 ** -+300 back out
    if a < 1e-270:
        a = a * _UP
        scale = _CBRT_DOWN
    elif a > 1e270:
        a = a * _DOWN
        scale = _CBRT_UP
    y = a ** (1.0 / 3.0)
    y = y - (y * y * y - a) / (3.0 * y * y)  # one Newton step: exact cubes come out exact
    return math.copysign(y * scale, x)


def _python(f):
    """Device function ``f`` as a plain Python function, the device functions it calls
    plain too (on a GPU a compiled device function cannot be called from the host)."""
    fn = getattr(f, "py_func", None) or getattr(f, "fn", f)
    plain = {k: getattr(v, "py_func", None) or getattr(v, "fn", v)
             for k, v in fn.__globals__.items() if hasattr(v, "py_func")}
    return types.FunctionType(fn.__code__, {**fn.__globals__, **plain}, fn.__name__,
                              fn.__defaults__, fn.__closure__)


#: the math helpers above, each named as the NumPy ufunc it computes
MATH = ("sqrt", "exp", "expm1", "exp2", "log1p", "fmod", "floor", "ceil", "trunc", "rint", "cbrt")
#: the helpers as plain Python functions (what the simulator would run)
PYTHON = {name: _python(globals()[name]) for name in MATH}

# Float +, - and * each rounded on its own, for kernels compiled without fastmath
# (``emit.Frame.contract``): NVVM fuses a product and a sum into one FMA by default
# (-fma=1, fastmath or not), which a GPU run showed changes results (a Mandelbrot count,
# 0.0625 computed as 0.06249999999999999); add.rn / mul.rn are never fused.
if config.ENABLE_CUDASIM:
    globals().update({name: getattr(np, name) for name in MATH})
    add_rn64 = add_rn32 = operator.add
    sub_rn64 = sub_rn32 = operator.sub
    mul_rn64 = mul_rn32 = operator.mul
else:
    from numba.cuda import libdevice

    @cuda.jit(device=True)
    def add_rn64(a, b):
        return libdevice.dadd_rn(a, b)

    @cuda.jit(device=True)
    def sub_rn64(a, b):
        return libdevice.dadd_rn(a, -b)  # IEEE defines a - b as a + (-b): exact

    @cuda.jit(device=True)
    def mul_rn64(a, b):
        return libdevice.dmul_rn(a, b)

    @cuda.jit(device=True)
    def add_rn32(a, b):
        return libdevice.fadd_rn(a, b)

    @cuda.jit(device=True)
    def sub_rn32(a, b):
        return libdevice.fsub_rn(a, b)

    @cuda.jit(device=True)
    def mul_rn32(a, b):
        return libdevice.fmul_rn(a, b)
