"""A per-example Elman RNN over ragged sequences: a padded input plus a varying length.

Each lane runs ``for t in range(n)`` over its own sequence: lanes whose sequence has
ended are masked off (or compacted away) while the others go on, and the returned
hidden state is the one after each lane's own last step.

    python examples/rnn.py [--examples 4096] [--steps 200] [--backend cpu|numpy] [--python]
"""

import argparse

import numpy as np
from _perlane import add_common_options, loop, max_rel_diff, timed

import hydra


def rnn_one(xs, n, Wx, Wh, b):
    h = np.zeros(Wh.shape[0], dtype=np.float32)
    for t in range(n):
        h = np.tanh(Wx @ xs[t] + Wh @ h + b)
    return h


def weights(hidden=128, width=64, seed=0):
    rng = np.random.default_rng(seed)
    wx = (rng.standard_normal((hidden, width)) / np.sqrt(width)).astype(np.float32)
    wh = (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(np.float32)
    return wx, wh, (0.1 * rng.standard_normal(hidden)).astype(np.float32)


def sequences(n, steps=200, width=64, seed=1):
    """``n`` sequences padded to ``steps`` (zeros past each end) and their lengths."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, steps + 1, n)
    xs = rng.standard_normal((n, steps, width)).astype(np.float32)
    xs[np.arange(steps)[None, :] >= lengths[:, None]] = 0.0
    return xs, lengths


def setup(examples: int = 1024, steps: int = 100):
    """The arguments of a call, for ``python -m hydra profile ... --setup setup``."""
    xs, lengths = sequences(examples, steps)
    return (xs, lengths, *weights()), {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_options(parser, 4096)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    params = weights()
    xs, lengths = sequences(args.examples, args.steps)
    t_loop, expected = timed(loop, rnn_one, (xs, lengths), params)
    print(f"{args.examples} sequences of 1..{args.steps} steps (mean {lengths.mean():.1f}): "
          f"per-example Python loop {t_loop * 1e3:.1f} ms")
    if args.python:
        return
    kernel = hydra.compile(rnn_one, varying=("xs", "n"), backend=args.backend)
    kernel(xs, lengths, *params)
    t_hydra, h = timed(kernel, xs, lengths, *params, repeat=3)
    print(f"hydra ({args.backend}) {t_hydra * 1e3:.1f} ms: {t_loop / t_hydra:.1f}x the loop; "
          f"agrees with the loop: {max_rel_diff(h, expected) < 1e-4} "
          f"(max relative difference {max_rel_diff(h, expected):.1e})")


if __name__ == "__main__":
    main()
