"""``python -m bench ml`` at a tiny scale: every peer's output agrees with the per-example
loop, and the hydra rows either agree too or say why they could not run."""

import numpy as np

from bench import ml


def test_hand_batched_peers_agree_with_the_loop():
    for name in ("mlp", "rnn", "early exit"):
        fn, varying, args, peers = ml.workload(name, 0.003)
        ref = ml.reference(fn, varying, args)()
        for label, peer in peers:
            assert ml.agrees(name, peer(*args), ref) == "yes", (name, label)


def test_agreement_check_catches_a_wrong_answer():
    fn, varying, args, _ = ml.workload("rnn", 0.003)
    ref = ml.reference(fn, varying, args)()
    assert ml.agrees("rnn", ref * 1.01, ref).startswith("NO")
    z, depth = ml.early_exit_numpy_compacted(*ml.workload("early exit", 0.003)[2])
    assert ml.agrees("early exit", (z, np.minimum(depth, 1)), (z, depth)).startswith("NO")


def test_bench_ml_prints_every_workload_and_the_targets(capsys):
    ml.main(scale=0.0005, repeat=1)
    out = capsys.readouterr().out
    assert "BLAS:" in out and "targets (best times):" in out
    rows = [line for line in out.splitlines() if line.startswith(("mlp ", "rnn ", "early"))]
    for name in ("mlp", "rnn", "early exit"):
        assert any(r.startswith(name) and "numpy" in r and r.endswith("yes") for r in rows)
    for r in rows:
        assert not r.rstrip().split("  ")[-1].startswith("NO"), r


def test_bench_ml_only_runs_the_named_workload(capsys):
    ml.main(scale=0.0005, repeat=1, names=("rnn",))
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith(("mlp ", "rnn ", "early"))]
    assert rows and all(r.startswith("rnn ") for r in rows)
    assert any("compacted steps unplanned" in r and r.endswith("yes") for r in rows)
    try:
        ml.main(scale=0.0005, repeat=1, names=("rnm",))
    except SystemExit as e:
        assert "no workload 'rnm'" in str(e)
    else:
        raise AssertionError("an unknown workload ran")
