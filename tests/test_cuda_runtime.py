"""What is particular to the cuda backend: grids for any N, device arrays without
copies, the two strategies (one kernel, host-driven phases), lockstep prints, errors
from the error buffer, and its dump-ir stages.  All on the simulator here."""

import numpy as np
import pytest

import hydra
from hydra import broadcast, lane, lanemax, lanesum, nlanes, prefixsum, shuffle
from hydra.backends import available

pytestmark = pytest.mark.skipif(not available("cuda"), reason="numba.cuda unusable here")

TABLE = np.array([10, 20, 30])
FROZEN = np.arange(4.0)
FROZEN.flags.writeable = False


def scaled(x, out, k):
    i = lane()
    out[i] = x * k + nlanes()
    return x * 2, k + 1


def strategy_of(fn, *args, varying=("x",)):
    """The runner the backend chose for these arguments."""
    kern = hydra.compile(fn, varying=varying, backend="cuda")
    _, types = kern.signature(args)
    return kern.specialize(types)[1].strategy


@pytest.mark.parametrize("n", [1, 31, 32, 33, 129, 300])
def test_grid_covers_any_lane_count(n):
    out = np.zeros(n)
    doubled, k1 = hydra.compile(scaled, varying="x", backend="cuda")(np.arange(n) * 1.5, out, 3.0)
    np.testing.assert_array_equal(doubled, np.arange(n) * 3.0)
    np.testing.assert_array_equal(out, np.arange(n) * 4.5 + n)
    assert k1 == 4.0 and isinstance(k1, float)


@pytest.mark.filterwarnings("ignore::hydra.HydraWarning")  # varying_sync's race is meant
def test_lane_local_code_is_one_kernel_and_sync_points_make_phases():
    assert strategy_of(scaled, np.arange(4.0), np.zeros(4), 1.0) == "one kernel"
    assert strategy_of(heavy, np.arange(4), np.arange(4.0)) == "segments"
    assert strategy_of(varying_sync, np.arange(4), np.zeros(5, np.int64)) == "phases"


def test_device_arrays_are_used_without_copies():
    from numba import cuda
    kern = hydra.compile(scaled, varying="x", backend="cuda")
    x = np.arange(40.0)
    _, types = kern.signature((x, np.zeros(40), 2.0))
    _, runner = kern.specialize(types)
    dx, dout = cuda.to_device(x), cuda.to_device(np.zeros(40))
    doubled, k1 = runner([dx, dout, np.float64(2.0)], 40)
    np.testing.assert_array_equal(dout.copy_to_host(), x * 2 + 40)  # written on the device
    np.testing.assert_array_equal(doubled, x * 2)


def ranked(x):
    below = prefixsum(x)
    total = lanesum(x)
    return below, total, shuffle(x, (lane() + 1) % nlanes())


def varying_sync(x, a):
    s = 0
    i = 0
    while i < x:  # a varying loop with sync points inside: driven from the host
        s += lanesum(i)
        a[(lane() + i) % 5] += 1
        i += 1
    return s


@pytest.mark.filterwarnings("ignore::hydra.HydraWarning")  # lanes racing on a[...] += 1
@pytest.mark.parametrize("n", [1, 5, 40])
def test_sync_points_inside_varying_loops(n):
    x = np.arange(n) % 4
    a, b = np.zeros(5, np.int64), np.zeros(5, np.int64)
    want = hydra.compile(varying_sync, varying="x", backend="numpy")(x, a)
    got = hydra.compile(varying_sync, varying="x", backend="cuda")(x, b)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(b, a)


def heavy(x, a):
    s = 0.0
    i = 0
    while i < x:  # a varying loop, no sync point inside: one segment kernel
        s += a[i % 4] * 0.5
        i += 1
    k = 0
    if a[0] < 1:  # a uniform branch whose value the host needs next
        k = nlanes() - 1
    t = lanesum(s) + broadcast(s, k)
    print("lane", lane(), i)
    if s > 1:
        s = s * 2
    return s / t, lanemax(i), k


@pytest.mark.parametrize("n", [1, 7, 40])
def test_sync_points_between_structured_segments(n, capsys):
    args = (np.arange(n) * 3, np.arange(4.0))
    want = hydra.compile(heavy, varying="x", backend="numpy")(*args)
    printed = capsys.readouterr().out
    got = hydra.compile(heavy, varying="x", backend="cuda")(*args)
    assert capsys.readouterr().out == printed
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w, strict=True)


def rounds(x, n):
    total = 0.0
    for r in range(n):  # a uniform loop the host drives, a sync point inside
        s = 0.0
        j = 0
        while j < x + r:  # varying: inside one segment kernel
            s += j * 0.25
            j += 1
        if n > 2:
            print("round", r, s)
        total += lanesum(s) - s
    return total


@pytest.mark.parametrize("n", [1, 3])
def test_sync_points_in_uniform_loops_keep_varying_loops_in_kernels(n, capsys):
    x = np.arange(9) % 5
    want = hydra.compile(rounds, varying="x", backend="numpy")(x, n)
    printed = capsys.readouterr().out
    got = hydra.compile(rounds, varying="x", backend="cuda")(x, n)
    assert capsys.readouterr().out == printed
    np.testing.assert_array_equal(got, want, strict=True)
    assert strategy_of(rounds, x, n) == "segments"


def nested_store(x, n, out):
    if n > 2:
        print("n", n)
        if n > 3:
            return 0
    if x > 1:
        out[lane()] = x * n  # a store nested in a branch of a segment kernel
    return 1


def test_stores_nested_in_segment_kernels_land():
    for n in (3, 4):
        want, got = np.full(4, -7), np.full(4, -7)
        hydra.compile(nested_store, varying="x", backend="numpy")(np.arange(4), n, want)
        hydra.compile(nested_store, varying="x", backend="cuda")(np.arange(4), n, got)
        np.testing.assert_array_equal(got, want)


def sized(x, n):
    buf = np.zeros(n)  # a per-lane array whose size is known only at run time
    for j in range(n):
        buf[j] = x + j
    return buf[n - 1] + buf[0]


def sized_and_summed(x, n):
    s = lanesum(x)
    return sized(x, n) + s


def test_per_lane_arrays_of_run_time_size():
    got = hydra.compile(sized, varying="x", backend="cuda")(np.arange(6.0), 4)
    np.testing.assert_array_equal(got, np.arange(6.0) * 2 + 3)
    got = hydra.compile(sized_and_summed, varying="x", backend="cuda")(np.arange(6.0), 4)
    np.testing.assert_array_equal(got, np.arange(6.0) * 2 + 3 + 15)


def talk(x):
    if x % 2 == 0:
        print("even", lane(), x)
    print("all", x * 10, sep="|", end=";\n")


def test_prints_come_out_in_lane_order_per_statement(capsys):
    hydra.compile(talk, varying="x", backend="cuda")(np.array([4, 1, 2, 7, 6]))
    assert capsys.readouterr().out == ("even 0 4\neven 2 2\neven 4 6\n"
                                       "all|40;\nall|10;\nall|20;\nall|70;\nall|60;\n")


def looped(x, out):
    i = 0
    while i < 10:
        out[lane()] = i
        if i == x:
            assert x < 3, "too far"
        i += 1


def test_errors_name_the_failing_lane_and_leave_arrays_as_the_reference_does():
    out = np.full(8, -1)
    x = np.array([15, 15, 0, 20, 15, 4, 15, 5])
    k = hydra.compile(looped, varying="x", backend="cuda")
    with pytest.raises(AssertionError, match=r"too far \(lane 5\)") as info:
        k(x, out)
    assert isinstance(info.value, hydra.HydraError) and info.value.lane == 5
    want = np.full(8, -1)
    with pytest.raises(AssertionError):
        hydra.compile(looped, varying="x", backend="numpy")(x, want)
    np.testing.assert_array_equal(out, want)
    k(np.array([0, 1, 2]), out[:3])
    np.testing.assert_array_equal(out[:3], [9, 9, 9])
    # the error buffer is reused while launches succeed and renewed after a failure
    for _ in range(2):
        k(np.array([15, 0, 1, 2, 15, 0, 1, 2]), out)
    with pytest.raises(AssertionError, match=r"\(lane 2\)"):
        k(np.array([15, 15, 7, 15, 15, 15, 15, 15]), out)
    k(np.array([15, 0, 1, 2, 15, 0, 1, 2]), out)


def late_and_early(x, out):
    i = 0
    while i < 4:
        if i == 3:
            assert x != 1, "lane one"  # source first, lockstep later
        if i == 1:
            assert x != 2, "lane two"
        out[lane()] = i
        i += 1


def test_lanes_failing_at_different_statements_fail_in_lockstep_order():
    for backend in ("numpy", "cuda"):
        out = np.full(4, -1)
        with pytest.raises(AssertionError, match=r"lane two \(lane 2\)"):
            hydra.compile(late_and_early, varying="x", backend=backend)(np.arange(4), out)
        # as the reference: the stores before the failing statement landed
        np.testing.assert_array_equal(out, [0, 0, 0, 0])


def lookup(x):
    return TABLE[x]


def write_frozen(x):
    FROZEN[0] = x


@pytest.mark.parametrize("bad, shown", [(3, "index 3 is out of bounds for axis 0 with size 3"),
                                        (-4, "index -4 is out of bounds")])
def test_captured_array_bounds(bad, shown):
    k = hydra.compile(lookup, varying="x", backend="cuda")
    np.testing.assert_array_equal(k(np.array([0, -1, 2])), [10, 30, 30])
    with pytest.raises(IndexError, match=shown + r".*\(lane 1\)"):
        k(np.array([0, bad, 1]))


def test_store_into_a_read_only_captured_array_is_the_reference_error():
    for backend in ("numpy", "cuda"):
        with pytest.raises(ValueError, match="read-only") as info:
            hydra.compile(write_frozen, varying="x", backend=backend)(np.array([1.0, 2.0]))
        assert isinstance(info.value, hydra.HydraError)


def test_boundscheck_false_drops_the_checks_but_not_negative_wrapping():
    k = hydra.compile(lookup, varying="x", backend="cuda", boundscheck=False)
    np.testing.assert_array_equal(k(np.array([2, -1, -3])), [30, 30, 10])
    assert "out of bounds" not in k.dump_ir("numba", np.array([0]))


def test_dump_numba_shows_the_generated_kernels():
    k = hydra.compile(ranked, varying="x", backend="cuda")
    text = k.dump_ir("numba", np.arange(4))
    assert "from hydra.backends.cuda import device as dev" in text
    assert "def phase2_ranked" not in text  # uniform host ops do not cut a phase
    assert "lane = cuda.grid(1)" in text and "if lane >= N:" in text
    assert text == k.dump_ir("numba", np.arange(4))  # stable text


def test_dump_ptx_on_the_simulator_says_there_is_none():
    from numba import config
    if not config.ENABLE_CUDASIM:
        pytest.skip("a real GPU: there is PTX")
    k = hydra.compile(ranked, varying="x", backend="cuda")
    with pytest.raises(hydra.HydraError, match="simulator.*no PTX"):
        k.dump_ir("ptx", np.arange(4))


def test_dump_of_a_lane_local_function_can_show_its_one_kernel():
    from hydra.backends.cuda import CudaBackend
    kern = hydra.compile(scaled, varying="x", backend="cuda")
    _, types = kern.signature((np.arange(3.0), np.zeros(3), 1.0))
    fn, runner = kern.specialize(types)
    text = CudaBackend.dump(fn, "numba", {}, structured=lambda: _structured(kern, types))
    assert "one kernel" in text and "def kernel_scaled(N, p_x, p_out, p_k, out0, out1, err)" in text
    assert "out1[0] = " in text  # the uniform result, written once


def _structured(kern, types):
    from hydra.frontend import build_function
    from hydra.passes import run_pipeline
    return run_pipeline(build_function(kern.pyfunc, list(types)), set(kern.varying),
                        linearized=False)


def test_fastmath_option_is_accepted_and_keeps_results_close():
    x = np.linspace(-3, 3, 9)
    got = hydra.compile(scaled, varying="x", backend="cuda", fastmath=True)(x, np.zeros(9), 0.5)
    np.testing.assert_allclose(got[0], x * 2)
