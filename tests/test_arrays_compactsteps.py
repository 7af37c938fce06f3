"""Planned steps of compacted loop regions on the cpu backend (hydra/executor/
rowsteps.py): against the per-example function run example by example, the numpy
backend, and the cpu kernel with the steps run one by one (a policy with
``plan_steps=False``), which must give the same bits; errors name the same file, line and lane."""

import numpy as np
import pytest
from arrays_oracle import check

import hydra
from hydra.executor import compact
from hydra.executor.policy import Policy
from hydra.executor import rowsteps as compactsteps

f32 = np.float32


@pytest.fixture(autouse=True)
def counts():
    compact.COUNTS.clear()
    return compact.COUNTS


def unplanned(fn, varying, args, monkeypatch, backend="cpu", **policy):
    return hydra.compile(fn, varying=varying, backend=backend,
                         compaction=Policy(plan_steps=False, **policy))(*args)


def same(got, want, exact=True):
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def rnn_one(xs, n, Wx, Wh, b):
    h = np.zeros(Wh.shape[0], dtype=np.float32)
    for t in range(n):
        h = np.tanh(Wx @ xs[t] + Wh @ h + b)
    return h


def lengths(n, kind, top=9, seed=0):
    r = np.random.default_rng(seed)
    if kind == "equal":
        return np.full(n, 5)
    out = r.integers(0, top + 1, n)
    out[: min(n, 4)] = [top, 0, 1, top][: min(n, 4)]  # the longest, an empty sequence
    return out


def rnn_args(n, kind, seed=0, hidden=6, width=5):
    r = np.random.default_rng(seed)
    return [r.standard_normal((n, 9, width)).astype(f32), lengths(n, kind),
            r.standard_normal((hidden, width)).astype(f32),
            (r.standard_normal((hidden, hidden)) * .3).astype(f32),
            r.standard_normal(hidden).astype(f32)]


@pytest.mark.parametrize("kind", ["ragged", "equal"])
def test_ragged_rnn_runs_the_planned_steps(n, kind, counts, monkeypatch):
    args = rnn_args(n, kind)
    got = check(rnn_one, ("xs", "n"), args, n, "cpu")
    planned = dict(counts)
    same(got, hydra.compile(rnn_one, varying=("xs", "n"), backend="numpy")(*args),
         exact=False)
    same(got, unplanned(rnn_one, ("xs", "n"), args, monkeypatch))
    if planned.get("loops"):
        # every step of the compacted loop: one take of xs[t]'s rows, both products
        # unmasked, the select passed on, tanh over the fused chain's result in place
        steps = int(args[1].max() - args[1].min())  # compacted from t = min(n) on
        assert planned["taken"] == planned["in place"] == planned["passed"] == steps
        assert planned["unmasked"] == 2 * steps
    else:  # every lane as long as the others (or one lane): nothing to compact
        assert kind == "equal" or n == 1


def hazards(xs, n, Wx, Wh, b):
    h = np.zeros(Wh.shape[0], dtype=np.float32)
    prev = xs[0] * f32(0.0)
    p = np.zeros(Wh.shape[0], dtype=np.float32)
    z = np.zeros(Wh.shape[0], dtype=np.float32)
    tail = xs[0][1:] * f32(0.0)
    for t in range(n):
        cur = xs[t]
        q = Wx @ cur
        # the last step's row and product, read after this step's are made
        z = q + Wh @ h + b + f32(0.5) * (Wx @ prev) - f32(0.25) * p
        p = q                     # a product the loop carries (and returns)
        h = np.tanh(z)            # z is read after tanh too
        if h.sum() > 0.0:         # a varying branch inside the compacted body
            h = h * f32(0.5) + np.tanh(Wh @ h)
        prev = cur                # a gathered row the loop carries out
        tail = xs[t][1:]          # a view of a gathered row
    return h, prev, p, z, tail


def test_values_that_outlive_a_step_get_no_reused_buffer(n, counts, monkeypatch):
    """Rows, products and chain results that the loop carries out (or that another op
    reads) must not share a buffer or be overwritten by the next step."""
    args = rnn_args(n, "ragged", seed=3)
    got = check(hazards, ("xs", "n"), args, n, "cpu")
    same(got, hydra.compile(hazards, varying=("xs", "n"), backend="numpy")(*args),
         exact=False)
    same(got, unplanned(hazards, ("xs", "n"), args, monkeypatch))
    assert not counts["in place"]  # z is read after tanh: tanh makes a fresh array


def test_rows_not_all_active_take_the_general_path(counts, monkeypatch):
    """Unsorted lanes that are never gathered again: the compacted set keeps rows
    whose lane has left, so the mask is not all true and nothing is unmasked."""
    policy = {"sort": False, "regather_below": 0.0}
    n = 64
    args = rnn_args(n, "ragged", seed=5)
    got = check(rnn_one, ("xs", "n"), args, n, "cpu", compaction=Policy(**policy))
    assert counts["loops"] == 1 and counts["unmasked"] < 2 * (int(args[1].max()) - 1)
    same(got, unplanned(rnn_one, ("xs", "n"), args, monkeypatch, **policy))


def varying_index(xs, n, W, bad):
    h = np.zeros(W.shape[0], dtype=np.float32)
    for t in range(n):
        h = np.tanh(W @ xs[t] + h)
        h = h + xs[t, t * bad]    # out of bounds (axis 1, size 4) from t = 4 where bad
    return h


def uniform_index(xs, n, W, off):
    h = np.zeros(W.shape[0], dtype=np.float32)
    for t in range(n):
        h = np.tanh(W @ xs[t + off] + h)
    return h


def error_of(fn, varying, args, backend, monkeypatch=None):
    with pytest.raises(hydra.HydraError) as e:
        if monkeypatch is None:
            hydra.compile(fn, varying=varying, backend=backend)(*args)
        else:
            unplanned(fn, varying, args, monkeypatch, backend)
    return type(e.value), str(e.value)


@pytest.mark.parametrize("lanes", [3, 17, 64])
def test_an_error_in_a_planned_step_names_the_original_lane(lanes, counts, monkeypatch):
    r = np.random.default_rng(11)
    steps = r.integers(0, 4, lanes)   # most lanes leave before t = 4
    bad = np.zeros(lanes, np.int64)
    steps[[1, lanes - 1]] = 9
    bad[[1, lanes - 1]] = 1           # both fail at t = 4; lane 1 is named
    steps[0] = 2                      # leaves first: the loop compacts at t = 2
    steps[lanes // 2] = max(steps[lanes // 2], 5 if lanes > 3 else 0)
    args = [r.standard_normal((lanes, 9, 4)).astype(f32), steps,
            (r.standard_normal((4, 4)) / 2).astype(f32), bad]
    varying = ("xs", "n", "bad")
    kind, message = error_of(varying_index, varying, args, "cpu")
    assert counts["loops"] == 1 and counts["taken"]
    assert issubclass(kind, IndexError) and "lane 1" in message and "index 4" in message
    assert (kind, message) == error_of(varying_index, varying, args, "numpy")
    assert (kind, message) == error_of(varying_index, varying, args, "cpu", monkeypatch)


@pytest.mark.parametrize("lanes", [1, 17])
def test_a_uniform_index_out_of_bounds_in_a_planned_gather(lanes, counts, monkeypatch):
    r = np.random.default_rng(12)
    steps = np.where(np.arange(lanes) % 2 == 0, 9, 2)  # xs[t + 3] fails at t = 6
    args = [r.standard_normal((lanes, 9, 4)).astype(f32), steps,
            (r.standard_normal((4, 4)) / 2).astype(f32), 3]
    kind, message = error_of(uniform_index, ("xs", "n"), args, "cpu")
    assert issubclass(kind, IndexError) and "index 9 is out of bounds" in message
    assert (kind, message) == error_of(uniform_index, ("xs", "n"), args, "numpy")
    assert (kind, message) == error_of(uniform_index, ("xs", "n"), args, "cpu", monkeypatch)


def test_scratch_buffers_are_kept_per_thread_and_bounded(monkeypatch):
    import threading
    monkeypatch.setattr(compactsteps, "_SCRATCH", threading.local())
    args = rnn_args(64, "ragged", seed=8)
    k = hydra.compile(rnn_one, varying=("xs", "n"), backend="cpu")
    first = k(*args)
    bufs = compactsteps._SCRATCH.bufs
    kept = {key: b for key, b in bufs.items()}
    assert kept and all(len(b) <= 64 for b in kept.values())
    same(k(*args), first)  # the second call reuses them
    assert all(bufs[key] is b for key, b in kept.items())
    seen = {}

    def other():
        seen["out"] = k(*args)
        seen["bufs"] = dict(compactsteps._SCRATCH.bufs)
    th = threading.Thread(target=other)
    th.start()
    th.join()
    same(seen["out"], first)
    assert seen["bufs"].keys() == kept.keys()
    assert not any(seen["bufs"][key] is b for key, b in kept.items())  # its own
    monkeypatch.setattr(compactsteps, "KEEP", 1)
    monkeypatch.setattr(compactsteps, "_SCRATCH", threading.local())
    same(k(*args), first)  # each buffer pushes out the other: made again every step
    assert len(compactsteps._SCRATCH.bufs) <= 1
    monkeypatch.setattr(compactsteps, "KEEP", 32)
    monkeypatch.setattr(compactsteps, "KEEP_BYTES", 64 * 6 * 4)  # one 64 x 6 buffer
    monkeypatch.setattr(compactsteps, "_SCRATCH", threading.local())
    same(k(*args), first)
    assert sum(b.nbytes for b in compactsteps._SCRATCH.bufs.values()) <= 64 * 6 * 4
