"""Tuple arguments: passed as their leaves, seen by the kernel as tuples."""

import numpy as np
import pytest

import hydra


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


def test_tuple_argument_of_strings_is_a_type_error():
    k = hydra.compile(distance_plus, varying="x", backend="numpy")
    with pytest.raises(TypeError, match="argument 'centre' has unsupported type tuple"):
        k(np.arange(3.0), (1.0, "a"))
