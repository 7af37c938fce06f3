"""The programs of the golden dump-ir tests, one per situation (see ``SITUATIONS``).

Kept in their own file so that the printed locations (``programs.py:LINE``) only move
when this file changes; ``regen.py`` rewrites the expected texts."""

import numpy as np

from hydra import grad, lane, lanesum, nlanes
from hydra.types import FLOAT64, INT64, ArrayType


def varying_if(x):
    if x > 0:
        y = x * 2
    else:
        y = -x
    return y


def uniform_if_stays_branch(x, n):
    y = x
    if n > 3:
        y = x + n
    return y


def varying_while_liveout(n):
    i = 0
    s = 0
    while i < n:
        s += i
        i += 1
    return s, i


def break_continue(x):
    s = 0
    for i in range(10):
        if i == x:
            continue
        if s > x * 3:
            break
        s += i
    return s


def early_return(x):
    if x < 0:
        return -1
    y = x * 3
    if y > 10:
        return 10
    return y


def short_circuit(a, i):
    return i < len(a) and a[i] > 0


def temporal_divergence(n):
    k = 0
    i = 0
    while i < n:
        k = 5  # uniform inside the loop, varying after it: lanes leave at different times
        i += 1
    return k


def sync_point_cross_lane(x):
    total = lanesum(x)
    if x > 0:
        print("lane", lane(), total)
    return x - total


def sync_point_shared_store(a):
    a[lane()] = lane() * 2
    return a[(lane() + 1) % nlanes()]


def lane_private_store_no_sync(out, x):
    out[lane()] = x * 2.0
    tmp = np.zeros(3)
    tmp[1] = x
    return tmp[1]


def _gradient_loss(x, n):
    s = x
    i = 0
    while i < n:  # per-lane trips: counted, state pushed, reversed
        if s > 1.0:  # a per-lane condition the reverse keeps
            s = s * 0.5
        s = s * x
        i += 1
    return s


#: hydra.grad: the forward sweep with its tape and the reverse sweep (SPEC section 11)
gradient_through_loop = grad(_gradient_loss)


#: situation -> (function, argument types, varying parameter names)
SITUATIONS = {
    "varying_if": (varying_if, [INT64], {"x"}),
    "uniform_if_stays_branch": (uniform_if_stays_branch, [INT64, INT64], {"x"}),
    "varying_while_liveout": (varying_while_liveout, [INT64], {"n"}),
    "break_continue": (break_continue, [INT64], {"x"}),
    "early_return": (early_return, [INT64], {"x"}),
    "short_circuit": (short_circuit, [ArrayType(INT64, 1), INT64], {"i"}),
    "temporal_divergence": (temporal_divergence, [INT64], {"n"}),
    "sync_point_cross_lane": (sync_point_cross_lane, [INT64], {"x"}),
    "sync_point_shared_store": (sync_point_shared_store, [ArrayType(INT64, 1)], set()),
    "lane_private_store_no_sync": (lane_private_store_no_sync, [ArrayType(FLOAT64, 1), FLOAT64],
                                   {"x"}),
    "gradient_through_loop": (gradient_through_loop, [FLOAT64, INT64], {"x", "n"}),
}


# --- the planned steps of array kernels (dump-ir --stage steps, cpu) ---------------------

def steps_rnn(xs, n, Wx, Wh, b):
    h = np.zeros(Wh.shape[0], dtype=np.float32)
    for t in range(n):
        h = np.tanh(Wx @ xs[t] + Wh @ h + b)
    return h * 2.0 + 1.0


def steps_mlp(x, W1, b1, W2):
    h = np.maximum(W1 @ x + b1, 0.0)
    return lanesum(W2 @ h)


def _steps_args(seed: int, shapes: list, varying_ints=()):
    r = np.random.default_rng(seed)
    return [r.standard_normal(s).astype(np.float32) for s in shapes] + list(varying_ints)


#: situation -> (function, example arguments, varying parameter names)
STEP_SITUATIONS = {
    "steps_rnn": (steps_rnn, [_steps_args(0, [(5, 4, 3)])[0], np.array([1, 2, 3, 4, 1]),
                              *_steps_args(1, [(6, 3), (6, 6), (6,)])], ("xs", "n")),
    "steps_mlp": (steps_mlp, _steps_args(2, [(5, 3), (4, 3), (4,), (2, 4)]), ("x",)),
}
