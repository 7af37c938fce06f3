"""One kernel called from several threads at once with different argument shapes:
each call is compiled for, and gets the result of, its own shapes (``Kernel.specialize``
takes the call's uniform ints explicitly; compiles hold the kernel's lock)."""

import threading

import numpy as np
import pytest

import hydra

f32 = np.float32


def head(x, k):
    a = np.zeros(k, dtype=np.float32)
    return a + x[:k] * 2.0


def scaled(x, s):
    return np.maximum(x * s, 0.0) + x.sum()


def race(kernel, calls, rounds=1):
    """Run ``calls`` (argument tuples) through ``kernel`` on one thread each, released
    together; the results in order (or the first exception raised)."""
    results = [None] * len(calls)
    start = threading.Barrier(len(calls))

    def one(i):
        start.wait()
        try:
            results[i] = [kernel(*calls[i]) for _ in range(rounds)]
        except BaseException as e:  # noqa: BLE001  (re-raised on the main thread)
            results[i] = e
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_shapes_from_uniform_ints_in_threads(backend):
    """A fresh kernel whose shapes depend on a uniform int, first called from six
    threads with three different ints: every call gets its own shape."""
    x = np.arange(40, dtype=f32).reshape(4, 10)
    for _attempt in range(3 if backend == "numpy" else 1):
        k = hydra.compile(head, varying="x", backend=backend)
        sizes = [2, 3, 5, 2, 3, 5]
        got = race(k, [(x, n) for n in sizes], rounds=3)
        for n, rs in zip(sizes, got):
            for r in rs:
                np.testing.assert_array_equal(r, x[:, :n] * 2.0)
        assert len(k._cache) == 3


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_per_lane_shapes_in_threads(backend):
    """Per-lane arrays of different shapes (and lane counts) at once: each thread's
    results are its own."""
    r = np.random.default_rng(3)
    calls = [(r.standard_normal(shape).astype(f32), f32(s))
             for shape, s in [((3, 4), 2.0), ((5, 2, 3), 0.5), ((3, 4), -1.0),
                              ((7, 6), 3.0), ((5, 2, 3), 1.5), ((2, 8), 0.25)]]
    k = hydra.compile(scaled, varying="x", backend=backend)
    got = race(k, calls, rounds=4)
    for (x, s), rs in zip(calls, got):
        want = np.stack([scaled(row, s) for row in x])
        for res in rs:
            np.testing.assert_allclose(res, want, rtol=1e-6)
