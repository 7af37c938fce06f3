"""Compaction per loop region (hydra/executor/compact.py, SPEC section 8): varying loops
with heavy per-lane array work run on their active lanes' rows, against the per-example
function run example by example, the numpy backend (which never compacts), and the same
kernel with region compaction switched off; the counters show which path ran."""

import numpy as np
import pytest
from arrays_oracle import RTOL, ATOL, check

import hydra
from hydra import broadcast, lane, lanesum, nlanes
from hydra.executor import compact
from hydra.executor.policy import AUTO, Policy

f32 = np.float32


@pytest.fixture(params=["cpu"])
def be(request) -> str:
    """The backends that compact: the numpy reference never does (it is what each test
    here compares the compacted results with)."""
    return request.param


@pytest.fixture(autouse=True)
def counts():
    compact.COUNTS.clear()
    return compact.COUNTS


def run(fn, varying, args, backend, region=True, monkeypatch=None):
    """The kernel's result; ``region=False`` switches region compaction off."""
    policy = AUTO if region else Policy(loop_below=0.0)
    return hydra.compile(fn, varying=varying, backend=backend, compaction=policy)(*args)


def same(got, want, exact=False):
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        if exact or np.asarray(w).dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)


def lengths(n, top=9, seed=0):
    """Trip counts that differ between lanes (0 included), so lanes leave one by one."""
    r = np.random.default_rng(seed)
    out = r.integers(0, top + 1, n)
    out[: min(n, 3)] = [top, 1, top][: min(n, 3)]
    return out


# --- carried arrays and scalars, values read after the loop ------------------------------

def rnn_count(xs, n, Wx, Wh, b):
    h = np.zeros(Wh.shape[0], dtype=np.float32)
    steps = 0
    big = 0.0
    for t in range(n):
        h = np.tanh(Wx @ xs[t] + Wh @ h + b)
        steps += 1
        big = max(big, float(h.max()))
    return h * 2.0, steps, big, n - steps


def rnn_args(n, seed=0):
    r = np.random.default_rng(seed)
    return [r.standard_normal((n, 9, 5)).astype(f32), lengths(n),
            r.standard_normal((6, 5)).astype(f32), (r.standard_normal((6, 6)) * .3).astype(f32),
            r.standard_normal(6).astype(f32)]


def test_varying_trip_counts_carry_arrays_and_scalars(be, n, counts, monkeypatch):
    args = rnn_args(n)
    got = check(rnn_count, ("xs", "n"), args, n, be)
    if n > 1:
        assert counts["loops"] == 1, counts
        assert counts["sorted"] == 1, counts  # range(n): ordered by trip count
        assert counts["prefix"] > 0 or n < 17, counts  # ... so every shrink is a slice
        assert counts["gathers"] == 0, counts
    same(got, run(rnn_count, ("xs", "n"), args, "numpy"))
    same(got, run(rnn_count, ("xs", "n"), args, be, region=False, monkeypatch=monkeypatch))


def test_a_loop_with_every_lane_active_does_not_compact(be, counts):
    args = rnn_args(17)
    args[1][:] = 6
    check(rnn_count, ("xs", "n"), args, 17, be)
    assert counts["loops"] == 0


def test_unsorted_order_gives_the_same_results(be, monkeypatch, counts):
    args = rnn_args(64)
    sorted_ = run(rnn_count, ("xs", "n"), args, be)
    counts.clear()
    plain = hydra.compile(rnn_count, varying=("xs", "n"), backend=be,
                          compaction=Policy(sort=False))(*args)
    assert counts["loops"] == 1 and counts["sorted"] == 0
    same(plain, sorted_)


# --- break and early return inside the loop --------------------------------------------

def early_exit(x, Ws, bs, Wc, bc, thr):
    h = x
    for l in range(Ws.shape[0]):  # noqa: E741 (ML.md's own spelling)
        h = h + np.maximum(Ws[l] @ h + bs[l], 0.0)
        z = Wc @ h + bc
        e = np.exp(z - z.max())
        conf = e.max() / e.sum()
        if conf > thr:
            break
    return z, l + 1, h


def early_args(n, seed=1, layers=6):
    r = np.random.default_rng(seed)
    return [r.standard_normal((n, 8)).astype(f32),
            (r.standard_normal((layers, 8, 8)) / 3).astype(f32),
            r.standard_normal((layers, 8)).astype(f32), r.standard_normal((3, 8)).astype(f32),
            r.standard_normal(3).astype(f32), r.uniform(0.3, 0.95, n).astype(f32)]


def test_break_inside_a_compacted_loop(be, n, counts, monkeypatch):
    args = early_args(n)
    got = check(early_exit, ("x", "thr"), args, n, be)
    depth = got[1]
    if len(set(depth.tolist())) > 2:  # lanes left at several layers: it compacted
        assert counts["loops"] == 1, counts
    assert counts["sorted"] == 0  # the break decides the trip count: nothing to sort by
    same(got, run(early_exit, ("x", "thr"), args, "numpy"))
    same(got, run(early_exit, ("x", "thr"), args, be, region=False, monkeypatch=monkeypatch))


def search(x, W, stop, limit):
    h = x
    for i in range(limit):
        h = np.tanh(W @ h)
        if h.sum() > stop:
            return h, i
    return -h, -1


def test_early_return_inside_a_compacted_loop(be, n, counts):
    r = np.random.default_rng(4)
    args = [r.standard_normal((n, 6)).astype(f32), r.standard_normal((6, 6)).astype(f32),
            r.uniform(-2, 2, n).astype(f32), 12]
    got = check(search, ("x", "stop"), args, n, be)
    if len(set(got[1].tolist())) > 2:
        assert counts["loops"] >= 1, counts


# --- nested loops ----------------------------------------------------------------------

def nested(xs, n, W):
    h = np.zeros(W.shape[0], dtype=np.float32)
    total = 0
    for t in range(n):
        g = xs[t]
        k = 0
        while k < t % 3 + (n % 2):
            g = np.tanh(W @ g)
            k += 1
            total += 1
        h = h + g
    return h, total


def test_nested_loops(be, n, counts, monkeypatch):
    r = np.random.default_rng(5)
    args = [r.standard_normal((n, 9, 4)).astype(f32), lengths(n),
            (r.standard_normal((4, 4)) / 2).astype(f32)]
    got = check(nested, ("xs", "n"), args, n, be)
    if n >= 17:  # the outer loop, and inner ones inside the compacted outer one
        assert counts["loops"] >= 2, counts
    same(got, run(nested, ("xs", "n"), args, be, region=False, monkeypatch=monkeypatch))


# --- what observes lanes: lane(), nlanes(), errors, stores, cross-lane reductions --------

def lane_ids(xs, n, W, out):
    h = np.zeros(W.shape[0], dtype=np.float32)
    seen = 0
    for t in range(n):
        h = np.tanh(W @ xs[t] + h) + lane()
        seen = seen * 0 + lane() * 1000 + nlanes()
        out[lane(), t] = h.sum()  # a store through a lane-indexed address
    return h, seen


def test_lane_nlanes_and_lane_indexed_stores_keep_the_original_lanes(be, n, counts,
                                                                        monkeypatch):
    r = np.random.default_rng(6)
    xs = r.standard_normal((n, 9, 4)).astype(f32)
    W = (r.standard_normal((4, 4)) / 2).astype(f32)
    steps = lengths(n)
    out = np.zeros((n, 9), f32)
    h, seen = run(lane_ids, ("xs", "n"), [xs, steps, W, out], be)
    if n > 1:
        assert counts["loops"] == 1 and counts["sorted"] == 0, counts  # a store: no sort
    want_h, want_out = np.zeros((n, 4), f32), np.zeros((n, 9), f32)
    for i in range(n):
        for t in range(steps[i]):
            want_h[i] = np.tanh(W @ xs[i, t] + want_h[i]) + f32(i)
            want_out[i, t] = want_h[i].sum()
    np.testing.assert_allclose(h, want_h, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(out, want_out, rtol=RTOL, atol=1e-4)
    np.testing.assert_array_equal(seen, np.where(steps > 0, np.arange(n) * 1000 + n, 0))
    out2 = np.zeros((n, 9), f32)
    same((h, seen), run(lane_ids, ("xs", "n"), [xs, steps, W, out2], be, region=False,
                        monkeypatch=monkeypatch), exact=True)
    np.testing.assert_array_equal(out, out2)


def divide(xs, n, W, stop):
    h = np.zeros(W.shape[0], dtype=np.float32)
    q = 0
    for t in range(n):
        h = np.tanh(W @ xs[t] + h)
        q += 100 // (stop - t)
    return h, q


@pytest.mark.parametrize("region", [True, False])
def test_an_error_inside_a_compacted_loop_names_the_original_lane(be, counts, region,
                                                                  monkeypatch):
    n = 17
    r = np.random.default_rng(7)
    steps = np.array([9, 1, 2, 3, 9, 9, 1, 9, 2, 9, 9, 3, 9, 9, 9, 2, 9])
    stop = np.full(n, 100)
    stop[[9, 13]] = 6  # both fail at t = 6, after lanes 1, 2, 3, 6, 8, 11, 15 have left
    args = [r.standard_normal((n, 9, 4)).astype(f32), steps,
            (r.standard_normal((4, 4)) / 2).astype(f32), stop]
    with pytest.raises(ZeroDivisionError) as e:
        run(divide, ("xs", "n", "stop"), args, be, region=region, monkeypatch=monkeypatch)
    assert "integer division by zero" in str(e.value)
    assert "lane 9" in str(e.value)  # the first failing lane, as without compaction
    assert counts["loops"] == (1 if region else 0)


def active_mean(xs, n, W):
    h = np.zeros(W.shape[0], dtype=np.float32)
    trace = 0.0
    for t in range(n):
        h = np.tanh(W @ xs[t] + h)
        trace += lanesum(h.sum()) / lanesum(1)
    return h, trace


def test_cross_lane_reductions_see_the_active_lanes(be, counts, monkeypatch):
    n = 17
    r = np.random.default_rng(8)
    xs = r.standard_normal((n, 9, 4)).astype(f32)
    W = (r.standard_normal((4, 4)) / 2).astype(f32)
    steps = lengths(n)
    h, trace = run(active_mean, ("xs", "n"), [xs, steps, W], be)
    assert counts["loops"] == 1 and counts["sorted"] == 0, counts
    want_h = np.zeros((n, 4), f32)
    want_trace = np.zeros(n)
    for t in range(steps.max()):
        on = steps > t
        want_h[on] = np.tanh(want_h[on] + xs[on, t] @ W.T)
        want_trace[on] += want_h[on].sum() / on.sum()
    np.testing.assert_allclose(h, want_h, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(trace, want_trace, rtol=1e-4, atol=1e-4)
    # stable compaction: the active lanes in lane order, so the same sums bit for bit
    same((h, trace), run(active_mean, ("xs", "n"), [xs, steps, W], be, region=False,
                         monkeypatch=monkeypatch), exact=True)


# --- loops the rule leaves masked ------------------------------------------------------

def write_own(x, n, W):
    out = np.zeros(9, dtype=np.float32)
    for t in range(n):
        out[t] = (W @ x)[0] + t
    return out


def write_view(xs, n, W):
    for t in range(n):
        v = xs[t]  # a view of the caller's array: the write below lands there
        v[0] = (W @ v)[0]
    return n


def read_neighbour(x, n, W):
    h = x
    for _t in range(n):
        h = np.tanh(W @ h) + broadcast(h.sum(), 0)  # lane 0 runs longest
    return h


def test_loops_that_write_outer_arrays_or_read_other_lanes_stay_masked(be, counts):
    r = np.random.default_rng(9)
    n = 17
    args = [r.standard_normal((n, 4)).astype(f32), lengths(n),
            r.standard_normal((4, 4)).astype(f32)]
    check(write_own, ("x", "n"), args, n, be)
    assert counts["loops"] == 0  # out is created before the loop: a copy would not alias
    xs = r.standard_normal((n, 9, 4)).astype(f32)
    want = xs.copy()
    for i in range(n):
        write_view(want[i], args[1][i], args[2])
    hydra.compile(write_view, varying=("xs", "n"), backend=be)(xs, args[1], args[2])
    assert counts["loops"] == 0
    np.testing.assert_allclose(xs, want, rtol=RTOL, atol=ATOL)
    got = hydra.compile(read_neighbour, varying=("x", "n"), backend=be)(*args)
    assert counts["loops"] == 0  # broadcast reads a lane by its index
    want = args[0].copy()
    for t in range(args[1].max()):
        on = args[1] > t
        want[on] = np.tanh(want[on] @ args[2].T) + want[0].sum()
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_ml_examples_take_the_compacted_path(counts):
    """The RNN of ML.md sorts by length and shrinks by slices; early exit gathers."""
    from test_arrays_flow import early_args as ee_args
    from test_arrays_flow import early_exit_one, rnn_one
    from test_arrays_flow import rnn_args as r_args
    check(rnn_one, ("xs", "n"), r_args(64), 64, "cpu")
    assert counts["sorted"] == 1 and counts["prefix"] > 0 and counts["gathers"] == 0
    counts.clear()
    check(early_exit_one, ("x", "thr"), ee_args(64), 64, "cpu")
    assert counts["loops"] == 1 and counts["gathers"] > 0 and counts["sorted"] == 0


def printing(xs, n, W):
    h = np.zeros(W.shape[0], dtype=np.float32)
    for t in range(n):
        h = np.tanh(W @ xs[t] + h)
        if t % 4 == 3:
            print("lane", lane(), "step", t)
    return h


def test_print_inside_a_compacted_loop_keeps_lane_order(be, counts, capsys, monkeypatch):
    n = 17
    r = np.random.default_rng(10)
    args = [r.standard_normal((n, 9, 4)).astype(f32), lengths(n),
            (r.standard_normal((4, 4)) / 2).astype(f32)]
    run(printing, ("xs", "n"), args, be)
    assert counts["loops"] == 1 and counts["sorted"] == 0, counts  # print: lane order
    got = capsys.readouterr().out
    want = "".join(f"lane {i} step {t}\n" for t in (3, 7) for i in range(n) if args[1][i] > t)
    assert got == want
    run(printing, ("xs", "n"), args, be, region=False, monkeypatch=monkeypatch)
    assert capsys.readouterr().out == want


# --- the compaction option ------------------------------------------------------------------

def test_compaction_off_runs_masked_and_gives_the_same_results(be, counts):
    args = rnn_args(17)
    got = hydra.compile(rnn_count, varying=("xs", "n"), backend=be)(*args)
    assert counts["loops"] == 1
    counts.clear()
    off = hydra.compile(rnn_count, varying=("xs", "n"), backend=be, compaction="off")(*args)
    assert not counts
    same(off, got)


def test_the_reference_never_compacts(counts):
    args = rnn_args(17)
    forced = Policy(op_below=1.01, loop_below=1.01)
    hydra.compile(rnn_count, varying=("xs", "n"), backend="numpy", compaction=forced)(*args)
    assert not counts


@pytest.mark.parametrize("value,error,message", [
    ("sometimes", ValueError, "compaction must be 'auto' or 'off', not 'sometimes'"),
    (0.5, TypeError, "compaction must be 'auto', 'off' or a hydra.executor.policy.Policy, "
                     "not float")])
def test_a_compaction_option_of_another_value_is_refused(value, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace(".", r"\.")):
        hydra.compile(rnn_count, varying=("xs", "n"), compaction=value)
