"""Writing a read-only array (SPEC section 6): a ``ValueError`` naming the parameter or
the captured array, before anything runs, on every backend.  Before the check, the cpu
backend wrote through every one of these (and segfaulted on a read-only memmap)."""

import numpy as np
import pytest

import hydra
from hydra import atomic_add, lane


def _read_only(n):
    a = np.zeros(n)
    a.setflags(write=False)
    return a


def _memmap(n, tmp_path):
    path = tmp_path / "m.bin"
    np.zeros(n).tofile(path)
    return np.memmap(path, dtype=np.float64, mode="r")


MAKERS = {
    "setflags": lambda n, tmp: _read_only(n),
    "memmap": _memmap,
    "broadcast_to": lambda n, tmp: np.broadcast_to(np.zeros(1), (n,)),
    "frombuffer": lambda n, tmp: np.frombuffer(bytes(8 * n), np.float64),
}


def store_to(x, out):
    out[lane()] = x + 1.0


def add_to(x, out):
    atomic_add(out, 0, x)


def writes_only_here(x, out):
    if x > 100.0:  # no lane takes it: still a write the kernel may do
        out[lane()] = x


@pytest.mark.parametrize("make", sorted(MAKERS))
@pytest.mark.parametrize("fn", [store_to, add_to, writes_only_here], ids=lambda f: f.__name__)
def test_read_only_uniform_argument(backend, make, fn, tmp_path):
    out = MAKERS[make](8, tmp_path)
    before = np.array(out)
    k = hydra.compile(fn, varying="x", backend=backend)
    with pytest.raises(ValueError, match="argument 'out' is read-only"):
        k(np.arange(8.0), out)
    np.testing.assert_array_equal(out, before)


def bump(x, total):
    x[0] = total  # a varying (per-lane) array argument written in place


def test_read_only_varying_argument(backend):
    x = np.broadcast_to(np.zeros((1, 3)), (4, 3))
    with pytest.raises(ValueError, match="argument 'x' is read-only"):
        hydra.compile(bump, varying="x", backend=backend)(x, 1.0)


FROZEN = _read_only(8)


def into_frozen(x):
    FROZEN[lane()] = x


def test_read_only_captured_array(backend):
    k = hydra.compile(into_frozen, varying="x", backend=backend)
    with pytest.raises(ValueError, match="captured array 'FROZEN' is read-only"):
        k(np.arange(8.0))
    assert not FROZEN.any()


def reads(x, table, out):
    out[lane()] = table[lane()] * x


def test_read_only_arrays_that_are_only_read_are_fine(backend, tmp_path):
    out = np.zeros(8)
    hydra.compile(reads, varying="x", backend=backend)(np.ones(8), _memmap(8, tmp_path), out)
    np.testing.assert_array_equal(out, np.zeros(8))
    table = np.broadcast_to(np.arange(1.0, 2.0), (8,))
    hydra.compile(reads, varying="x", backend=backend)(np.full(8, 2.0), table, out)
    np.testing.assert_array_equal(out, np.full(8, 2.0))
