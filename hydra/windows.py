"""Window operations on images ``[..., C, H, W]`` (any leading axes: one image, or every
lane's image lane axis first), written so that one call over all lanes runs at BLAS and
memory speed: ``conv2d`` as im2col + GEMM, the pools as elementwise passes over
strided slices.

Each function is both the per-lane definition (``hydra.batching.PER_LANE``: the
semantics a plain Python run of ``hydra.nn`` gets) and the batching rule's body: one
image is the special case of no leading axes, so the batched result of the pools is
bit-identical to a loop over the lanes; conv2d sums in BLAS's order (SPEC section 8's
summation tolerance).

- ``conv2d``: the im2col is written once, contiguously, as ``[images, C*kh*kw, P]``,
  then one batched GEMM ``W[O, C*kh*kw] @ cols`` whose result is already ``[images, O,
  Ho, Wo]`` (NumPy's layout, no transpose), then the bias (and a relu, for the cpu
  backend's layer steps) applied to that chunk while it is in the cache.  Stride 1
  (``_wide``): P is ``Ho`` rows of the padded width, so the columns of one window
  offset are one contiguous run of the flattened padded image (a copy at memory
  speed; the ``kw - 1`` extra outputs per row are dropped).  Other strides
  (``_strided``): ``kh*kw`` strided copies, the zero padding written into the columns.
  A view-based im2col (``sliding_window_view`` + ``tensordot``, before) spent more time
  in the reshape's copy than in the GEMM.  Images (and, for a large one, output rows)
  go in chunks of ``COLUMN_BYTES`` of columns, which stay in the caches for the GEMM and
  bound the memory.
- ``max_pool2d``, ``avg_pool2d``: ``k*k`` in-place ufunc passes, one per window offset,
  over the output's size (a ``ufunc.reduce`` over the window axes of a window view runs
  its inner loop per window: ~50x slower).  The max compares in the window's row-major
  order; the average adds in that order and divides by ``k*k``.
- ``avg_pool2d_grad``: ``g / (k*k)`` added back onto every window offset.
"""

from __future__ import annotations

import numpy as np

#: bytes of im2col columns one GEMM of ``conv2d`` gets (images or output rows per chunk)
COLUMN_BYTES = 1 << 20
#: ... but at least this many GEMM columns (images' output pixels) per chunk
MIN_COLUMNS = 1024
#: stride-1 convolutions by ``_wide`` (contiguous column runs) rather than ``_strided``
WIDE = True


def out_size(n: int, k: int, stride: int, padding: int = 0) -> int:
    return (n + 2 * padding - k) // stride + 1


def _valid(i: int, stride: int, padding: int, n: int, size: int, lo: int, hi: int):
    """The output positions ``[a, b)`` within ``[lo, hi)`` whose input ``p*stride + i -
    padding`` lies inside ``[0, size)``, and the first such input."""
    a = lo if i >= padding else max(lo, -(-(padding - i) // stride))
    b = min(hi, n, (size - 1 + padding - i) // stride + 1)
    b = max(a, b)
    return a, b, a * stride + i - padding


def _im2col(x, cols, kh, kw, stride, padding, r0, r1, wo):
    """Fill ``cols [n, C, kh, kw, r1 - r0, Wo]`` with the windows of output rows
    ``[r0, r1)`` of ``x [n, C, H, W]``, zeros where a window reaches the padding."""
    h, w = x.shape[-2:]
    ho_total = out_size(h, kh, stride, padding)
    for i in range(kh):
        a, b, first = _valid(i, stride, padding, ho_total, h, r0, r1)
        for j in range(kw):
            c0, c1, left = _valid(j, stride, padding, wo, w, 0, wo)
            dst = cols[:, :, i, j]
            if padding:
                dst[:, :, :a - r0] = 0
                dst[:, :, b - r0:] = 0
                dst[:, :, a - r0:b - r0, :c0] = 0
                dst[:, :, a - r0:b - r0, c1:] = 0
            if b > a and c1 > c0:
                dst[:, :, a - r0:b - r0, c0:c1] = x[
                    :, :, first:first + stride * (b - a - 1) + 1:stride,
                    left:left + stride * (c1 - c0 - 1) + 1:stride]


def conv2d(x, w, b=None, stride=1, padding=0, relu=None):
    """Cross-correlation of images ``[..., C, H, W]`` with ``w [O, C, kh, kw]`` (plus
    ``b [O]``), zero padding on both sides of H and W, as PyTorch's conv2d:
    ``[..., O, Ho, Wo]``.  ``relu``: a function applied in place to each chunk of the
    result after its bias (``relu_``)."""
    x, w = np.asarray(x), np.asarray(w)
    lead, (c, h, wd) = x.shape[:-3], x.shape[-3:]
    o, _, kh, kw = w.shape
    ho, wo = out_size(h, kh, stride, padding), out_size(wd, kw, stride, padding)
    n = int(np.prod(lead, dtype=np.int64))
    dtype = np.result_type(x, w)
    x = x.reshape((n, c, h, wd))
    wm = w.reshape(o, c * kh * kw).astype(dtype, copy=False)
    out = np.empty((n, o, ho, wo), dtype)
    b = None if b is None else np.asarray(b)
    # the bias and relu go to each chunk while it is in the cache, where they keep the dtype
    inner = b is None or np.result_type(out, b) == dtype
    if stride == 1 and WIDE:
        _wide(x, wm, out, kh, kw, padding, b if inner else None, relu if inner else None)
    else:
        _strided(x, wm, out, kh, kw, stride, padding, b if inner else None,
                 relu if inner else None)
    if not inner:
        out = out + b[:, None, None]
        if relu is not None:
            relu(out)
    return out.reshape(lead + out.shape[1:])


def _chunks(n: int, rows: int, row_bytes: int, column_bytes: int):
    """(images per chunk, output rows per chunk) for ``COLUMN_BYTES`` of columns, or
    ``MIN_COLUMNS`` GEMM columns where that is more (a deep layer's K is large)."""
    budget = max(COLUMN_BYTES, MIN_COLUMNS * column_bytes)
    if rows * row_bytes <= budget or rows <= 1:
        return max(1, budget // max(rows * row_bytes, 1)), rows
    return 1, max(1, budget // row_bytes)


def _finish(dst, b, relu) -> None:
    if b is not None:
        dst += b[:, None, None]
    if relu is not None:
        relu(dst)


def _wide(x, wm, out, kh, kw, padding, b, relu) -> None:
    """Stride 1: the columns of each window offset over the padded image's full width
    (``Wp`` per output row, the last ``kw - 1`` of each row unused), so each is ONE
    contiguous run of the flattened padded image, copied at memory speed; the chunk's
    images side by side in the GEMM's N dimension (one BLAS call per chunk); the
    unused outputs are dropped when the chunk is written out."""
    n, c, h, wd = x.shape
    o, ho, wo = out.shape[1:]
    hp, wp = h + 2 * padding, wd + 2 * padding
    k = c * kh * kw
    step, rows = _chunks(n, ho, k * wp * out.itemsize, k * out.itemsize)
    for n0 in range(0, n, step):
        n1 = min(n, n0 + step)
        nb = n1 - n0
        # one row more than the padding: the last offset's run ends kw - 1 past it
        xp = np.zeros((c, nb, hp + 1, wp), out.dtype)
        xp[:, :, padding:padding + h, padding:padding + wd] = x[n0:n1].transpose(1, 0, 2, 3)
        flat = xp.reshape(c, nb, (hp + 1) * wp)
        for r0 in range(0, ho, rows):
            r1 = min(ho, r0 + rows)
            span = (r1 - r0) * wp
            cols = np.empty((c, kh, kw, nb, span), out.dtype)
            for i in range(kh):
                for j in range(kw):
                    at = (r0 + i) * wp + j
                    cols[:, i, j] = flat[:, :, at:at + span]
            full = np.matmul(wm, cols.reshape(k, nb * span)).reshape(o, nb, r1 - r0, wp)
            dst = out[n0:n1, :, r0:r1]
            dst[...] = full.transpose(1, 0, 2, 3)[..., :wo]
            _finish(dst, b, relu)


def _strided(x, wm, out, kh, kw, stride, padding, b, relu) -> None:
    """Any stride: the columns ``[images, C*kh*kw, Ho*Wo]`` by strided copies."""
    n, c, h, wd = x.shape
    o, ho, wo = out.shape[1:]
    k = c * kh * kw
    step, rows = _chunks(n, ho, k * wo * out.itemsize, k * out.itemsize)
    for n0 in range(0, n, step):
        n1 = min(n, n0 + step)
        for r0 in range(0, ho, rows):
            r1 = min(ho, r0 + rows)
            cols = np.empty((n1 - n0, c, kh, kw, r1 - r0, wo), out.dtype)
            _im2col(x[n0:n1], cols, kh, kw, stride, padding, r0, r1, wo)
            flat = cols.reshape(n1 - n0, k, (r1 - r0) * wo)
            dst = out[n0:n1, :, r0:r1]
            if r1 - r0 == ho:
                np.matmul(wm, flat, out=dst.reshape(n1 - n0, o, ho * wo))  # in place
            else:
                dst[...] = np.matmul(wm, flat).reshape(n1 - n0, o, r1 - r0, wo)
            _finish(dst, b, relu)


def relu_(a) -> None:
    """``hydra.nn.relu`` of a float array in place, the bits of ``where(a <= 0, 0, a)``:
    ``np.maximum(a, 0)`` keeps a NaN and makes every other value <= 0 a zero, whose sign
    NumPy's SIMD and scalar loops may choose differently; adding +0.0 makes it +0.0 and
    changes nothing else.  (A masked copy, ``np.copyto(a, 0, where=a <= 0)``, is 12x
    slower.)  Only for arithmetic results, never signaling NaNs (which the add quiets)."""
    np.maximum(a, 0, out=a)
    np.add(a, 0.0, out=a)


def _offsets(x, k: int, stride):
    """The ``k*k`` strided slices of ``x [..., H, W]`` that each window offset sees, in
    the window's row-major order."""
    s = k if stride is None else stride
    h, w = x.shape[-2:]
    ho, wo = out_size(h, k, s), out_size(w, k, s)
    if ho < 1 or wo < 1:
        raise ValueError(f"a {k}x{k} window does not fit in a {h}x{w} image")
    for i in range(k):
        for j in range(k):
            yield x[..., i:i + s * (ho - 1) + 1:s, j:j + s * (wo - 1) + 1:s]


def max_pool2d(x, k, stride=None):
    """Max over ``k x k`` windows of the last two axes (stride ``k`` unless given)."""
    x = np.asarray(x)
    slices = _offsets(x, k, stride)
    out = np.array(next(slices))
    for part in slices:
        np.maximum(out, part, out=out)
    return out


def avg_pool2d(x, k, stride=None):
    """Mean over ``k x k`` windows of the last two axes (stride ``k`` unless given); the
    window's sum in row-major order divided by ``k*k``, as PyTorch's avg_pool2d without
    padding."""
    x = np.asarray(x)
    dtype = x.dtype if x.dtype.kind in "fc" else np.dtype(np.float64)
    slices = _offsets(x, k, stride)
    out = np.array(next(slices), dtype=dtype)
    for part in slices:
        np.add(out, part, out=out)
    out /= k * k
    return out


def avg_pool2d_grad(g, k, height, width, stride=None):
    """avg_pool2d's adjoint: each window's ``g / (k*k)`` added to every pixel of the
    window: ``[..., height, width]``."""
    g = np.asarray(g)
    share = g / (k * k)
    out = np.zeros(g.shape[:-2] + (height, width), share.dtype)
    for part in _offsets(out, k, stride):
        part += share
    return out
