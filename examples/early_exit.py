"""Early exit: a residual network whose examples leave as soon as the classifier head is
confident enough, each example with its own threshold.

In lockstep every active lane is at the same layer ``l``, so ``Ws[l]`` stays one uniform
matrix and each layer is one product over the lanes still running (the trap that makes
JAX's natural ``vmap(while_loop)`` port gather a matrix per lane does not arise).

    python examples/early_exit.py [--examples 16384] [--backend cpu|numpy] [--python]
"""

import argparse

import numpy as np
from _perlane import add_common_options, loop, max_rel_diff, timed

import hydra


def early_exit_one(x, Ws, bs, Wc, bc, thr):
    h = x
    for l in range(Ws.shape[0]):  # noqa: E741 (the name ML.md and the issue use)
        h = h + np.maximum(Ws[l] @ h + bs[l], 0.0)
        z = Wc @ h + bc
        e = np.exp(z - z.max())
        conf = e.max() / e.sum()
        if conf > thr:
            break
    return z, l + 1


def weights(layers=8, width=256, classes=10, seed=0):
    rng = np.random.default_rng(seed)
    ws = (rng.standard_normal((layers, width, width)) / np.sqrt(width)).astype(np.float32)
    bs = (0.1 * rng.standard_normal((layers, width))).astype(np.float32)
    wc = (rng.standard_normal((classes, width)) / np.sqrt(width)).astype(np.float32)
    return ws, bs, wc, (0.1 * rng.standard_normal(classes)).astype(np.float32)


def inputs(n, width=256, seed=1):
    """Standard normal inputs and exit thresholds uniform in [0.3, 0.9]."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, width)).astype(np.float32)
    return x, rng.uniform(0.3, 0.9, n).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_options(parser, 16384)
    args = parser.parse_args()
    ws, bs, wc, bc = weights()
    x, thr = inputs(args.examples)
    t_loop, (z_ref, depth_ref) = timed(
        loop, lambda x, thr: early_exit_one(x, ws, bs, wc, bc, thr), (x, thr), ())
    print(f"{args.examples} examples: mean depth {depth_ref.mean():.2f} of {len(ws)} layers; "
          f"per-example Python loop {t_loop * 1e3:.1f} ms")
    if args.python:
        return
    kernel = hydra.compile(early_exit_one, varying=("x", "thr"), backend=args.backend)
    kernel(x, ws, bs, wc, bc, thr)
    t_hydra, (z, depth) = timed(kernel, x, ws, bs, wc, bc, thr, repeat=3)
    # a depth is a decision on a float: it can differ only where a confidence lies within
    # summation-order rounding of its threshold
    same = depth == depth_ref
    differ, diff = int(np.count_nonzero(~same)), max_rel_diff(z[same], z_ref[same])
    print(f"hydra ({args.backend}) {t_hydra * 1e3:.1f} ms: {t_loop / t_hydra:.1f}x the loop; "
          f"depths differing from the loop: {differ}; logits agree: "
          f"{diff < 1e-4} (max relative difference {diff:.1e})")


if __name__ == "__main__":
    main()
