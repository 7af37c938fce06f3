"""bench/ab.py: the interleaved one-core A/B of two trees runs both and reports each
row's best, median, ratio and first call."""

import os

from bench import ab

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_ab_of_a_tree_with_itself():
    table = ab.run([("old", ROOT), ("new", ROOT)], "mcpi,mcpi:numba", rounds=1, calls=2)
    head, cols, *rows = table.splitlines()
    assert head.startswith("# 1 interleaved rounds x 2 calls") and "load (1 min)" in head
    assert "old best" in cols and "new best" in cols and "new/old" in cols
    assert [r.split()[0] for r in rows] == ["mcpi", "mcpi:numba"]
    for r in rows:
        ratio = float(r.split()[5])
        assert 0.1 < ratio < 10


def test_rows_name_a_workload_a_mode_and_threads():
    assert ab.parse_row("mandelbrot:fm") == ("mandelbrot", "fm", 1)
    assert ab.parse_row("early-exit@2") == ("early-exit", "", 2)
    assert {ab.parse_row(r)[0] for r in ab.ML_ROWS.split(",")} == set(ab.ML_WORKLOADS)
    assert "digits@2" in ab.ROWS.split(",")


def test_an_ml_row_slower_than_the_threshold_is_timed_again(monkeypatch):
    monkeypatch.setattr(ab, "RERUN_ABOVE", 0.0)  # every row counts as slower: re-run
    table = ab.run([("old", ROOT), ("new", ROOT)], "mlp@2", rounds=1, calls=1, scale=0.001,
                   rerun_rounds=1)
    head, cols, row = table.splitlines()
    assert row.split()[0] == "mlp@2" and row.endswith("(re-run: 1 rounds)")
    assert float(row.split()[1].rstrip("ms")) > 0 and float(row.split()[5]) > 0
