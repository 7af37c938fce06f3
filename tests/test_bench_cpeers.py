"""bench/cpeers.py: the hand-written C peers build where gcc exists, are skipped with a
note where not, and the non-FMA ones give the kernel's exact counts."""

import shutil

import numpy as np
import pytest

import hydra
from bench import cpeers
from bench import mandelbrot as mb


def test_without_gcc_the_peers_are_skipped_with_a_note(monkeypatch):
    monkeypatch.setattr(cpeers.shutil, "which", lambda name: None)
    lib, note = cpeers.build()
    assert lib is None and "gcc not found" in note


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_non_fma_peers_give_the_reference_counts():
    lib, note = cpeers.build()
    assert lib is not None, note
    rng = np.random.default_rng(3)
    n = 1000  # not a multiple of any peer's block: the scalar tail runs too
    args = (rng.uniform(-2, 1, n).astype(np.float32), rng.uniform(-1, 1, n).astype(np.float32),
            np.int32(64))
    want = hydra.compile(mb.kernel, varying=mb.VARYING, backend="numpy")(*args)
    peers = cpeers.peers(lib, args)
    assert "C scalar" in peers
    for label, fn in peers.items():
        if "fma" not in label:
            np.testing.assert_array_equal(fn(), want, err_msg=label)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_fma_peers_give_hydra_fastmaths_counts():
    """fastmath fuses a product into every add or sub that reads it (also a product used
    twice, as zr * zr is), which is the hand-written FMA code's arithmetic: same bits."""
    from hydra.backends.cpu.vectors import host_has_fma
    if not host_has_fma():
        pytest.skip("no FMA on this CPU")
    lib, note = cpeers.build()
    assert lib is not None, note
    rng = np.random.default_rng(4)
    n = 960  # a multiple of every peer's block: no scalar (unfused) tail
    args = (rng.uniform(-2, 1, n).astype(np.float32), rng.uniform(-1, 1, n).astype(np.float32),
            np.int32(200))
    fast = hydra.compile(mb.kernel, varying=mb.VARYING, backend="cpu", fastmath=True)(*args)
    fused = [label for label in cpeers.peers(lib, args) if "fma" in label]
    assert fused
    for label in fused:
        np.testing.assert_array_equal(cpeers.peers(lib, args)[label](), fast, err_msg=label)
