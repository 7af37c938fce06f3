"""Tuple arguments: passed as their leaves, seen by the kernel as tuples."""

import numpy as np
import pytest

import hydra
import hydra.backends


def distance_plus(x, centre):
    cx, (cy, r) = centre
    return (x - cx) ** 2 + cy * r


def test_tuple_argument_matches_plain_python(backend):
    xs = np.arange(5.0)
    centre = (1.5, (2, np.float32(0.5)))
    k = hydra.compile(distance_plus, varying="x", backend=backend)
    got = k(xs, centre)
    expected = np.array([distance_plus(x, centre) for x in xs])
    np.testing.assert_array_equal(got, expected)


def test_tuple_argument_of_unsupported_leaves_is_a_type_error():
    k = hydra.compile(distance_plus, varying="x", backend="numpy")
    with pytest.raises(TypeError, match=r"argument 'centre\[1\]\[0\]' has unsupported type set"):
        k(np.arange(3.0), (1.0, ({2}, 3.0)))


def test_device_arrays_reach_the_cuda_backend_without_copies():
    import os
    if not os.environ.get("NUMBA_ENABLE_CUDASIM") or not hydra.backends.available("cuda"):
        pytest.skip("needs the cuda backend")
    from numba import cuda

    from hydra import lane

    def double_into(x, out):
        out[lane()] = x * 2

    out = cuda.to_device(np.zeros(4))
    k = hydra.compile(double_into, varying="x", backend="cuda")
    k(cuda.to_device(np.arange(4.0)), out)
    np.testing.assert_array_equal(out.copy_to_host(), [0.0, 2.0, 4.0, 6.0])
    with pytest.raises(TypeError, match="argument 'out' is a GPU array"):
        hydra.compile(double_into, varying="x", backend="numpy")(np.arange(4.0), out)


def test_a_dropped_result_is_freed_at_once(backend):
    """A call keeps no reference to its results: dropping the result frees it before
    any cyclic garbage collection (a reference cycle in the result builder once kept
    every call's arrays until the GC ran, so each call wrote to fresh pages)."""
    import gc
    import weakref

    k = hydra.compile(lambda x: (x * 2.0, x + 1.0), varying="x", backend=backend)
    # compiled first: on a GPU numba-cuda's first compile keeps the frames of that call
    # (so its results) alive through a traceback it caches (an H200 run showed the
    # referrers); the property here is that calls keep nothing
    k(np.arange(64.0))
    gc.disable()
    try:
        a, b = k(np.arange(64.0))
        refs = weakref.ref(a), weakref.ref(b)
        del a, b
        assert [r() is None for r in refs] == [True, True]
    finally:
        gc.enable()
