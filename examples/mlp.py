"""A per-example MLP forward pass (784-256-256-10, softmax), batched across lanes.

The function is written for ONE input vector ``x``; the weights are uniform, so
``W1 @ x`` over N lanes is one matrix-matrix product, not N matrix-vector products.

    python examples/mlp.py [--examples 16384] [--backend cpu|numpy] [--python]
"""

import argparse

import numpy as np
from _perlane import add_common_options, loop, max_rel_diff, timed

import hydra


def mlp_one(x, W1, b1, W2, b2, W3, b3):
    h = np.tanh(W1 @ x + b1)
    h = np.maximum(W2 @ h + b2, 0.0)
    z = W3 @ h + b3
    e = np.exp(z - z.max())
    return e / e.sum()


def weights(sizes=(784, 256, 256, 10), seed=0):
    """Scaled normal weights (W ~ N(0, 1) / sqrt(fan_in)), float32; small normal biases."""
    rng = np.random.default_rng(seed)
    out = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        out.append((rng.standard_normal((fan_out, fan_in)) / np.sqrt(fan_in)).astype(np.float32))
        out.append((0.1 * rng.standard_normal(fan_out)).astype(np.float32))
    return tuple(out)


def inputs(n, width=784, seed=1):
    return np.random.default_rng(seed).standard_normal((n, width)).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_options(parser, 16384)
    args = parser.parse_args()
    params, x = weights(), inputs(args.examples)
    t_loop, expected = timed(loop, mlp_one, (x,), params)
    print(f"{args.examples} examples: per-example Python loop {t_loop * 1e3:.1f} ms, "
          f"mean top class probability {expected.max(axis=1).mean():.4f}")
    if args.python:
        return
    kernel = hydra.compile(mlp_one, varying=("x",), backend=args.backend)
    kernel(x, *params)  # compiles for these types
    t_hydra, probs = timed(kernel, x, *params, repeat=3)
    print(f"hydra ({args.backend}) {t_hydra * 1e3:.1f} ms: {t_loop / t_hydra:.1f}x the loop; "
          f"agrees with the loop: {max_rel_diff(probs, expected) < 1e-4} "
          f"(max relative difference {max_rel_diff(probs, expected):.1e})")


if __name__ == "__main__":
    main()
