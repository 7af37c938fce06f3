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
