"""Differentially private SGD (Abadi et al. 2016) on scikit-learn's 8x8 digits.

The model (64-64-10 MLP, softmax cross-entropy) is written for ONE example;
``hydra.grad`` gives each lane its own example's gradient, each lane clips it to L2
norm at most ``clip`` (per-example clipping is ordinary per-lane code between the
gradient and the ``lanesum``), and the batch's sum gets Gaussian noise of standard
deviation ``noise * clip`` before it is averaged: the DP-SGD step.  The example prints
the noise multiplier, clipping norm, batch size and the test accuracy of the private
model beside the non-private one (same start, same batches).

    python examples/dp_sgd.py [--epochs 30] [--batch 256] [--clip 1.0] [--noise 1.1]
                              [--lr 0.5] [--backend cpu|numpy] [--limit N]
"""

import argparse
import math
import time

import numpy as np

import hydra
from hydra import lanesum, nlanes


def loss_one(x, label, W1, b1, W2, b2):
    """Softmax cross-entropy of one digit ``x`` (64 pixels in [0, 1])."""
    h = np.tanh(W1 @ x + b1)
    z = W2 @ h + b2
    s = z - z.max()
    return np.log(np.sum(np.exp(s))) - s[label]


grads_one = hydra.value_and_grad(loss_one, argnums=(2, 3, 4, 5))


def mean_step(x, label, W1, b1, W2, b2, clip):
    """The non-private step: the batch's mean loss and mean gradients."""
    loss, (g1, c1, g2, c2) = grads_one(x, label, W1, b1, W2, b2)
    n = nlanes()
    return lanesum(loss) / n, lanesum(g1) / n, lanesum(c1) / n, lanesum(g2) / n, lanesum(c2) / n


def private_step(x, label, W1, b1, W2, b2, clip):
    """The batch's mean loss and the SUM of its per-example gradients, each clipped to
    L2 norm at most ``clip`` (over all parameters together); the noise is added by the
    caller, once per batch."""
    loss, (g1, c1, g2, c2) = grads_one(x, label, W1, b1, W2, b2)
    norm = math.sqrt(np.sum(g1 * g1) + np.sum(c1 * c1) + np.sum(g2 * g2) + np.sum(c2 * c2))
    # in the gradients' own precision: g * scale stays float32, so the sum of the scaled
    # outer products is one GEMM over the lanes (hydra.grad.lanesums)
    scale = np.float32(min(1.0, clip / max(norm, 1e-12)))
    return (lanesum(loss) / nlanes(), lanesum(g1 * scale), lanesum(c1 * scale),
            lanesum(g2 * scale), lanesum(c2 * scale))


def private_update(step, x, y, params, clip, noise, rng):
    """One DP-SGD update's gradient: the clipped sum plus N(0, (noise * clip)^2) noise,
    divided by the batch size."""
    loss, *sums = step(x, y, *params, clip)
    return loss, [(np.asarray(g) + rng.normal(0.0, noise * clip, np.shape(g))) / len(y)
                  for g in sums]


def load(limit=None, seed=0):
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = (digits.images.reshape(len(digits.images), 64) / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))[:limit]
    split = len(order) * 3 // 4
    return x[order[:split]], y[order[:split]], x[order[split:]], y[order[split:]]


def init(hidden=64, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((hidden, 64)) / 8.0).astype(np.float32),
            np.zeros(hidden, dtype=np.float32),
            (rng.standard_normal((10, hidden)) / np.sqrt(hidden)).astype(np.float32),
            np.zeros(10, dtype=np.float32)]


def accuracy(params, x, y):
    W1, b1, W2, b2 = params
    z = np.tanh(x @ W1.T + b1) @ W2.T + b2
    return float(np.mean(np.argmax(z, axis=1) == y))


def train(kernel, x, y, epochs, batch, lr, private, clip, noise, seed=1):
    """Mini-batch (DP-)SGD; batches of exactly ``batch`` examples (the lane count stays
    fixed).  Returns (params, seconds in the kernel)."""
    params, order_rng, noise_rng, spent = init(), np.random.default_rng(seed), \
        np.random.default_rng(seed + 1), 0.0
    for _ in range(epochs):
        order = order_rng.permutation(len(y))
        for start in range(0, len(y) - batch + 1, batch):
            idx = order[start:start + batch]
            t = time.perf_counter()
            if private:
                _, grads = private_update(kernel, x[idx], y[idx], params, clip, noise,
                                          noise_rng)
            else:
                _, *grads = kernel(x[idx], y[idx], *params, clip)
            spent += time.perf_counter() - t
            for p, g in zip(params, grads):
                p -= lr * np.asarray(g, dtype=np.float32)
    return params, spent


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--clip", type=float, default=1.0)
    parser.add_argument("--noise", type=float, default=1.1)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--backend", default="cpu", choices=("cpu", "numpy"))
    args = parser.parse_args(argv)
    x, y, x_test, y_test = load(args.limit)
    batch = min(args.batch, len(y))
    public = hydra.compile(mean_step, varying=("x", "label"), backend=args.backend)
    private = hydra.compile(private_step, varying=("x", "label"), backend=args.backend)
    rest = (x, y, args.epochs, batch, args.lr)
    p_pub, t_pub = train(public, *rest, False, args.clip, args.noise)
    p_priv, t_priv = train(private, *rest, True, args.clip, args.noise)
    out = {"noise multiplier": args.noise, "clipping norm": args.clip, "batch": batch,
           "accuracy": accuracy(p_priv, x_test, y_test),
           "non-private accuracy": accuracy(p_pub, x_test, y_test)}
    print(f"DP-SGD on {len(y)} digits, {args.epochs} epochs of batches of {batch}: noise "
          f"multiplier {args.noise}, clipping norm {args.clip}, learning rate {args.lr}")
    print(f"test accuracy: private {out['accuracy']:.4f} ({t_priv:.2f} s in the kernel), "
          f"non-private {out['non-private accuracy']:.4f} ({t_pub:.2f} s)")
    return out


if __name__ == "__main__":
    main()
