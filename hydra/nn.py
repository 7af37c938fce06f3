"""Per-example neural-network layers (SPEC section 8), for one example at a time.

Each is a plain NumPy definition, so a per-example function that calls them runs
unchanged in plain Python; in a kernel they run batched across the lanes.  ``relu``,
``sigmoid``, ``softmax`` and ``log_softmax`` are compiled from their bodies like any
helper.  ``conv2d``, ``max_pool2d`` and ``avg_pool2d`` are array operations of their own
(``__hydra_array_op__``): their definitions are ``hydra.windows``'s functions on one
image, and their batching rules the same functions on all lanes' images at once (one
contiguous im2col and batched GEMMs; the pools as passes over strided slices).
"""

from __future__ import annotations

import numpy as np

from . import batching


def relu(x):
    """max(x, 0) elementwise."""
    return np.maximum(x, 0)


def sigmoid(x):
    """1 / (1 + exp(-x)) elementwise."""
    return 1 / (1 + np.exp(-x))


def softmax(x):
    """exp(x) normalized over the last axis (shifted by its max, which changes nothing
    mathematically and avoids overflow)."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax(x):
    """log(softmax(x)) over the last axis, computed stably."""
    s = x - x.max(axis=-1, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=-1, keepdims=True))


def conv2d(x, w, b=None, stride=1, padding=0):
    """One image ``x [C, H, W]`` cross-correlated with ``w [O, C, kh, kw]`` (plus ``b
    [O]``), zero padding on both sides of H and W, as PyTorch's conv2d: ``[O, Ho, Wo]``."""
    return batching.conv2d(x, w, b, stride, padding)


def max_pool2d(x, k, stride=None):
    """Max over ``k x k`` windows of the last two axes (stride ``k`` unless given)."""
    return batching.max_pool2d(x, k, stride)


def avg_pool2d(x, k, stride=None):
    """Mean over ``k x k`` windows of the last two axes (stride ``k`` unless given), as
    PyTorch's avg_pool2d without padding (LeNet-5's original pooling)."""
    return batching.avg_pool2d(x, k, stride)


conv2d.__hydra_array_op__ = ("conv2d", ("x", "w", "b"), ("stride", "padding"))
max_pool2d.__hydra_array_op__ = ("max_pool2d", ("x",), ("k", "stride"))
avg_pool2d.__hydra_array_op__ = ("avg_pool2d", ("x",), ("k", "stride"))
