"""The GPU's math helpers (``hydra/backends/cuda/device.py``) run as plain Python
against NumPy: the special values (NaN, infinities, signed zeros, domain errors,
overflow) exactly, the rest exactly or within an ulp where libm and NumPy may
round differently.  On the simulator the kernels use NumPy's ufuncs instead, so
this is where these helpers are proven before a GPU runs them."""

import math

import numpy as np
import pytest

from hydra.backends import available

pytestmark = pytest.mark.skipif(not available("cuda"), reason="numba.cuda unusable here")

SPECIAL = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, -1.0, -1.5, 1e-310, 0.49999999999999994,
           4503599627370497.0, 1e300, -1e300, 709.0, 710.0, -745.5, math.inf, -math.inf,
           math.nan, 27.0, -8.0, 123.456]
EXACT = {"sqrt": np.sqrt, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc,
         "rint": np.rint}
CLOSE = {"exp": np.exp, "expm1": np.expm1, "exp2": np.exp2, "log1p": np.log1p,
         "cbrt": np.cbrt}
#: libm and NumPy may round these differently; cbrt is pow plus a Newton step
ULPS = {"exp": 1, "expm1": 1, "exp2": 1, "log1p": 1, "cbrt": 2}


def helpers():
    from hydra.backends.cuda.device import PYTHON
    return PYTHON


def check(got, want, ulps):
    if math.isnan(want):
        assert math.isnan(got)
        return
    assert np.signbit(got) == np.signbit(want) or want == 0 and ulps
    assert abs(got - want) <= ulps * np.spacing(abs(want)) or got == want, (got, want)


@pytest.mark.parametrize("name", sorted(EXACT) + sorted(CLOSE))
def test_helper_agrees_with_numpy(name):
    fn = helpers()[name]
    ref = {**EXACT, **CLOSE}[name]
    rng = np.random.default_rng(5)
    values = SPECIAL + list(rng.normal(0, 30, 200)) + list(rng.uniform(-1, 1, 50))
    with np.errstate(all="ignore"):
        for x in values:
            check(float(fn(x)), float(ref(np.float64(x))), ULPS.get(name, 0))


def test_fmod_special_values():
    fmod = helpers()["fmod"]
    with np.errstate(all="ignore"):
        for x in SPECIAL:
            for y in [0.0, -0.0, 1.5, -2.0, math.inf, -math.inf, math.nan, 1e-300]:
                check(float(fmod(x, y)), float(np.fmod(np.float64(x), np.float64(y))), 0)
