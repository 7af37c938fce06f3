"""The gradients-at-speed examples run at small sizes and say what they promise:
DP-SGD learns the digits, the ODE solver's sensitivities agree with finite
differences, the Greeks agree with the closed forms."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))


def test_dp_sgd_learns_the_digits_privately():
    import dp_sgd
    out = dp_sgd.main(["--epochs", "5", "--batch", "128", "--backend", "cpu"])
    assert out["noise multiplier"] == 1.1 and out["clipping norm"] == 1.0
    assert out["batch"] == 128
    assert out["accuracy"] > 0.6 and out["non-private accuracy"] > 0.8


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_dp_sgd_step_clips_each_example_against_the_oracle(backend):
    import hydra
    import dp_sgd
    x, y, _, _ = dp_sgd.load(limit=80)
    params = dp_sgd.init(hidden=16)
    k = hydra.compile(dp_sgd.private_step, varying=("x", "label"), backend=backend)
    _, *sums = k(x[:40], y[:40], *params, 0.3)
    expected = [0.0] * 4
    for i in range(40):
        _, g = dp_sgd.grads_one(x[i], int(y[i]), *params)
        norm = np.sqrt(sum(float(np.sum(np.asarray(a, np.float64) ** 2)) for a in g))
        expected = [e + np.asarray(a) * min(1.0, 0.3 / norm) for e, a in zip(expected, g)]
    for s, e in zip(sums, expected):
        np.testing.assert_allclose(s, e, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_ode_sensitivities_agree_with_finite_differences(backend):
    # (what the examples print is not checked: numba's colorama stream swap, from a
    # background loop build, once lost it from capsys; background.plain_numba_messages
    # fixes that cause, tests/test_background_loops.py, but one more loss was seen
    # after the fix and not explained: see the closing note)
    import ode_sensitivity
    out = ode_sensitivity.main(["--lanes", "12", "--check", "4", "--backend", backend])
    assert out["worst"] < 1e-5
    assert out["steps"].min() < out["steps"].max()  # each lane its own number of steps


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_greeks_agree_with_the_closed_forms(backend):
    import greeks
    out = greeks.main(["--options", "2000", "--paths", "20000", "--repeat", "1",
                       "--backend", backend])
    assert max(out["errors"].values()) < 1e-12
    price, delta = out["mc"]
    assert abs(price - out["exact"][0]) < 0.3 and abs(delta - out["exact"][1]) < 0.03


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_digits_steps_automatic_and_hand_written_after_one_forward_agree(backend):
    """The digits CNN's automatic step (``hydra.value_and_grad`` of its ``hydra.nn``
    forward) against its hand-written backward pass after the same forward and the
    per-example oracle (``grads_one`` in a Python loop), on lanes with tied windows."""
    import hydra
    import digits_cnn
    x, y, _, _ = digits_cnn.load(limit=120)
    args = (x[:48], y[:48], *digits_cnn.init())
    auto = hydra.compile(digits_cnn.batch_autograd, varying=("x", "label"), backend=backend)
    hand = hydra.compile(digits_cnn.batch_grads_nn, varying=("x", "label"), backend=backend)
    oracle = digits_cnn.loop_grads(*args)
    for a, h, o in zip(auto(*args), hand(*args), oracle):
        scale = float(np.max(np.abs(o)))
        np.testing.assert_allclose(a, o, rtol=1e-5, atol=1e-6 * scale)
        np.testing.assert_allclose(h, o, rtol=1e-5, atol=1e-6 * scale)
