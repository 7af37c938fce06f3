"""The cpu backend's native sort of short rows (``hydra.executor.smallsort``): per-lane
``np.sort``/``np.argsort`` along the last axis, bit-exact with NumPy's stable sort (ties
in order, ``-0.0`` and ``0.0`` tied, NaN last in order), and the host rule beyond it."""

import itertools

import numpy as np

import hydra
from hydra.executor.smallsort import SMALL, network
from hydra.types import FLOAT32, FLOAT64, INT64, ArrayType


def test_the_networks_sort_every_row_of_zeros_and_ones():
    for m in range(2, 13):  # the 0-1 principle: a network that sorts these sorts all
        net = network(m)
        assert all(0 <= i < j < m for i, j in net)
        for bits in itertools.product((0, 1), repeat=m):
            v = list(bits)
            for i, j in net:
                if v[j] < v[i]:
                    v[i], v[j] = v[j], v[i]
            assert v == sorted(v), (m, bits)
    assert [len(network(m)) for m in (4, 8, 16)] == [5, 19, 63]


def sorts(x, y, n, z):
    return (np.sort(x), np.argsort(x, axis=1), np.sort(y, axis=-1), np.argsort(n),
            np.sort(z), np.argsort(x, axis=0))


def test_short_rows_sort_natively_and_bit_exactly():
    k = hydra.compile(sorts, varying=("x", "y", "n", "z"), backend="cpu")
    steps = k.dump_ir("steps", types=[ArrayType(FLOAT64, 2, (3, 7)),
                                      ArrayType(FLOAT32, 1, (SMALL,)), ArrayType(INT64, 1, (5,)),
                                      ArrayType(FLOAT64, 1, (SMALL + 1,))])
    assert steps.count("(smallsort.sort_step)") == 4  # not rows of 17, nor along axis 0
    rng = np.random.default_rng(0)
    for lanes in (1, 3, 40):
        x = rng.integers(-3, 4, (lanes, 3, 7)).astype(np.float64)
        x[x == 3] = np.nan
        x[x == 2] = -0.0
        x[x == -3] = np.inf
        y = rng.normal(size=(lanes, SMALL)).astype(np.float32)
        y[:, ::3] = 0.0
        y[:, 1::5] = -0.0
        n = rng.integers(-2, 2, (lanes, 5))
        z = rng.normal(size=(lanes, SMALL + 1))
        got = k(x, y, n, z)
        want = (np.sort(x, -1, kind="stable"), np.argsort(x, 2, kind="stable"),
                np.sort(y, -1, kind="stable"), np.argsort(n, -1, kind="stable"),
                np.sort(z, -1, kind="stable"), np.argsort(x, 1, kind="stable"))
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            assert g.tobytes() == w.tobytes()
