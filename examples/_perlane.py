"""Shared plumbing of the per-lane array examples (mlp, rnn, early_exit, digits_cnn).

Each example is the function a user writes for ONE example; run undecorated over the
examples one by one it is the oracle that hydra's batched result is checked against.
"""

import time

import numpy as np


def timed(fn, *args, repeat=1):
    """(best seconds of ``repeat`` calls, the last result)."""
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn(*args)
        best = min(best, time.perf_counter() - start)
    return best, out


def loop(fn, varying, uniform):
    """The per-example function applied to example after example in a Python loop: the
    varying arguments are indexed along their leading axis, results stacked."""
    outs = [fn(*(v[i] for v in varying), *uniform) for i in range(len(varying[0]))]
    if isinstance(outs[0], tuple):
        return tuple(np.stack([np.asarray(o[j]) for o in outs]) for j in range(len(outs[0])))
    return np.stack([np.asarray(o) for o in outs])


def max_rel_diff(a, b) -> float:
    """max |a - b| / (1 + |b|): the summation-order tolerance in which GEMMs over the lanes
    and per-example mat-vecs agree (exact for integers)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b) / (1.0 + np.abs(b)))) if a.size else 0.0


def add_common_options(parser, default_examples):
    parser.add_argument("--examples", type=int, default=default_examples)
    parser.add_argument("--backend", default="cpu", choices=("cpu", "numpy"))
    parser.add_argument("--python", action="store_true",
                        help="run only the plain per-example Python loop (no hydra)")
