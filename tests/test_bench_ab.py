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
