"""Shared test machinery: the backend fixture and the per-lane oracle.

Environment first, before anything imports numba: CUDA runs on the simulator, and the
IR verifier runs after every pass.

``backend`` is parametrized over the backends that are available here (numpy always),
so every program test runs on each of them.  ``check_against_oracle`` runs the plain
Python function lane by lane (the oracle of lane-local programs) and compares: the
numpy backend with the oracle (integers and bools exactly, floats bit for bit), any
other backend with the numpy backend (bit for bit, or within a few ulp when the
program uses transcendental math).
"""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
os.environ["HYDRA_CHECK_IR"] = "1"

import contextlib  # noqa: E402
import io  # noqa: E402
import re  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import hydra  # noqa: E402
from arrays_oracle import ARRAY_BACKENDS, ARRAY_LANES  # noqa: E402
from lockstep_oracle import run_lockstep  # noqa: E402
from hydra.backends import available  # noqa: E402

BACKENDS = [name for name in ("numpy", "cpu", "cuda") if available(name)]
LANE_COUNTS = (1, 3, 8, 17, 1000)
#: the CUDA simulator costs ~10 us per loop iteration per lane: keep it small
#: (``HYDRA_TEST_CUDA_LANES`` lifts the cap on a real GPU: ``bench/gpu_check.sh``)
CUDA_MAX_LANES = int(os.environ.get("HYDRA_TEST_CUDA_LANES", "64"))
#: ulps allowed between backends for programs using transcendental math: the largest
#: documented error of the cpu backend's vector math (hydra/backends/cpu/vecmath.ULP,
#: checked in tests/test_vecmath.py)
TRANSCENDENTAL_ULPS = 5
#: cuda on a real GPU: math functions and float ``**`` go to NVIDIA's libdevice, within the
#: ulp its documentation gives (pow, acos, sin, ...: 1 to 4), not bit for bit the host libm
#: NumPy calls; + - * / and sqrt stay bit for bit (docs/guide.md, "Backends")
CUDA_ON_GPU = "cuda" in BACKENDS and os.environ.get("NUMBA_ENABLE_CUDASIM") == "0"
_DEVICE_MATH = re.compile(r"\*\*|\bmath\.(?!isnan|isinf|isfinite|copysign|fabs|floor|ceil|"
                          r"trunc|sqrt)\w+\(|\bnp\.(?:exp|log|sin|cos|tan|arc|sinh|cosh|"
                          r"tanh|power|float_power|cbrt|hypot|logaddexp)\w*\(")


def child_env(root, **extra) -> dict:
    """The environment of a child Python that imports this checkout first: ``root`` put
    before any PYTHONPATH already set (the GPU script carries wheels on one), ``extra``
    variables added."""
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def device_math_ulps(fn, backend: str) -> int:
    """The ulps a cuda run on a GPU may differ by where ``fn``'s source uses math that
    libdevice computes (``TRANSCENDENTAL_ULPS``), else 0."""
    import inspect
    if backend != "cuda" or not CUDA_ON_GPU:
        return 0
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return TRANSCENDENTAL_ULPS
    return TRANSCENDENTAL_ULPS if _DEVICE_MATH.search(source) else 0


class Backend(str):
    """A backend name that knows how many lanes it can afford."""

    def lanes(self, n: int) -> int:
        """``n``, capped where the backend is a slow simulator."""
        return min(n, CUDA_MAX_LANES) if self == "cuda" else n


@pytest.fixture(params=BACKENDS)
def backend(request) -> Backend:
    return Backend(request.param)


# --- the oracle ------------------------------------------------------------------------

@contextlib.contextmanager
def as_lane(fn, i: int, n: int):
    """Inside: ``lane()`` is ``i`` and ``nlanes()`` is ``n`` for ``fn`` and every helper
    defined in its module (lane-local programs only need these two intrinsics)."""
    g = fn.__globals__
    saved = {}
    for name, value in list(g.items()):
        which = getattr(value, "__hydra_intrinsic__", None)
        if which == "lane":
            saved[name] = value
            g[name] = lambda: i
        elif which == "nlanes":
            saved[name] = value
            g[name] = lambda: n
    for name, value in list(g.items()):
        # ``import hydra`` and ``hydra.lane()`` in a program
        if value is hydra:
            saved[name] = value
            g[name] = _LaneModule(i, n)
    try:
        yield
    finally:
        g.update(saved)


class _LaneModule:
    def __init__(self, i: int, n: int) -> None:
        self._i, self._n = i, n

    def lane(self):
        return self._i

    def nlanes(self):
        return self._n

    def __getattr__(self, name):
        return getattr(hydra, name)


def lane_args(args, varying, params, i: int):
    """The arguments lane ``i`` sees."""
    return [a[i] if p in varying else a for p, a in zip(params, args)]


def run_oracle(fn, args, lanes: int, varying):
    """Run ``fn`` as plain Python once per lane; the list of per-lane results."""
    params = list(fn.__code__.co_varnames[: fn.__code__.co_argcount])
    out = []
    for i in range(lanes):
        # NumPy scalars warn where they wrap; hydra wraps silently, as arrays do
        with as_lane(fn, i, lanes), np.errstate(all="ignore"):
            out.append(fn(*lane_args(args, varying, params, i)))
    return out


def _copy(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def assert_same_value(got, want, what: str, ulps: int = 0) -> None:
    """Integers and bools exactly, floats bit for bit (NaNs alike), or within ``ulps``."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if want.dtype.kind == "f" or got.dtype.kind == "f":
        assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
        same_nan = np.isnan(got) & np.isnan(want)
        if ulps == 0:
            ok = (got == want) | same_nan
            # bit for bit: also tells 0.0 from -0.0
            ok &= (np.signbit(got) == np.signbit(want)) | same_nan
        else:
            spacing = np.abs(np.spacing(want.astype(got.dtype)))
            ok = (np.abs(got - want) <= ulps * spacing) | same_nan | (got == want)
        bad = np.nonzero(~ok.reshape(-1))[0]
        assert bad.size == 0, (f"{what}: {bad.size} element(s) differ, first at flat index "
                               f"{bad[0]}: got {got.reshape(-1)[bad[0]]!r}, "
                               f"want {want.reshape(-1)[bad[0]]!r}")
    else:
        np.testing.assert_array_equal(got, want, err_msg=what, strict=False)
        assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"


def compare_results(got, want, what: str, ulps: int = 0) -> None:
    """Compare two kernel results (arrays, scalars, tuples of them, None)."""
    if want is None:
        assert got is None, f"{what}: expected None, got {got!r}"
        return
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), f"{what}: {got!r} vs {want!r}"
        for k, (g, w) in enumerate(zip(got, want)):
            compare_results(g, w, f"{what}[{k}]", ulps)
        return
    assert not isinstance(got, tuple), f"{what}: got a tuple {got!r}"
    assert np.ndim(got) == np.ndim(want), f"{what}: {got!r} vs {want!r}"
    assert_same_value(got, want, what, ulps)


def _stack_lanes(per_lane: list, result):
    """The oracle's per-lane values shaped like hydra's ``result``: an array of lanes
    for a varying leaf, the one common value for a uniform (scalar) leaf."""
    if result is None:
        assert all(v is None for v in per_lane), f"oracle returned {per_lane[:3]}..."
        return None
    if isinstance(result, tuple):
        assert all(isinstance(v, tuple) and len(v) == len(result) for v in per_lane), \
            f"oracle returned {per_lane[:3]}..., hydra {result!r}"
        return tuple(_stack_lanes([v[k] for v in per_lane], r) for k, r in enumerate(result))
    if isinstance(result, np.ndarray):
        return np.asarray(per_lane, dtype=result.dtype) if _fits(per_lane, result.dtype) \
            else np.asarray(per_lane)
    first = per_lane[0]
    for v in per_lane[1:]:
        assert v == first or (v != v and first != first), \
            f"hydra says uniform ({result!r}) but lanes differ: {per_lane[:5]}"
    return first


def _fits(values, dtype) -> bool:
    """The oracle's values are exactly representable in ``dtype`` (else compare as they
    are, so a wrong dtype shows as a mismatch instead of being cast away)."""
    arr = np.asarray(values)
    if arr.dtype == dtype:
        return True
    if arr.dtype.kind == "O":
        return False
    with np.errstate(all="ignore"):
        cast = arr.astype(dtype)
    same = cast.astype(arr.dtype) == arr
    if arr.dtype.kind == "f":
        same |= np.isnan(arr)
    # Python ints and floats (int64 / float64 here) carry no dtype of their own; and
    # hydra types a value statically, so one returned as int32 on one path and int64 on
    # another is int64 on every lane, where Python keeps each lane's own type
    untyped = arr.dtype in (np.dtype(np.int64), np.dtype(np.float64), np.dtype(np.bool_))
    return bool(np.all(same)) and (untyped or np.can_cast(arr.dtype, dtype, "safe"))


def _captured(run):
    """``run()``'s result and what it printed."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        result = run()
    return result, buf.getvalue()


def lines_by_lane(text: str) -> dict[str, list[str]]:
    """Printed lines grouped by their second word (split at spaces or commas), the lane
    (``print("p", lane(), ...)``):
    lockstep order interleaves the lanes, but each lane's own lines keep its order."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        words = re.split(r"[ ,]", line, maxsplit=2)
        out.setdefault(words[1] if len(words) > 1 else "", []).append(line)
    return out


def check_against_oracle(fn, args, lanes: int | None = None, varying=(), backend="numpy",
                         ulps: int | None = None, oracle: bool = True, prints: bool = False,
                         lockstep: bool = False, **options):
    """Run ``fn`` with hydra on ``backend`` and compare with the per-lane oracle (numpy
    backend) or with the numpy backend (others), results and array arguments alike.

    ``ulps``: tolerance for programs with transcendental math (default: bit for bit).
    Python's ``math.tanh``/``math.hypot`` and NumPy's differ in the last bit, and the
    reference computes with NumPy; compiled backends may use other vector math.
    ``oracle=False``: the program is not lane-local; compare backends only.
    ``prints=True``: the program prints lines whose second word is ``lane()``; each
    lane's lines must be the oracle's, and other backends must print numpy's text.
    ``lockstep=True``: also compare the numpy backend with the lockstep AST interpreter
    of ``lockstep_oracle`` (results, arrays and the exact printed text), which also
    holds for programs that are not lane-local.
    Returns hydra's result."""
    varying = (varying,) if isinstance(varying, str) else tuple(varying)
    params = list(fn.__code__.co_varnames[: fn.__code__.co_argcount])
    if lanes is None:
        lanes = len(args[params.index(varying[0])])
    tol = max(ulps or 0, device_math_ulps(fn, backend))
    mine = _copy(args)
    kernel = hydra.compile(fn, lanes=lanes, varying=varying, backend=backend, **options)
    got, printed = _captured(lambda: kernel(*mine))
    if backend == "numpy":
        if oracle:
            theirs = _copy(args)
            per_lane, oracle_printed = _captured(lambda: run_oracle(fn, theirs, lanes, varying))
            want = _stack_lanes(per_lane, got)
            compare_results(got, want, f"{fn.__name__} at {lanes} lanes vs oracle", tol)
            for p, a, b in zip(params, mine, theirs):
                if isinstance(a, np.ndarray):
                    compare_results(a, b, f"array argument '{p}' vs oracle", tol)
            if prints:
                assert lines_by_lane(printed) == lines_by_lane(oracle_printed), \
                    f"printed:\n{printed}\noracle printed:\n{oracle_printed}"
        if lockstep:
            theirs = _copy(args)
            per_lane, oracle_printed = _captured(lambda: run_lockstep(fn, theirs, lanes,
                                                                      varying))
            want = _stack_lanes(per_lane, got)
            compare_results(got, want, f"{fn.__name__} at {lanes} lanes vs lockstep", tol)
            for p, a, b in zip(params, mine, theirs):
                if isinstance(a, np.ndarray):
                    compare_results(a, b, f"array argument '{p}' vs lockstep", tol)
            assert printed == oracle_printed, \
                f"printed:\n{printed}\nlockstep oracle printed:\n{oracle_printed}"
        return got
    ref_args = _copy(args)
    reference = hydra.compile(fn, lanes=lanes, varying=varying, backend="numpy")
    want, ref_printed = _captured(lambda: reference(*ref_args))
    compare_results(got, want, f"{fn.__name__} at {lanes} lanes: {backend} vs numpy", tol)
    for p, a, b in zip(params, mine, ref_args):
        if isinstance(a, np.ndarray):
            compare_results(a, b, f"array argument '{p}': {backend} vs numpy", tol)
    assert printed == ref_printed, f"{backend} printed:\n{printed}\nnumpy printed:\n{ref_printed}"
    return got


@pytest.fixture(params=ARRAY_BACKENDS)
def be(request) -> str:
    """The backends that run per-lane arrays (tests/test_arrays*.py)."""
    return request.param


@pytest.fixture(params=ARRAY_LANES)
def n(request) -> int:
    """Lane counts of the per-lane array tests."""
    return request.param
