"""The cpu backend's own promises: packed vector code, threads, options, cache, errors.

The shared program tests already run every program on the cpu backend against the
reference; these cover what only this backend has.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hydra
from hydra import lane, lanesum, nlanes
from hydra.backends.cpu.backend import CpuBackend


def cpu(fn, **kw):
    """``hydra.compile(fn, backend="cpu", ...)``, also before ``hydra.backends.cpu``
    exports ``CpuBackend`` (until then ``get_backend("cpu")`` cannot find it)."""
    k = hydra.compile(fn, backend="numpy", **kw)
    k.backend, k.backend_name = CpuBackend, "cpu"
    return k


def dump(k, stage: str, *args) -> str:
    """``k.dump_ir(stage, *args)`` of the cpu backend (see ``cpu``)."""
    fn, _ = k.specialize(k.signature(args)[1])
    return CpuBackend.dump(fn, stage, k.options)


def mandel(c_re: np.float32, c_im: np.float32, max_iter: np.int32) -> np.int32:
    """Escape time of z -> z * z + c from z = 0 (a float32 varying loop with a break)."""
    x = c_re * 0.0
    y = c_im * 0.0
    for i in range(max_iter):
        x2, y2 = x * x, y * y
        if x2 + y2 > 4.0:
            return np.int32(i)
        y = 2.0 * x * y + c_im
        x = x2 - y2 + c_re
    return max_iter


def grid(n: int):
    rng = np.random.default_rng(n)
    return (rng.uniform(-2, 1, n).astype(np.float32), rng.uniform(-1, 1, n).astype(np.float32),
            np.int32(64))


MANDEL = cpu(mandel, varying=("c_re", "c_im"))
REFERENCE = hydra.compile(mandel, varying=("c_re", "c_im"), backend="numpy")


def host_vector_register() -> str | None:
    """The register name of the host's gang vectors: zmm (AVX-512), ymm (AVX2)."""
    from hydra.backends.cpu.vectors import vector_bits
    return {512: "zmm", 256: "ymm"}.get(vector_bits())


@pytest.mark.skipif(host_vector_register() is None, reason="needs AVX2 or AVX-512")
def test_hot_loop_is_packed_vector_code():
    asm = dump(MANDEL, "asm", *grid(8))
    assert f"vmulps\t%{host_vector_register()}" in asm
    assert "vcmpltps" in asm or "vcmpnleps" in asm


def nested_exits(x: np.int64) -> np.int64:
    """Loop-carried masks of two nested varying loops, with break and continue."""
    s = 0
    for i in range(x % 7):
        j = 0
        while j < x % 5:
            j += 1
            if (i + j) % 3 == 0:
                continue
            if i * j > x % 11:
                break
            s += i * j
    return s


@pytest.mark.parametrize("avx512", [True, False], ids=["k-register masks", "widened masks"])
def test_loop_carried_masks_in_both_forms(monkeypatch, avx512):
    """AVX-512 hosts carry loop masks as i1 phis (k registers), others widen them through
    an empty inline asm; both forms run here whatever the host is."""
    from hydra.backends.cpu import controlflow
    monkeypatch.setattr(controlflow, "host_has_avx512", lambda: avx512)
    args = grid(17)
    k = cpu(mandel, varying=("c_re", "c_im"))
    np.testing.assert_array_equal(k(*args), REFERENCE(*args))
    assert ('asm ""' in dump(k, "llvm", *args)) is not avx512
    x = np.arange(-20, 77, dtype=np.int64)
    np.testing.assert_array_equal(cpu(nested_exits, varying=("x",))(x),
                                  [nested_exits(v) for v in x])


@pytest.mark.parametrize("lanes", [1, 3, 17, 1000])
def test_lane_counts_that_do_not_fill_a_gang(lanes):
    args = grid(lanes)
    np.testing.assert_array_equal(MANDEL(*args), REFERENCE(*args))


def test_one_thread_and_all_threads_agree():
    args = grid(20_000)  # enough gangs for the thread pool
    one = cpu(mandel, varying=("c_re", "c_im"), threads=1)
    two = cpu(mandel, varying=("c_re", "c_im"), threads=2)
    np.testing.assert_array_equal(one(*args), two(*args))
    np.testing.assert_array_equal(one(*args), REFERENCE(*args))


def gather(a, idx):
    return a[idx] * 2.0


def test_boundscheck_false_skips_the_checks_but_still_wraps_negative_indices():
    a = np.arange(10.0)
    idx = np.array([0, 3, -1, 9, -10])
    fast = cpu(gather, varying=("idx",), boundscheck=False)
    np.testing.assert_array_equal(fast(a, idx), a[idx] * 2.0)
    assert "call void @hydra_err" not in dump(fast, "llvm", a, idx)
    assert "call void @hydra_err" in dump(cpu(gather, varying=("idx",)), "llvm", a, idx)


def test_out_of_bounds_names_the_lane_and_writes_nothing():
    checked = cpu(gather, varying=("idx",))
    idx = np.arange(40) % 10 - 5
    idx[23] = 10
    with pytest.raises(IndexError, match=r"index 10 is out of bounds for axis 0 with size 10 "
                                         r"\(lane 23\)"):
        checked(np.arange(10.0), idx)


def divide(x, d):
    return x // d


def test_integer_division_by_zero_names_the_lane():
    k = cpu(divide, varying=("x", "d"))
    d = np.ones(50, np.int64)
    d[37] = 0
    with pytest.raises(ZeroDivisionError, match=r"integer division by zero \(lane 37\)"):
        k(np.arange(50), d)
    # the same lanes, and Python's floor semantics, when no divisor is zero
    x = np.arange(-25, 25)
    d = np.where(np.arange(50) % 2 == 0, 7, -3)
    np.testing.assert_array_equal(k(x, d), x // d)


def test_fastmath_contracts_and_stays_close():
    args = grid(1000)
    fast = cpu(mandel, varying=("c_re", "c_im"), fastmath=True)
    assert "fmul contract reassoc" in dump(fast, "llvm", *args)
    assert "contract" not in dump(MANDEL, "llvm", *args)
    agree = np.mean(fast(*args) == REFERENCE(*args))
    assert agree > 0.95


def mean_of_squares(x):
    s = lanesum(x * x)
    return s / nlanes() - x


def test_sync_point_between_native_phases():
    k = cpu(mean_of_squares, varying=("x",))
    x = np.linspace(0, 1, 3000)
    np.testing.assert_allclose(k(x), np.sum(x * x) / 3000 - x, rtol=1e-12)
    text = dump(k, "llvm", x)
    assert "host step" in text and text.count("define void") == 2


def lockstep_print(x):
    print("a", lane())
    print("b", x)


def test_prints_come_out_in_lockstep(capsys):
    k = cpu(lockstep_print, varying=("x",))
    k(np.array([10, 20, 30]))
    assert capsys.readouterr().out.split("\n") == [
        "a 0", "a 1", "a 2", "b 10", "b 20", "b 30", ""]


def test_dump_numba_shows_the_driver():
    text = dump(MANDEL, "numba", *grid(8))
    assert "through ctypes (the GIL released)" in text
    assert "(i64 %chunk, i64 %ngangs, i64 %n, ptr %err" in text


def test_cache_lets_a_second_process_skip_compilation(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        import numpy as np, hydra
        from test_cpu_backend import cpu, mandel, grid
        from hydra.backends.machinecode import functions
        k = cpu(mandel, varying=("c_re", "c_im"), cache=True)
        out = k(*grid(100))
        print(int(out.sum()), len(functions.BUILT), "numba" in sys.modules)
    """)
    env = dict(os.environ, HYDRA_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, check=True).stdout.split() for _ in range(2)]
    (s1, built1, _), (s2, built2, numba2) = runs
    assert s1 == s2
    assert built1 == "1"  # the first process compiled the kernel
    assert built2 == "0"  # the second loaded its object file
    assert numba2 == "False"  # without importing numba


def casts(x):  # NumPy's casts (int(x) raises out of range: tests/test_scalar_rules.py)
    return np.int8(x), np.uint8(x), np.int16(x), np.uint16(x), np.int32(x), np.int64(x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_to_int_casts_out_of_range_match_numpy(dtype):
    x = np.array([3e9, -3e9, 1e20, np.nan, np.inf, 70000.0, -129.0, 300.0, -0.5, 2.7], dtype)
    want = hydra.compile(casts, varying=("x",), backend="numpy")(x)
    for got, ref in zip(cpu(casts, varying=("x",))(x), want):
        np.testing.assert_array_equal(got, ref)
