"""NumPy 2's rules at the edges (issue 11, items 4-7): NumPy scalars are strong,
signed/unsigned comparisons are exact, Python ints that do not fit raise
OverflowError, and a few smaller corners (uint64 indices, float -> unsigned casts,
``~`` of a bool), on every backend."""

import numpy as np
import pytest
from conftest import check_against_oracle

import hydra

# --- item 5: NumPy scalars are strong (NEP 50) ------------------------------------------

SCALE = np.float64(1 + 2**-30)   # a module-level NumPy scalar: strong, like the argument


def scaled_by_argument(x, a):
    return a * x


def scaled_by_module_constant(x):
    return SCALE * x


def test_numpy_scalar_argument_is_strong(backend):
    x = np.ones(backend.lanes(17), np.float32)
    got = hydra.compile(scaled_by_argument, varying="x", backend=backend)(x, SCALE)
    assert got.dtype == np.float64 and got[0] == 1 + 2**-30
    check_against_oracle(scaled_by_argument, [x, np.float64(0.1)], varying="x",
                         backend=backend)
    check_against_oracle(scaled_by_argument, [x, np.int64(3)], varying="x", backend=backend)


def test_numpy_scalar_module_constant_is_strong(backend):
    x = np.ones(backend.lanes(17), np.float32)
    got = hydra.compile(scaled_by_module_constant, varying="x", backend=backend)(x)
    assert got.dtype == np.float64 and got[0] == 1 + 2**-30


def test_python_float_stays_weak(backend):
    x = np.ones(backend.lanes(3), np.float32)
    got = hydra.compile(scaled_by_argument, varying="x", backend=backend)(x, 1 + 2**-30)
    assert got.dtype == np.float32 and got[0] == 1.0


# --- item 4: signed vs unsigned 64-bit comparisons are exact ------------------------------

EDGE_U = np.array([0, 1, 2**63 - 1, 2**63, 2**64 - 1, 5, 7, 2**63 + 1], np.uint64)
EDGE_S = np.array([0, -1, 2**63 - 1, 2**63 - 1, -1, 6, -2**63, 2**62], np.int64)


def compare_all(u, s):
    return u == s, u != s, u < s, u <= s, u > s, u >= s, s < u, s >= u


def test_uint64_against_int64_compares_exactly(backend):
    u, s = np.tile(EDGE_U, 3), np.tile(EDGE_S, 3)
    got = hydra.compile(compare_all, varying=("u", "s"), backend=backend)(u, s)
    assert not got[0][3]  # 2**63 == 2**63 - 1 through float64
    check_against_oracle(compare_all, [u, s], varying=("u", "s"), backend=backend)
    # uniform on one side, and a narrower signed type on the other
    check_against_oracle(compare_all, [u, np.int64(2**63 - 1)], varying="u", backend=backend)
    check_against_oracle(compare_all, [np.uint64(2**63), s.astype(np.int32)], varying="s",
                         backend=backend)


def compare_with_python_ints(u, c):
    return u == -1, u > -1, u < 2**63 + 2, c < u, u == c


def test_uint64_against_python_ints_is_per_lane(backend):
    # u == -1 is False on every lane, but it is a varying value: an array of N lanes
    u = np.tile(EDGE_U, 2)
    got = hydra.compile(compare_with_python_ints, varying="u", backend=backend)(u, -3)
    assert isinstance(got[0], np.ndarray) and got[0].shape == (16,) and not got[0].any()
    check_against_oracle(compare_with_python_ints, [u, -3], varying="u", backend=backend)
    check_against_oracle(compare_with_python_ints, [u, 2**62], varying="u", backend=backend)


def compare_int32_with_python_int(x, c):
    return x < c, x == c, c >= x


def test_narrow_int_against_a_big_python_int_compares_by_value(backend):
    x = np.array([1, -5, 2**31 - 1], np.int32)
    check_against_oracle(compare_int32_with_python_int, [x, 2**40], varying="x",
                         backend=backend)
    check_against_oracle(compare_int32_with_python_int, [x, -2**40], varying="x",
                         backend=backend)
