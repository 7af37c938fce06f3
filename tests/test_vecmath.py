"""Vector math (hydra/backends/cpu/vecmath.py) against NumPy, in ulp, plus special values.

float32 results are measured against NumPy's float64 result rounded once to float32
(the correctly rounded value, in practice), not against NumPy's float32 functions:
those differ by machine (on AVX-512 CPUs NumPy dispatches SVML code that is itself up
to 3 ulp from the correctly rounded float32), and the accuracy claim must not."""

import math

import numpy as np
import pytest

from hydra.backends.cpu import vecmath as vm
from bench.vecmath import ULP_LIBMVEC, array_function, libmvec_ir

NUMPY_NAME = {"atan2": "arctan2", "pow": "power", "asin": "arcsin", "acos": "arccos",
              "atan": "arctan", "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh"}
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 1e-310,
            -1e-310, 1e-40, -1e-40, 1e300, -1e300, 1e30, -1e30, 3.0, 10.0, 88.7, 89.0,
            709.8, 710.0, -745.2, -746.0, -104.0, -88.0, 1e5, 1e6, 1e22, np.pi, np.pi / 2]

# Per function: intervals (lo, hi) sampled uniformly, besides the log-spaced whole range.
DOMAINS = {
    "exp": [(-750, 720), (-110, 95), (-1, 1)], "exp2": [(-1100, 1030), (-160, 130)],
    "expm1": [(-40, 720), (-1, 1), (-1e-5, 1e-5)], "log": [(0, 4), (0.5, 2)],
    "log2": [(0, 4)], "log10": [(0, 4)], "log1p": [(-1, 4), (-1e-4, 1e-4)],
    "sin": [(-10, 10), (-1e5, 1e5), (-1e9, 1e9)], "cos": [(-10, 10), (-1e5, 1e5)],
    "tan": [(-10, 10), (-1e5, 1e5)], "asin": [(-1, 1)], "acos": [(-1, 1)],
    "atan": [(-4, 4)], "sinh": [(-720, 720), (-1, 1)], "cosh": [(-720, 720)],
    "tanh": [(-25, 25), (-1, 1)], "erf": [(-7, 7), (-1, 1)], "erfc": [(-7, 30)],
    "cbrt": [(-10, 10)], "atan2": [(-10, 10)], "hypot": [(-10, 10)],
    "pow": [(0, 10), (-10, 10)], "fmod": [(-100, 100)],
    "asinh": [(-3, 3), (-1e-3, 1e-3), (-1e9, 1e9)], "acosh": [(1, 3), (1, 1.001), (0, 1e9)],
    "atanh": [(-1, 1), (-0.6, 0.6), (0.999, 1), (-1e-3, 1e-3)],
}


def reference(name, *xs):
    """NumPy's result (math.erf/erfc in float64, rounded, where NumPy has none); for
    float32, NumPy's float64 result rounded to float32."""
    dt = xs[0].dtype
    if dt == np.float32:
        with np.errstate(over="ignore"):
            return reference(name, *[x.astype(np.float64) for x in xs]).astype(dt)
    if name in ("erf", "erfc"):
        f = getattr(math, name)
        return np.array([f(float(v)) for v in xs[0]]).astype(dt)
    with np.errstate(all="ignore"):
        return getattr(np, NUMPY_NAME.get(name, name))(*xs).astype(dt)


def ulp_error(got, ref):
    """Per element |got - ref| in units of ref's ulp; inf where nan-ness or infs differ."""
    with np.errstate(all="ignore"):
        err = np.abs(got.astype(np.float64) - ref.astype(np.float64)) / np.spacing(
            np.abs(ref)).astype(np.float64)
    same = (np.isnan(got) & np.isnan(ref)) | (got == ref)
    err = np.where(same, 0.0, err)
    return np.where(np.isnan(err), np.inf, err)


def samples(name, dtype, n, seed):
    rng = np.random.default_rng(seed)
    big = 300 if dtype == "float64" else 37
    tiny = 320 if dtype == "float64" else 45
    parts = [np.sign(rng.uniform(-1, 1, n)) * 10.0 ** rng.uniform(-tiny, big, n)]
    parts += [rng.uniform(lo, hi, n) for lo, hi in DOMAINS.get(name, [])]
    return np.concatenate(parts).astype(dtype)


def check(name, dtype, width, xs, ulp, variant="inline"):
    got = array_function(name, dtype, width, variant)(*xs)
    ref = reference(name, *xs)
    err = ulp_error(got, ref)
    worst = int(np.argmax(err))
    assert err[worst] <= ulp, (f"{name} {dtype}: {err[worst]} ulp at "
                               f"{[repr(x[worst]) for x in xs]}: got {got[worst]!r}, "
                               f"want {ref[worst]!r}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(vm.SUPPORTED))
def test_against_numpy(name, dtype):
    arity = vm._ARITY[name]
    x = samples(name, dtype, 3000, 1)
    xs = [x] + [samples(name, dtype, 3000, 2)[: x.size] for _ in range(arity - 1)]
    check(name, dtype, 8, xs, vm.ULP[name])


@pytest.mark.parametrize("name", sorted(vm.SUPPORTED))
def test_float32_within_1ulp_of_correctly_rounded(name):
    """float32 results against float64 NumPy rounded once to float32."""
    xs = [samples(name, "float32", 3000, seed) for seed in range(1, vm._ARITY[name] + 1)]
    ref = reference(name, *xs)
    got = array_function(name, "float32", 8)(*xs)
    assert ulp_error(got, ref).max() <= 1


def special_samples(name, dtype):
    with np.errstate(over="ignore"):
        s = np.array(SPECIALS, dtype=dtype)
    if vm._ARITY[name] == 1:
        return [s]
    return [np.repeat(s, s.size), np.tile(s, s.size)]  # every pair of special values


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(vm.SUPPORTED))
def test_special_values(name, dtype, width=4, variant="inline", ulp=None):
    xs = special_samples(name, dtype)
    got = array_function(name, dtype, width, variant)(*xs)
    ref = reference(name, *xs)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    inf = np.isinf(ref)
    np.testing.assert_array_equal(got[inf], ref[inf])
    zero = ref == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(ref[zero]))
    check(name, dtype, width, xs, vm.ULP[name] if ulp is None else ulp, variant)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(ULP_LIBMVEC))
def test_libmvec_option(name, dtype):
    """libmvec_ir, where this machine has it: NumPy's special values, ULP_LIBMVEC."""
    if libmvec_ir(name, dtype, 8) is None:
        pytest.skip("no libmvec variant here")
    xs = [samples(name, dtype, 3000, seed) for seed in range(1, vm._ARITY[name] + 1)]
    check(name, dtype, 8, xs, ULP_LIBMVEC[name], "libmvec")
    test_special_values(name, dtype, 8, "libmvec", ULP_LIBMVEC[name])
    assert libmvec_ir(name, dtype, 4 if dtype == "float32" else 6) is None


@pytest.mark.parametrize("width", [3, 4, 16])
def test_widths(width):
    x = samples("sin", "float32", 500, 3)
    check("sin", "float32", width, [x], vm.ULP["sin"])
    x = samples("exp", "float64", 500, 4)
    check("exp", "float64", width, [x], vm.ULP["exp"])


def test_two_modules_link_same_function():
    import llvmlite.binding as llvm

    vm.load_runtime()
    sym, text = vm.llvm_ir("exp", "float64", 4)
    a, b = llvm.parse_assembly(text), llvm.parse_assembly(text)
    a.link_in(b)
    a.verify()
    assert sym in [f.name for f in a.functions]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(vm.SUPPORTED))
def test_no_libm_call_in_the_hot_path(name, dtype):
    """Scalar calls (libm) only inside the rarely taken `slow*` blocks."""
    block = "entry"
    for line in vm.llvm_ir(name, dtype, 8)[1].splitlines():
        if line.endswith(":"):
            block = line[:-1]
        elif " call " in line and "@llvm." not in line:
            assert block.startswith("slow"), line
