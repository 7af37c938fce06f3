"""The JAX peers of ``python -m bench grad`` and ``python -m bench cnn``
(``bench/jaxpeers.py``) at tiny sizes: every step agrees with hydra's (the numpy reference
backend), the natural ``while_loop`` ports are refused with JAX's own error, and where
jax is absent every JAX row says so.  The tests that run JAX skip without it (JAX is the
optional ``peers`` extra; CI does not install it)."""

import sys
from pathlib import Path

import numpy as np
import pytest

import hydra
from bench import cnn, grad, jaxpeers

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

EXPECTED = {
    "mlp": ["jax jit(grad) of the batched mean loss", "jax jit(vmap(grad))"],
    "digits": ["jax jit(grad) of the batched mean loss", "jax jit(vmap(grad))"],
    "rnn": ["jax lax.scan over the padded length, masked, jit(grad)"],
    "early exit": ["jax fori_loop(0, 8) + where, jit(grad)",
                   "jax while_loop (natural port), jit(grad)"],
    "dp-sgd": ["jax jit(vmap(grad)) + clipping"],
}


def test_without_jax_every_row_says_why(monkeypatch):
    monkeypatch.setattr(jaxpeers.importlib.util, "find_spec",
                        lambda name: None if name == "jax" else object())
    assert "jax not installed" in jaxpeers.missing()
    assert list(jaxpeers.grad_peers("mlp")) == []
    assert "jax not installed" in grad.peers()
    fn, why = jaxpeers.cnn_forward(cnn.ARCH["lenet"][1], 1)
    assert fn is None and "jax not installed" in why


@pytest.mark.parametrize("name", list(EXPECTED))
def test_grad_peers_agree_with_hydra(name):
    pytest.importorskip("jax")
    fns, varying, args = grad.workload(name, 0.004)
    # the gradient step the peers compute (the workload's second row), on the reference
    # backend; the peers return (mean loss, gradients...) in its order
    step = list(fns.values())[1]
    want = hydra.compile(step, varying=varying, backend="numpy")(*args)
    rows = dict(jaxpeers.grad_peers(name))
    assert list(rows) == EXPECTED[name]
    for row, peer in rows.items():
        if "while_loop" in row:
            with pytest.raises(ValueError, match="Reverse-mode differentiation does not work "
                                                 "for lax.while_loop"):
                peer(*args)
            continue
        got = peer(*args)
        assert len(got) == len(want), row
        assert grad.max_rel(tuple(got), want) < 1e-4, row
        # the check can fail: a wrong gradient is caught
        wrong = (got[0],) + tuple(np.asarray(g) * 1.01 for g in got[1:])
        assert grad.max_rel(wrong, want) > 1e-3


def test_bench_grad_run_has_the_jax_rows_and_the_refusal():
    pytest.importorskip("jax")
    out = grad.run("early exit", 0.002, 1)
    rows = {r[2]: r for r in out}
    fori = rows["jax fori_loop(0, 8) + where, jit(grad)"]
    assert fori[3] > 0 and fori[6] < 1e-4  # timed, and checked against hydra's step
    refused = [r for r in rows if r.startswith("jax while_loop")]
    assert len(refused) == 1 and "ValueError: Reverse-mode differentiation" in refused[0]
    assert "JAX rows: bench/jaxpeers.py (jax " in grad.peers()


@pytest.mark.parametrize("name", ["lenet", "vgg_small"])
def test_cnn_jit_vmap_agrees_with_the_per_image_oracle(name):
    pytest.importorskip("jax")
    x, params = cnn.setup(name, 2)
    threads = 1 if jaxpeers.thread_mismatch(0) else 0  # whatever jax was imported for
    want = cnn.oracle(name, x, params)
    for split in (False, True):
        fn, why = jaxpeers.cnn_forward(cnn.ARCH[name][1], threads, split)
        assert why is None
        got = fn(x, params)
        assert got.shape == want.shape
        assert np.max(np.abs(got - want)) <= cnn.TOLERANCE * np.max(np.abs(want))


def test_cnn_row_says_when_xla_threads_were_fixed_at_import(monkeypatch):
    pytest.importorskip("jax")
    monkeypatch.setattr(jaxpeers, "_imported_for", [1])
    fn, why = jaxpeers.cnn_forward(cnn.ARCH["lenet"][1], 2)
    assert fn is None and "pool was made for one thread" in why and "--threads 2" in why
    assert jaxpeers.thread_mismatch(1) is None


def test_ode_example_shows_jax_refusing_the_same_solver():
    pytest.importorskip("jax")
    import ode_sensitivity
    rng = np.random.default_rng(0)
    out = ode_sensitivity.jax_peer(rng.uniform(2.0, 6.0, 3), rng.uniform(1.0, 4.0, 3), lanes=3)
    assert out["forward"] < 1e-10 and out["steps"]  # the port is the same solver
    assert out["error"].startswith("ValueError: Reverse-mode differentiation does not work "
                                   "for lax.while_loop")
    assert "jax.grad refuses it" in out["line"]
