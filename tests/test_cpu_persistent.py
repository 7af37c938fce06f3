"""Persistent lanes on the cpu backend (``hydra/backends/cpu/persistent.py``): a gang's
slot whose lane left the loop stores that lane's results and takes the next lane.

Every kernel here runs on the cpu backend and the numpy reference and must agree bit
for bit, at lane counts below one gang, not a multiple of it, and over many chunks on
two threads; the structure (persistent or lockstep, and why) is read from the first
line of each phase's LLVM (``dump_ir("llvm")``)."""

import numpy as np
import pytest

import hydra
from hydra import lane, lanesum

from bench import lanes as lane_counters

pytestmark = pytest.mark.skipif(not hydra.backends.available("cpu"), reason="no cpu backend")

LANES = (1, 3, 17, 31, 32, 33, 100, 1000, 5000)


def phases(k, *args) -> list[str]:
    """The first line of each native phase: how its gangs run."""
    return [line for line in k.dump_ir("llvm", *args).splitlines()
            if line.startswith("; hydra:")]


def both(fn, args, varying, threads=1, **options):
    cpu = hydra.compile(fn, varying=varying, backend="cpu", threads=threads, **options)
    ref = hydra.compile(fn, varying=varying, backend="numpy", **options)
    return cpu, ref


def same(a, b) -> None:
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(a, b), (a, b)


# --- kernels ---------------------------------------------------------------------------

def collatz(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def jumps(n, lim):
    """break, continue, several results."""
    steps = 0
    peak = n
    while n != 1:
        if n % 2 == 0:
            n = n // 2
            continue
        n = 3 * n + 1
        peak = max(peak, n)
        steps += 1
        if steps >= lim:
            break
    return steps, peak, n


def early_return(n, x: float):
    if n % 7 == 0:
        return -1.0  # before the loop
    acc = x * 0.5
    t = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        acc = acc * 1.0001 + 1.0
        t += 1
        if n == 16 and t > 5:
            return acc  # inside the loop
    return acc - float(t)


def before_after(n, a):
    base = n * 7 + a  # varying, made before the loop
    sq = a * a  # uniform, made before the loop
    x = n
    t = 0
    while x > 1:
        x = x // 2 if x % 2 == 0 else 3 * x + 1
        t += 1
    return t * 1000 + base + sq


def by_lane(k):
    n = lane() + k
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def rows_and_store(rows, out, m):
    """A varying 2-D argument read inside the loop, a lane-private store in it."""
    x = rows[0] + 1
    t = 0
    while x != 1:
        x = x // 2 if x % 2 == 0 else 3 * x + 1
        t += 1
        out[lane()] = t * m + rows[t % 3]
    return t


def table_lookup(n, table):
    """A uniform array read at a per-lane index inside the loop."""
    s = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        s += table[n % 8]
    return s


def shrink(x: np.float32, flag: bool):
    """float32 values (masks as wide as 32-bit lanes), a uniform bool, two results."""
    t = 0
    y = x
    while y > np.float32(1.0):
        y = y * np.float32(0.75) if flag else y * np.float32(0.5)
        t += 1
    return t, y


# --- eligible kernels: results and structure ---------------------------------------------

@pytest.mark.parametrize("n", LANES)
def test_collatz_matches_reference_and_python(n):
    x = np.arange(1, n + 1, dtype=np.int64) * 7 + 1
    cpu, ref = both(collatz, (x,), ("n",))
    same(cpu(x), ref(x))
    assert cpu(x).tolist() == [collatz(int(v)) for v in x]
    assert phases(cpu, x) == ["; hydra: persistent lanes"]


@pytest.mark.parametrize("threads", [1, 2])
def test_many_chunks_on_two_threads(threads):
    # wildly varying trips: neighbours 1 and 27 (111 steps), 1e5-scale starts
    x = np.random.default_rng(1).integers(1, 200_000, 20_000).astype(np.int64)
    x[::97] = 27
    x[::89] = 1
    cpu, ref = both(collatz, (x,), ("n",), threads=threads)
    same(cpu(x), ref(x))


@pytest.mark.parametrize("n", [1, 5, 33, 1000])
def test_break_continue_several_outputs(n):
    x = np.arange(1, n + 1, dtype=np.int64)
    cpu, ref = both(jumps, (x, 40), ("n",))
    same(cpu(x, 40), ref(x, 40))
    assert phases(cpu, x, 40) == ["; hydra: persistent lanes"]


@pytest.mark.parametrize("n", [1, 17, 33, 1000])
def test_early_return_before_and_inside_the_loop(n):
    x = np.arange(1, n + 1, dtype=np.int64)
    f = np.linspace(-3.0, 3.0, n)
    cpu, ref = both(early_return, (x, f), ("n", "x"))
    same(cpu(x, f), ref(x, f))
    assert cpu(x, f).tolist() == [early_return(int(a), float(b)) for a, b in zip(x, f)]
    assert phases(cpu, x, f) == ["; hydra: persistent lanes"]


@pytest.mark.parametrize("n", [3, 33, 1000])
def test_values_made_before_the_loop_used_after_it(n):
    x = np.arange(1, n + 1, dtype=np.int64)
    cpu, ref = both(before_after, (x, 5), ("n",))
    same(cpu(x, 5), ref(x, 5))
    assert phases(cpu, x, 5) == ["; hydra: persistent lanes"]


@pytest.mark.parametrize("n", [1, 3, 33, 2500])
def test_lane_index_is_the_slots_lane(n):
    cpu = hydra.compile(by_lane, lanes=n, backend="cpu", threads=2)
    ref = hydra.compile(by_lane, lanes=n, backend="numpy")
    same(cpu(3), ref(3))
    assert phases(cpu, 3) == ["; hydra: persistent lanes"]


@pytest.mark.parametrize("n", [1, 17, 33, 700])
def test_varying_rows_and_a_lane_private_store(n):
    rows = np.random.default_rng(n).integers(0, 1000, (n, 3)).astype(np.int64)
    outs = []
    for backend in ("cpu", "numpy"):
        k = hydra.compile(rows_and_store, varying=("rows",), backend=backend,
                          boundscheck=False)
        out = np.zeros(n, np.int64)
        outs.append((k(rows, out, 3), out))
        if backend == "cpu":
            assert phases(k, rows, out, 3) == ["; hydra: persistent lanes"]
    same(outs[0], outs[1])


@pytest.mark.parametrize("n", [1, 17, 33, 3000])
@pytest.mark.parametrize("flag", [True, False])
def test_float32_values_and_a_uniform_bool(n, flag):
    x = (np.random.default_rng(n).random(n) * 1000).astype(np.float32)
    cpu, ref = both(shrink, (x, flag), ("x",), threads=2)
    same(cpu(x, flag), ref(x, flag))
    assert phases(cpu, x, flag) == ["; hydra: persistent lanes"]


def test_uniform_table_read_at_a_lane_index():
    x = np.arange(1, 3001, dtype=np.int64)
    table = np.arange(8, dtype=np.int64) ** 2
    cpu, ref = both(table_lookup, (x, table), ("n",), boundscheck=False)
    same(cpu(x, table), ref(x, table))
    assert phases(cpu, x, table) == ["; hydra: persistent lanes"]
    # with bounds checks (error sites) too: the phase writes no array
    checked = hydra.compile(table_lookup, varying=("n",), threads=2)
    same(checked(x, table), ref(x, table))
    assert phases(checked, x, table) == ["; hydra: persistent lanes"]


# --- errors and kernels that keep lockstep gangs -----------------------------------------

def out_of_bounds(n, a):
    t = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        t += 1
        if t > 3:
            t += a[n % 40]  # out of bounds where n % 40 >= len(a), lanes apart
    return t


def out_of_bounds_store(n, a, out):
    t = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        t += 1
        out[lane()] = t
        if t > 3:
            t += a[n % 40]
    return t


@pytest.mark.parametrize("n", [40, 2000])
def test_index_error_in_the_loop_names_the_reference_lane_and_line(n):
    # lanes fail at different trips, in different gangs: the earliest in lockstep
    # order (trip first, then the lowest lane) must win, as in the reference
    x = np.arange(1, n + 1, dtype=np.int64)[::-1].copy()
    a = np.zeros(20, np.int64)
    found = []
    for backend, threads in (("numpy", 1), ("cpu", 1), ("cpu", 2)):
        k = hydra.compile(out_of_bounds, varying=("n",), backend=backend, threads=threads)
        with pytest.raises(IndexError) as e:
            k(x, a)
        found.append(str(e.value))
        if backend == "cpu":  # the persistent phase, then its lockstep twin, ran
            assert phases(k, x, a) == ["; hydra: persistent lanes"]
    assert found[0] == found[1] == found[2]
    line = out_of_bounds.__code__.co_firstlineno + 6
    assert f"test_cpu_persistent.py:{line}: index " in found[0] and "(lane " in found[0]
    # the kernel still runs after an error, and correctly
    ok = np.full(40, 7, np.int64)
    k = hydra.compile(out_of_bounds, varying=("n",))
    ref = hydra.compile(out_of_bounds, varying=("n",), backend="numpy")
    with pytest.raises(IndexError):
        k(x, a)
    same(k(x, ok), ref(x, ok))


def test_error_sites_and_stores_keep_lockstep():
    x = np.arange(1, 300, dtype=np.int64)
    a = np.zeros(20, np.int64)
    found = []
    for backend in ("numpy", "cpu"):
        k = hydra.compile(out_of_bounds_store, varying=("n",), backend=backend)
        with pytest.raises(IndexError) as e:
            k(x, a, np.zeros(299, np.int64))
        found.append(str(e.value))
    assert found[0] == found[1]
    assert phases(k, x, a, np.zeros(299, np.int64)) == [
        "; hydra: lockstep gangs (error sites and stores)"]


def with_lanesum(n):
    t = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        t += lanesum(1)
    return t


def bounded(x, m):
    """mandelbrot's shape: a counter bounds the trips, the lanes leave by a break."""
    i = 0
    while i < m:
        if x > 1e6:
            break
        x = x * 1.5 + 0.25
        i += 1
    return i


def two_loops(n):
    t = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        t += 1
    u = 0
    while t > 0:
        t = t // 3
        u += 1
    return u


def test_cross_lane_op_in_the_loop_keeps_lockstep():
    x = np.arange(1, 200, dtype=np.int64)
    cpu, ref = both(with_lanesum, (x,), ("n",))
    same(cpu(x), ref(x))
    assert "; hydra: persistent lanes" not in phases(cpu, x)
    assert "host step" in cpu.dump_ir("llvm", x)


def test_loop_bounded_by_a_counter_keeps_lockstep():
    x = np.linspace(0.0, 1000.0, 300)
    cpu, ref = both(bounded, (x, 50), ("x",))
    same(cpu(x, 50), ref(x, 50))
    assert phases(cpu, x, 50) == ["; hydra: lockstep gangs (a counter bounds the loop's trips)"]


def test_two_top_level_loops_keep_lockstep():
    x = np.arange(1, 300, dtype=np.int64)
    cpu, ref = both(two_loops, (x,), ("n",))
    same(cpu(x), ref(x))
    assert phases(cpu, x) == ["; hydra: lockstep gangs (more than one top-level loop)"]


def test_sync_point_after_the_loop_splits_it_off():
    def total(n):
        t = collatz(n)
        return t + lanesum(t)
    x = np.arange(1, 500, dtype=np.int64)
    cpu, ref = both(total, (x,), ("n",))
    same(cpu(x), ref(x))
    assert phases(cpu, x)[0] == "; hydra: persistent lanes"


def test_switch_off(monkeypatch):
    monkeypatch.setenv("HYDRA_CPU_PERSISTENT", "0")
    x = np.arange(1, 100, dtype=np.int64)
    k = hydra.compile(collatz, varying=("n",))
    assert phases(k, x) == ["; hydra: lockstep gangs (HYDRA_CPU_PERSISTENT=0)"]


def test_utilization_counters():
    x = np.arange(1, 3001, dtype=np.int64)
    lock = lane_counters.utilization(collatz, (x,), ("n",), persistent_lanes=False)
    pers = lane_counters.utilization(collatz, (x,), ("n",), persistent_lanes=True)
    # the same work: every lane's trips, counted once
    assert lock["active"] == pers["active"] == sum(collatz(int(v)) for v in x)
    assert lock["refills"] == 0 < pers["refills"]
    assert pers["utilization"] > lock["utilization"] + 0.2


def trip_branch(n):
    t = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        t += 1
        if t % 16 == 0:  # a uniform branch in lockstep: all lanes are at trip t
            n = n + 0 * t
    return t


def test_branch_on_the_trip_count_keeps_lockstep():
    x = np.arange(1, 400, dtype=np.int64)
    cpu, ref = both(trip_branch, (x,), ("n",))
    same(cpu(x), ref(x))
    assert phases(cpu, x) == ["; hydra: lockstep gangs (a branch depends on the loop's "
                              "trip count)"]


def mixed(n, f: np.float32):
    t = 0
    big = n > 1000
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        t += 1
    return t > 50, f * np.float32(t), big, np.int32(t)


@pytest.mark.parametrize("n", [1, 7, 33, 2000])
def test_results_of_several_types(n):
    x = np.arange(1, n + 1, dtype=np.int64) * 3
    f = np.linspace(0, 1, n).astype(np.float32)
    cpu, ref = both(mixed, (x, f), ("n", "f"), threads=2)
    same(cpu(x, f), ref(x, f))
    assert phases(cpu, x, f) == ["; hydra: persistent lanes"]
