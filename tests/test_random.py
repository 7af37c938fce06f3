"""``hydra.random`` (Philox 4x32-10): Random123's known answers, the same numbers on every
backend, at any lane count, thread count, gang shape and Dask chunking, and in plain
Python with ``lane=``; the distributions' moments and Kolmogorov-Smirnov statistics
(NumPy backend only: the numbers are the same everywhere)."""

import functools
import math

import numpy as np
import pytest

import hydra
from conftest import BACKENDS
from hydra import lane
from hydra import random as hr

# Random123's tests/kat_vectors, "philox4x32 10": counter (4 words), key (2) -> 4 words
KAT = [
    ((0x00000000, 0x00000000, 0x00000000, 0x00000000), (0x00000000, 0x00000000),
     (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF),
     (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def philox_kernel(c0, c1, c2, c3, k0, k1):
    return hr.philox4x32(c0, c1, c2, c3, k0, k1)


def test_philox_known_answers(backend):
    words = [np.array([v[j] for v, _, _ in KAT], np.uint32) for j in range(4)]
    keys = [np.array([k[j] for _, k, _ in KAT], np.uint32) for j in range(2)]
    k = hydra.compile(philox_kernel, varying=("c0", "c1", "c2", "c3", "k0", "k1"),
                      backend=backend)
    got = k(*words, *keys)
    for j in range(4):
        assert got[j].dtype == np.uint32
        np.testing.assert_array_equal(got[j], [want[j] for _, _, want in KAT])
    for ctr, key, want in KAT:  # the same function in plain Python
        assert hr.philox4x32(*map(np.uint32, ctr + key)) == want


# --- the same numbers everywhere ----------------------------------------------------------

SEED = -1234567890123  # two's complement: both key words in use


def draws(seed, i):
    """Every function once, with a varying counter (negative on some lanes)."""
    return (hr.uniform(seed, i), hr.uniform(seed, i, dtype=np.float32),
            hr.normal(seed, i), hr.normal(seed, i, np.float32),
            hr.integers(seed, i, -5, 6),
            hr.integers(seed, i, 0, 2**31 + 1),  # rejects about half of its words
            hr.uniform(seed, i, size=3), hr.bits(seed, i)[3],
            hr.integers(seed, i, 0, (i & 15) + 1, np.int32, size=2))  # varying bounds


def python_draws(seed, i, ln):
    return (hr.uniform(seed, i, lane=ln), hr.uniform(seed, i, dtype=np.float32, lane=ln),
            hr.normal(seed, i, lane=ln), hr.normal(seed, i, np.float32, lane=ln),
            hr.integers(seed, i, -5, 6, lane=ln), hr.integers(seed, i, 0, 2**31 + 1, lane=ln),
            hr.uniform(seed, i, size=3, lane=ln), hr.bits(seed, i, lane=ln)[3],
            hr.integers(seed, i, 0, (i & 15) + 1, np.int32, size=2, lane=ln))


def counters(lanes):
    return np.arange(lanes, dtype=np.int64) * 7 - 9


@functools.lru_cache
def reference(lanes):
    return hydra.compile(draws, varying="i", backend="numpy")(SEED, counters(lanes))


def same(got, want):
    """Bit for bit, normals included (their log and cos are hydra code, not libm)."""
    for j, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, j
        np.testing.assert_array_equal(g, w, err_msg=f"result {j}")


@pytest.mark.parametrize("lanes", [1, 17])
def test_plain_python_with_lane_gives_the_reference_numbers(lanes):
    want = reference(lanes)
    for ln in (0, lanes // 2, lanes - 1):
        got = python_draws(SEED, int(counters(lanes)[ln]), ln)
        for j, g in enumerate(got):
            np.testing.assert_array_equal(g, want[j][ln], err_msg=f"lane {ln} result {j}")
            assert np.asarray(g).dtype == want[j].dtype


def test_a_lanes_numbers_do_not_depend_on_the_lane_count():
    small, large = reference(8), reference(1000)
    for s, b in zip(small, large):
        np.testing.assert_array_equal(s, b[:8])
    again = hydra.compile(draws, varying="i", lanes=1000, backend="numpy")(SEED, counters(1000))
    same(again, large)


@pytest.mark.parametrize("threads", [1, 2])
def test_cpu_gives_the_reference_numbers(threads):
    want = reference(1000)
    k = hydra.compile(draws, varying="i", backend="cpu", threads=threads)
    same(k(SEED, counters(1000)), want)
    for lanes in (1, 17):  # partial gangs
        same(k(SEED, counters(lanes)), [w[:lanes] for w in want])


def test_cpu_gives_the_reference_numbers_in_any_gang_shape(monkeypatch):
    monkeypatch.setenv("HYDRA_CPU_GANG_VECTORS", "3")
    k = hydra.compile(draws, varying="i", backend="cpu", cache=False)
    same(k(SEED, counters(100)), reference(100))


def test_cuda_gives_the_reference_numbers():
    if "cuda" not in BACKENDS:
        pytest.skip("no cuda backend here")
    k = hydra.compile(draws, varying="i", backend="cuda")
    same(k(SEED, counters(5)), reference(5))


def test_dask_chunks_keep_the_global_lane():
    da = pytest.importorskip("dask.array")
    k = hydra.compile(draws, varying="i", backend="numpy")
    out = k(SEED, da.from_array(counters(40), chunks=(7, 20, 13)))
    same([o.compute(scheduler="sync") for o in out], reference(40))


def uniform_counter_in_branch(seed, n):
    """A uniform counter, a varying seed, draws on some lanes only."""
    s = 0.0
    for k in range(n):
        if lane() % 3 != 1:
            s += hr.uniform(seed + lane(), k)
    return s


def test_uniform_counters_varying_seeds_and_masks(backend):
    lanes = backend.lanes(17)
    k = hydra.compile(uniform_counter_in_branch, lanes=lanes, backend=backend)
    got = k(11, 4)
    for ln in range(lanes):
        want = 0.0
        for i in range(4):
            if ln % 3 != 1:
                want += hr.uniform(11 + ln, i, lane=ln)
        assert got[ln] == want


# --- the distributions (the numbers are the same on every backend) -------------------------

N = 20000


def samples(seed):
    return (hr.uniform(seed, 0), hr.uniform(seed, 1, dtype=np.float32), hr.normal(seed, 2),
            hr.integers(seed, 3, 3, 13), hr.integers(seed, 4, 0, 2**31 + 1),
            hr.normal(seed, 5, np.float32))


def ks_statistic(x, cdf):
    """The Kolmogorov-Smirnov distance between the sample ``x`` and ``cdf``."""
    x = np.sort(np.asarray(x, np.float64))
    f = cdf(x)
    n = len(x)
    return max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n))


#: the asymptotic critical value of sqrt(n) * D at significance 0.001
KS_CRITICAL = math.sqrt(-0.5 * math.log(0.001 / 2))


def normal_cdf(x):
    return 0.5 * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


@pytest.fixture(scope="module")
def sample():
    return hydra.compile(samples, lanes=N, backend="numpy")(2024)


def test_uniform_distribution(sample):
    for u in sample[:2]:
        assert u.min() >= 0.0 and u.max() < 1.0
        assert abs(u.mean() - 0.5) < 5 * math.sqrt(1 / 12 / N)
        assert abs(u.var() - 1 / 12) < 0.005
        assert math.sqrt(N) * ks_statistic(u, lambda x: x) < KS_CRITICAL
    assert len(np.unique(sample[0])) == N  # 53 bits: no repeats
    assert np.all(sample[1] * np.float32(2**24) == np.floor(sample[1] * np.float32(2**24)))


def test_normal_distribution(sample):
    for z in (sample[2], sample[5]):
        assert abs(z.mean()) < 5 / math.sqrt(N)
        assert abs(z.var() - 1.0) < 5 * math.sqrt(2 / N)
        assert abs(np.mean(z ** 3)) < 5 * math.sqrt(15 / N)  # skewness
        assert abs(np.mean(z ** 4) - 3.0) < 5 * math.sqrt(96 / N)  # kurtosis
        assert math.sqrt(N) * ks_statistic(z, normal_cdf) < KS_CRITICAL


def test_integers_distribution(sample):
    small, big = sample[3], sample[4]
    assert small.min() == 3 and small.max() == 12
    counts = np.bincount(small - 3, minlength=10)
    chi2 = np.sum((counts - N / 10) ** 2 / (N / 10))
    assert chi2 < 27.88  # chi-square, 9 degrees of freedom, significance 0.001
    # discrete KS: the empirical CDF against the uniform one at 3..12
    d = np.max(np.abs(np.cumsum(counts) / N - np.arange(1, 11) / 10))
    assert math.sqrt(N) * d < KS_CRITICAL
    r = 2**31 + 1
    assert big.min() >= 0 and big.max() < r
    assert abs(big.mean() - (r - 1) / 2) < 5 * r / math.sqrt(12 * N)
    assert math.sqrt(N) * ks_statistic(big / r, lambda x: x) < KS_CRITICAL


def test_draws_are_independent_across_lanes_counters_and_seeds(sample):
    u = hydra.compile(lambda s: hr.uniform(s, 0), lanes=N, backend="numpy")
    a, b = u(2024), u(2025)
    np.testing.assert_array_equal(a, sample[0])
    for x, y in ((a, b), (a, sample[1].astype(np.float64)), (a[:-1], a[1:])):
        assert abs(np.corrcoef(x, y)[0, 1]) < 5 / math.sqrt(N)


def test_log_and_cos_are_accurate():
    """The normals' own log and cos (exact range reductions, series in +, -, *, /) stay
    within 3 ulp of libm's log and within 2**-50 of its cos."""
    rng = np.random.default_rng(7)
    ns = np.concatenate([rng.integers(1, 2**53, 3000, dtype=np.uint64),
                         np.array([1, 2, 3, 2**26, 2**52 - 1, 2**52, 2**53 - 1], np.uint64)])
    for n in ns:
        want = math.log(float(n) * 2.0**-53)
        assert abs(hr._log2m53(n) - want) <= 3 * math.ulp(want), n
    assert hr._log2m53(np.uint64(2**53)) == 0.0
    ms = np.concatenate([rng.integers(0, 2**53, 3000, dtype=np.uint64),
                         np.array([0, 1, 2**50, 2**51 - 1, 2**51, 3 * 2**51, 2**53 - 1],
                                  np.uint64)])
    for m in ms:
        want = math.cos(2.0 * math.pi * (float(m) * 2.0**-53))
        assert abs(hr._cos2pi2m53(m) - want) <= 2.0**-50, m
    assert hr._cos2pi2m53(np.uint64(0)) == 1.0 and hr._cos2pi2m53(np.uint64(2**52)) == -1.0


def wide_bounds(seed):
    return (hr.integers(seed, 0, np.int32(-2**31), np.int32(2**31 - 1)),
            hr.integers(seed, 1, np.uint64(10), np.uint64(20), np.int32))


def test_integer_bounds_of_any_integer_type(backend):
    """int32 bounds whose difference int32 cannot hold, and uint64 bounds (NumPy would
    make ``uint64 + int64`` a float): int64 or the dtype asked for, on every backend."""
    got = hydra.compile(wide_bounds, lanes=backend.lanes(8), backend=backend)(5)
    assert got[0].dtype == np.int64 and got[1].dtype == np.int32
    for ln in range(len(got[0])):
        assert got[0][ln] == hr.integers(5, 0, -2**31, 2**31 - 1, lane=ln)
        assert 10 <= got[1][ln] < 20
    assert got[0].min() < -2**30 and got[0].max() > 2**30  # the whole range is used


# --- errors -----------------------------------------------------------------------------

def test_outside_a_kernel_the_lane_is_needed():
    with pytest.raises(RuntimeError, match="outside a kernel needs lane="):
        hr.uniform(1, 2)


def test_bad_arguments_fail():
    with pytest.raises(AssertionError, match="np.float64 or np.float32"):
        hr.uniform(1, 2, dtype=np.int32, lane=0)
    with pytest.raises(AssertionError, match="1 <= high - low <= 2"):
        hr.integers(1, 2, 5, 5, lane=0)
    k = hydra.compile(lambda s: hr.integers(s, 0, 0, lane()), lanes=3, backend="numpy")
    with pytest.raises(AssertionError, match="lane 0"):
        k(1)


def test_cpu_multiplies_in_vector_lanes():
    """The rounds' 32x32->64-bit products are vector multiplies (vpmuludq on x86), the
    words never leave the vector registers for scalar code."""
    import platform
    if "cpu" not in BACKENDS or platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("x86 cpu backend only")
    k = hydra.compile(lambda s: hr.bits(s, lane())[0], lanes=64, backend="cpu")
    asm = k.dump_ir("asm", 3)
    assert asm.count("vpmuludq") >= 20  # ten rounds, two products each
    assert "imulq" not in asm.split("vpmuludq", 1)[1].rsplit("vpmuludq", 1)[0]
