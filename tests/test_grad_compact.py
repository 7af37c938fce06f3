"""hydra.grad's loops compacted in both sweeps (issue 28 item 2): the forward loop that
pushes to the tape runs on its active lanes' rows (the tape holding only their rows),
and the reverse loop on the rows of the lanes that have joined it (a growing prefix,
``hydra.executor.growing``).  Checked on numpy (which never compacts: the reference)
and cpu against each other and against float64 central differences, with ragged trip
counts (0 trips, lanes that never enter the loop), an early exit (no trip-count sort in
the forward sweep: the reverse pops its blocks in another order), ``checkpoint=K``, and
a lane sum of the gradients."""

import numpy as np
import pytest

import hydra
from hydra import lanesum
from hydra.backends.tape import Tape
from hydra.executor import compact
from hydra.executor.policy import Policy
from tests.gradcheck import check_arrays

BACKENDS = ["numpy", "cpu"]


def ragged(W, U, b, xs, n):
    h = np.zeros(4)
    for t in range(n):
        h = np.tanh(W @ h + U @ xs[t] + b)
    return float(np.sum(h * h))


def gated(W, U, b, xs, n):
    h = np.zeros(4)
    if xs[0, 0] > -0.5:  # some lanes never enter the loop
        for t in range(n):
            h = np.tanh(W @ h + U @ xs[t] + b)
    return float(np.sum(h * h)) + float(np.sum(b * b))


def exits(Ws, c, x, thr):
    h = x
    for l in range(Ws.shape[0]):  # noqa: E741
        h = h + np.maximum(Ws[l] @ h, 0.0)
        if np.sum(h * c) > thr:
            break
    return float(np.sum(np.tanh(h)))


def weights(seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(4, 4)) * 0.5, rng.normal(size=(4, 3)) * 0.5, rng.normal(size=4)


def sequences(lanes, seed=1):
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=(lanes, 9, 3))
    n = rng.integers(0, 10, lanes)
    n[0], n[-1] = 0, 9  # a lane that never runs a trip, one that runs them all
    return xs, n


def counted(fn, backend, varying, args, **options):
    compact.COUNTS.clear()
    out = hydra.compile(fn, varying=varying, backend=backend, **options)(*args)
    return out, dict(compact.COUNTS)


@pytest.mark.parametrize("fn", [ragged, gated])
def test_ragged_loops_compact_in_both_sweeps(fn):
    W, U, b = weights()
    xs, n = sequences(13)
    g = hydra.grad(fn, argnums=(0, 1, 2))
    got, counts = counted(g, "cpu", ("xs", "n"), (W, U, b, xs, n))
    # the forward sweep (in ``gated`` twice: the reverse of an ``if`` recomputes its arm)
    assert counts["loops"] == (1 if fn is ragged else 2) == counts["sorted"]
    assert counts.get("grown") == 1  # the reverse sweep
    want, none = counted(g, "numpy", ("xs", "n"), (W, U, b, xs, n))
    assert none == {}  # the reference never compacts
    for a, r in zip(got, want):
        np.testing.assert_allclose(a, r, rtol=1e-12, atol=1e-14)
    off, counts = counted(g, "cpu", ("xs", "n"), (W, U, b, xs, n), compaction="off")
    assert counts == {}
    for a, r in zip(off, want):
        np.testing.assert_allclose(a, r, rtol=1e-12, atol=1e-14)
    picked = [0, 1, 5, 12]
    check_arrays(fn, tuple(x[picked] for x in got),
                 [(W, U, b, xs[i], int(n[i])) for i in picked], [0, 1, 2])


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_early_exit_pops_its_blocks_in_trip_count_order(backend):
    rng = np.random.default_rng(2)
    Ws, c = rng.normal(size=(6, 4, 4)) * 0.4, rng.normal(size=4)
    x, thr = rng.normal(size=(17, 4)), rng.normal(size=17)
    g = hydra.grad(exits, argnums=(0, 1, 2))
    got, counts = counted(g, backend, ("x", "thr"), (Ws, c, x, thr))
    if backend == "cpu":  # (no trip-count sort forward: the loop exits by a break)
        assert counts.get("loops") == 1 and "sorted" not in counts and counts["grown"] == 1
    picked = [0, 3, 8, 16]
    check_arrays(exits, tuple(a[picked] for a in got),
                 [(Ws, c, x[i], float(thr[i])) for i in picked], [0, 1, 2])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_checkpointed_loop_compacts_and_matches_the_taped_one(backend):
    W, U, b = weights(3)
    xs, n = sequences(11, seed=4)
    taped = hydra.compile(hydra.grad(ragged, argnums=(0, 1, 2)), varying=("xs", "n"),
                          backend="numpy")(W, U, b, xs, n)
    g = hydra.grad(ragged, argnums=(0, 1, 2), checkpoint=4)
    got, counts = counted(g, backend, ("xs", "n"), (W, U, b, xs, n))
    if backend == "cpu":
        # forward: the loop, and the replays of the segments (0-3, 4-7, 8) where a lane
        # leaves (in the last one none does); reverse: its loop and each segment's
        assert counts["loops"] == 1 + 2 == counts["sorted"] and counts["grown"] == 1 + 3
    for a, r in zip(got, taped):
        np.testing.assert_allclose(a, r, rtol=1e-12, atol=1e-14)


def training_step(W, U, b, xs, n):
    loss, (dW, dU, db) = hydra.value_and_grad(ragged, argnums=(0, 1, 2))(W, U, b, xs, n)
    return lanesum(loss), lanesum(dW), lanesum(dU), lanesum(db)


def test_lane_sums_of_the_gradients_over_the_joined_rows():
    """The uniform gradients are lane sums made in the reverse loop over the joined rows
    (in trip-count order: the same values up to the order of the additions)."""
    W, U, b = weights(5)
    xs, n = sequences(40, seed=6)
    n[5:9] = 0
    got, counts = counted(training_step, "cpu", ("xs", "n"), (W, U, b, xs, n),
                          compaction=Policy(regather_below=1.0))
    assert counts["grown"] == 1
    want, _ = counted(training_step, "numpy", ("xs", "n"), (W, U, b, xs, n))
    for a, r in zip(got, want):
        np.testing.assert_allclose(a, r, rtol=1e-12, atol=1e-13)


def test_a_tape_block_pops_on_rows_in_another_order():
    tape = Tape()
    rows = np.arange(12.0).reshape(4, 3)
    # pushed from compacted rows: original lanes 7, 2, 5 (the mask drops row 1)
    tape.push([rows, np.int64(4)], [True, False], np.array([True, False, True, True]),
              ids=np.array([7, 9, 2, 5]))
    tape.push([rows[:2]], [True], np.array([True, True]), ids=np.array([3, 1]))
    (got,) = tape.pop(np.array([True, True]), [np.float64], [(3,)], ids=np.array([3, 1]))
    np.testing.assert_array_equal(got, rows[:2])  # the same order: the block itself
    got, t = tape.pop(np.array([True, False, True, True]), [np.float64, np.int64],
                      [(3,), ()], ids=np.array([2, 0, 5, 7]))
    np.testing.assert_array_equal(got, [rows[2], [0, 0, 0], rows[3], rows[0]])
    np.testing.assert_array_equal(t, [4, 0, 4, 4])
    tape.push([rows[:2]], [True], np.array([True, True]), ids=np.array([3, 1]))
    with pytest.raises(AssertionError, match="other than those that pushed"):
        tape.pop(np.array([True, True]), [np.float64], [(3,)], ids=np.array([3, 4]))


def test_a_uniform_loop_that_no_lane_joins_runs_masked():
    """A uniform loop with products but no ``counter < trips`` test is not grown."""
    def powers(W, x):
        for _ in range(3):
            x = np.tanh(W @ x)
        return float(np.sum(x))
    W = np.random.default_rng(7).normal(size=(4, 4))
    x = np.random.default_rng(8).normal(size=(5, 4))
    got, counts = counted(hydra.grad(powers, argnums=(0, 1)), "cpu", ("x",), (W, x))
    assert "grown" not in counts
    want, _ = counted(hydra.grad(powers, argnums=(0, 1)), "numpy", ("x",), (W, x))
    for a, r in zip(got, want):
        np.testing.assert_allclose(a, r, rtol=1e-12)


def matmuls_and_tapes(fn, varying, args, **kw):
    text = hydra.compile(hydra.grad(fn, argnums=(0, 1), **kw), varying=varying,
                         backend="numpy").dump_ir("predicated", *args)
    return text.count("fn='matmul'"), text.count("tape_push"), text.count("tape_pop")


def test_a_product_the_reverse_reads_is_kept_on_the_tape_not_recomputed():
    """``np.maximum(Ws[l] @ h, 0)``'s adjoint reads the product: the forward trip pushes
    it and the reverse pops it (one product less per trip); the RNN's ``tanh`` adjoint
    reads only its result (the next state), so it keeps none."""
    rng = np.random.default_rng(9)
    args = (rng.normal(size=(3, 4, 4)), rng.normal(size=4), rng.normal(size=(5, 4)),
            rng.normal(size=5))
    # forward Ws[l] @ h; reverse Ws[l].T @ d (the outer products are lane sums or
    # per-lane outer, not matmul)
    assert matmuls_and_tapes(exits, ("x", "thr"), args) == (2, 2, 2)
    # checkpoints: the forward sweep keeps only the state; a segment's replay keeps its
    # products for its own reverse (K trips' worth)
    assert matmuls_and_tapes(exits, ("x", "thr"), args, checkpoint=2) == (3, 3, 3)
    W, U, b = weights()
    xs, n = sequences(3)
    assert matmuls_and_tapes(ragged, ("xs", "n"), (W, U, b, xs, n))[1:] == (1, 1)


def test_a_segments_replay_reads_the_input_rows_it_needs_not_a_copy_of_it(monkeypatch):
    """checkpoint=K: a segment's replay is a compacted loop inside the compacted reverse
    loop; its ``xs[t]`` takes the rows of the outer input itself (a copy of all of ``xs``
    for the joined lanes, made each time more lanes join, cost as much as the tape
    saves)."""
    import tracemalloc

    from hydra.backends.machinecode import background
    monkeypatch.setattr(background, "ENABLED", False)  # (no build's memory traced)
    rng = np.random.default_rng(10)
    W, U, b = rng.normal(size=(4, 4)) * 0.5, rng.normal(size=(4, 16)) * 0.3, np.zeros(4)
    xs, n = rng.normal(size=(64, 200, 16)), rng.integers(100, 200, 64)
    k = hydra.compile(hydra.grad(ragged, argnums=(0, 1, 2), checkpoint=8),
                      varying=("xs", "n"), backend="cpu")
    k(W, U, b, xs, n)
    background.wait()  # a build an earlier test queued allocates in its thread: traced too
    tracemalloc.start()
    try:
        k(W, U, b, xs, n)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < xs.nbytes / 2, (peak, xs.nbytes)
