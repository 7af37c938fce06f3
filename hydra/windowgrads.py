"""The adjoints of the window operations (``conv2d``, ``max_pool2d``) on images ``[...,
C, H, W]`` with any leading axes (one image, or every lane's image lane axis first),
written so that one call over all lanes runs at BLAS and memory speed, as
``hydra.windows`` does for the forward pass.

Each function is both the per-lane definition (``hydra.batching.PER_LANE``: what
``hydra.grad``'s adjoint rules emit and the numpy backend runs) and the body of its
batching rule: one image is the case of no leading axes.

- ``conv2d_grad_weight(x, g)``: the correlation of the images with the output's
  adjoint, ``[..., O, C, kh, kw]``: the im2col of the images written once, contiguously,
  as ``[images, C*kh*kw, Ho*Wo]``, then one batched GEMM ``g [images, O, Ho*Wo] @
  cols^T``.  Leading axes broadcast (a uniform image against per-lane adjoints makes
  its columns once).  An ``einsum`` over a window view (before) ran no GEMM: 10 ms for
  the digits CNN's 512 lanes, against 0.3 ms.  Images go in chunks of ``COLUMN_BYTES``
  of columns, as ``hydra.windows.conv2d``'s.  (One GEMM over all lanes' output
  positions, ``[O, images*Ho*Wo] @ [images*Ho*Wo, C*kh*kw]``, for a ``lanesum`` of the
  weights' gradient, measured 1.3-4x slower than the batched GEMM and its sum over the
  lanes: its operands need a transposed copy each.)
- ``conv2d_grad_input(g, w)``: the transposed convolution, ``[..., C, H, W]``: one GEMM
  ``w^T [C*kh*kw, O] @ g`` with the images folded into its N dimension (a batched
  product would make one small BLAS call per image), then ``kh*kw`` strided adds of the
  columns back onto the (padded) images (col2im), in the window's row-major order.
- ``max_pool2d_grad(x, g)``: each window's ``g`` added to its first maximum in
  row-major order (a NaN counts as the maximum, as ``argmax``), windows in row-major
  order; the cpu backend runs it as one native pass (``hydra.executor.windowsteps``,
  bit-identical: the same adds in the same order).

The GEMMs sum in BLAS's order (SPEC section 8's summation tolerance); the pools' and
col2im's adds are in a fixed order, the same for one image and for all lanes.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

#: bytes of im2col columns one chunk of images makes (they stay in the caches for its
#: GEMM: LeNet's first layer's columns for 256 images are 15 MB)
COLUMN_BYTES = 1 << 20


def out_size(n: int, k: int, stride: int, padding: int = 0) -> int:
    return (n + 2 * padding - k) // stride + 1


def _padded(x, padding: int, dtype):
    """``x [n, C, H, W]`` with ``padding`` zeros around H and W, as ``dtype``."""
    if not padding:
        return x.astype(dtype, copy=False)
    n, c, h, w = x.shape
    out = np.zeros((n, c, h + 2 * padding, w + 2 * padding), dtype)
    out[:, :, padding:padding + h, padding:padding + w] = x
    return out


def columns(x, kh: int, kw: int, stride: int = 1, padding: int = 0, dtype=None):
    """The im2col of images ``x [n, C, H, W]``: ``[n, C*kh*kw, Ho*Wo]`` (row ``(c, i,
    j)`` holds the pixel each output position's window has at offset ``(i, j)`` of
    channel ``c``), written by ``kh*kw`` strided copies."""
    x = np.asarray(x)
    n, c, h, w = x.shape
    dtype = x.dtype if dtype is None else dtype
    ho, wo = out_size(h, kh, stride, padding), out_size(w, kw, stride, padding)
    xp = _padded(x, padding, dtype)
    cols = np.empty((n, c, kh, kw, ho, wo), dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = xp[:, :, i:i + stride * (ho - 1) + 1:stride,
                                  j:j + stride * (wo - 1) + 1:stride]
    return cols.reshape(n, c * kh * kw, ho * wo)


def _images(a, ndim: int = 3):
    """``a [..., C, H, W]`` as ``([n, C, H, W], leading shape)``."""
    a = np.asarray(a)
    lead = a.shape[:-ndim]
    return a.reshape((int(np.prod(lead, dtype=np.int64)),) + a.shape[-ndim:]), lead


def _chunk(image_bytes: int) -> int:
    """Images per chunk: ``COLUMN_BYTES`` of columns, at least one image."""
    return max(1, COLUMN_BYTES // max(image_bytes, 1))


def conv2d_grad_weight(x, g, kh, kw, stride=1, padding=0):
    """conv2d's adjoint for its weights: images ``x [..., C, H, W]`` correlated with
    ``g [..., O, Ho, Wo]``: ``[..., O, C, kh, kw]``."""
    x, g = np.asarray(x), np.asarray(g)
    dtype = np.result_type(x, g)
    c, h, w = x.shape[-3:]
    o, ho, wo = g.shape[-3:]
    k, p = c * kh * kw, ho * wo
    gm = g.reshape(g.shape[:-3] + (o, p)).astype(dtype, copy=False)
    if x.ndim == 3:  # one image for all adjoints: its columns once
        cols = columns(x[None], kh, kw, stride, padding, dtype)[0]
        return np.matmul(gm, cols.T).reshape(g.shape[:-3] + (o, c, kh, kw))
    lead = np.broadcast_shapes(x.shape[:-3], g.shape[:-3])
    n = int(np.prod(lead, dtype=np.int64))
    xs = np.broadcast_to(x, lead + (c, h, w)).reshape(n, c, h, w)
    gs = np.broadcast_to(gm, lead + (o, p)).reshape(n, o, p)
    out = np.empty((n, o, k), dtype)
    step = _chunk(k * p * out.itemsize)
    for n0 in range(0, n, step):  # each image's own GEMM: the chunks change no bits
        cols = columns(xs[n0:n0 + step], kh, kw, stride, padding, dtype)
        np.matmul(gs[n0:n0 + step], cols.transpose(0, 2, 1), out=out[n0:n0 + step])
    return out.reshape(lead + (o, c, kh, kw))


def conv2d_grad_input(g, w, height, width, stride=1, padding=0):
    """conv2d's adjoint for its images: ``g [..., O, Ho, Wo]`` spread back through
    ``w [O, C, kh, kw]`` onto ``[..., C, height, width]`` (a transposed convolution)."""
    g, w = np.asarray(g), np.asarray(w)
    o, c, kh, kw = w.shape
    dtype = np.result_type(g, w)
    gs, lead = _images(g)
    n, _, ho, wo = gs.shape
    wt = w.reshape(o, c * kh * kw).T.astype(dtype, copy=False)
    hp, wp = height + 2 * padding, width + 2 * padding
    out = np.zeros((n, c, hp, wp), dtype)
    step = _chunk(c * kh * kw * ho * wo * out.itemsize)
    for n0 in range(0, n, step):
        m = min(step, n - n0)
        # [C*kh*kw, O] @ [O, m*Ho*Wo]: the chunk's images side by side in the GEMM's N
        folded = gs[n0:n0 + m].transpose(1, 0, 2, 3).reshape(o, m * ho * wo)
        cols = (wt @ folded.astype(dtype, copy=False)).reshape(c, kh, kw, m, ho, wo)
        dst = out[n0:n0 + m]
        for i in range(kh):
            for j in range(kw):
                dst[:, :, i:i + stride * (ho - 1) + 1:stride,
                    j:j + stride * (wo - 1) + 1:stride] += cols[:, i, j].transpose(1, 0, 2, 3)
    out = out[:, :, padding:padding + height, padding:padding + width]
    return np.ascontiguousarray(out).reshape(lead + (c, height, width))


def max_pool2d_grad(x, g, k, stride=None):
    """max_pool2d's adjoint: each window's ``g`` to the first maximum of the window in
    row-major order (as PyTorch), 0 elsewhere: the shape of ``x [..., H, W]``."""

    x = np.asarray(x)
    s = k if stride is None else stride
    win = sliding_window_view(x, (k, k), axis=(-2, -1))[..., ::s, ::s, :, :]
    ho, wo = win.shape[-4:-2]
    di, dj = np.divmod(win.reshape(win.shape[:-2] + (k * k,)).argmax(-1), k)
    rows = (np.arange(ho)[:, None] * s + di).reshape(-1, ho, wo)
    cols = (np.arange(wo)[None, :] * s + dj).reshape(-1, ho, wo)
    out = np.zeros(x.shape, np.result_type(x, g)).reshape((-1,) + x.shape[-2:])
    lead = np.arange(out.shape[0])[:, None, None]
    np.add.at(out, (lead, rows, cols), np.broadcast_to(g, win.shape[:-2]).reshape(-1, ho, wo))
    return out.reshape(x.shape)
