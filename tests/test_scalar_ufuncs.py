"""Numbers and per-lane arrays accept the same NumPy ufuncs (issue 22, item 8): every
ufunc a per-lane array takes also works on a number, with NumPy's values on every
backend, or is refused with a reason (never "not supported in kernels" for a function
the array form takes)."""

import importlib.util

import numpy as np
import pytest

import hydra
from conftest import BACKENDS, CUDA_ON_GPU, TRANSCENDENTAL_ULPS
from hydra.batching import UFUNCS, MATH_UFUNCS
from hydra.frontend.ufuncs import REFUSED, _RULES

NAMES = sorted({*MATH_UFUNCS, *(f.__name__ for f in UFUNCS.values() if isinstance(f, np.ufunc))})
FLOATS = np.array([-2.5, -1.0, -0.0, 0.0, 0.5, 1.5, 2.5, 3.0, np.nan, np.inf, -np.inf, 1e300,
                   -7.25, 0.25, 2.0, 2.0])
OTHERS = np.array([1.5, -1.0, 0.0, -0.0, np.nan, 2.0, -2.5, 3.0, 1.0, np.inf, -np.inf, 2.0,
                   2.0, -0.25, 2.0, np.nan])
INTS = np.array([-7, -1, 0, 1, 2, 3, 5, 100, -100, 7, 9, -3, 4, 6, 8, 2])
INT_OTHERS = np.array([3, 2, 1, 5, 1, 2, -3, 7, 3, 1, 4, 2, 2, 3, 1, 5])
#: transcendental on the compiled backends: within vecmath's ulps of NumPy
TRANSCENDENTAL = {"logaddexp", "logaddexp2"}
#: libdevice's pow, on a GPU only (conftest.CUDA_ON_GPU)
DEVICE_TRANSCENDENTAL = {"power", "float_power"}


def kernels(ufunc):
    """(the ufunc of each lane's first number, of each lane's array)."""
    if ufunc.nin == 1:
        def number1(x, y):
            return ufunc(x[0])

        def array1(x, y):
            return ufunc(x)
        return number1, array1

    def number2(x, y):
        return ufunc(x[0], y[0])

    def array2(x, y):
        return ufunc(x, y)
    return number2, array2


def inputs(dtype):
    if np.dtype(dtype).kind == "f":
        with np.errstate(over="ignore"):  # 1e300 is inf in float32
            return FLOATS.astype(dtype)[:, None], OTHERS.astype(dtype)[:, None]
    return INTS.astype(dtype)[:, None], INT_OTHERS.astype(dtype)[:, None]


def numpy_takes(ufunc, x, y) -> bool:
    try:
        with np.errstate(all="ignore"):
            ufunc(*(x, y)[:ufunc.nin])
        return True
    except (TypeError, ValueError):  # no loop for the dtype; int ** negative int
        return False


def same(got, want, ulps=0):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if ulps and want.dtype.kind == "f":
        np.testing.assert_array_max_ulp(got, want, ulps)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", NAMES)
def test_numbers_take_every_ufunc_arrays_take(name):
    ufunc = getattr(np, name)
    on_number, on_array = kernels(ufunc)
    dtypes = [d for d in (np.float64, np.float32, np.int64) if numpy_takes(ufunc, *inputs(d))]
    x, y = inputs(dtypes[0])
    hydra.compile(on_array, varying=("x", "y"), backend="numpy")(x, y)  # arrays take it
    if name in REFUSED:
        with pytest.raises(hydra.CompileError) as e:
            hydra.compile(on_number, varying=("x", "y"), backend="numpy")(x, y)
        assert e.value.message == f"np.{name} of a number is not supported: {REFUSED[name]}"
        return
    k = hydra.compile(on_number, varying=("x", "y"), backend="numpy")
    for dtype in dtypes:
        x, y = inputs(dtype)
        try:
            got = k(x, y)
        except hydra.CompileError as e:  # refused with a reason, never a shrug
            assert "not supported in kernels" not in e.message and "NumPy" in e.message, e
            continue
        with np.errstate(all="ignore"):
            want = np.array([ufunc(*(a[0], b[0])[:ufunc.nin]) for a, b in zip(x, y)])
        same(got, want)


def all_rules_kernel(tmp_path, dtype):
    """One kernel returning every ufunc of ``ufuncs._RULES`` that takes ``dtype`` (one
    compilation per backend, not one per ufunc), and the names in its order."""
    names = []
    x, y = inputs(dtype)
    for name in sorted(set(_RULES) & set(NAMES)):
        ufunc = getattr(np, name)
        if not numpy_takes(ufunc, x, y):
            continue
        try:
            hydra.compile(kernels(ufunc)[0], varying=("x", "y"), backend="numpy")(x, y)
        except hydra.CompileError:
            continue  # refused for this dtype, with its reason (checked above)
        names.append(name)
    calls = ", ".join(f"np.{n}(x[0], y[0])" if getattr(np, n).nin == 2 else f"np.{n}(x[0])"
                      for n in names)
    path = tmp_path / f"all_rules_{np.dtype(dtype).name}.py"
    path.write_text(f"import numpy as np\n\n\ndef k(x, y):\n    return ({calls},)\n")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.k, names


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "numpy"])
@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_compiled_backends_agree_with_the_reference(tmp_path, backend, dtype):
    k, names = all_rules_kernel(tmp_path, dtype)
    assert len(names) > (30 if dtype == np.float64 else 20)
    x, y = inputs(dtype)
    want = hydra.compile(k, varying=("x", "y"), backend="numpy")(x, y)
    got = hydra.compile(k, varying=("x", "y"), backend=backend)(x, y)
    for name, g, w in zip(names, got, want):
        try:
            device = backend == "cuda" and CUDA_ON_GPU and name in DEVICE_TRANSCENDENTAL
            same(g, w, TRANSCENDENTAL_ULPS if name in TRANSCENDENTAL or device else 0)
        except AssertionError as e:
            raise AssertionError(f"np.{name} on {backend}: {e}") from None


def scalar_sign(x):
    return np.sign(x[0]), np.square(x[0]), np.reciprocal(x[0]), np.rint(x[0]), np.mod(x[0], 3.0)


def test_the_ufuncs_a_user_met():
    x = np.array([[-2.5], [-0.0], [0.5], [7.0]])
    got = hydra.compile(scalar_sign, varying=("x",), backend="numpy")(x)
    with np.errstate(divide="ignore"):
        wanted = [np.sign(x[:, 0]), np.square(x[:, 0]), np.reciprocal(x[:, 0]),
                  np.rint(x[:, 0]), np.mod(x[:, 0], 3.0)]
    for g, w in zip(got, wanted):
        same(g, w)
    with pytest.raises(hydra.CompileError) as e:
        hydra.compile(lambda x: np.sign(x[0] > 0), varying=("x",), backend="numpy")(x)
    assert e.value.message == ("np.sign of a bool is not defined: NumPy has no bool loop "
                               "for it either")
