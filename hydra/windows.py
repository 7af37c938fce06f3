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
  bound the memory.  3x3 stride-1 layers with many channels (``_winograd``): Winograd's
  F(2x2, 3x3), 16 GEMMs over 4x4 transformed tiles, 2.25x fewer multiplications.
  Each chunk leaves through ``_Emit``: an optional 2x2 max pool of the chunk (the
  layer step's conv+relu+pool), the bias added as it is copied into NCHW, the relu.
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
#: 3x3 stride-1 convolutions of at least this many input channels and output columns by
#: Winograd's F(2x2, 3x3) (``_winograd``): measured 1.2-1.8x faster on VGG-19's layers
#: of 64-512 channels and 28-224 columns (bench/RESULTS.md); on 32 channels or 14-16
#: columns (the small VGG, VGG-19's last block) no faster than im2col: NumPy's passes
#: over its transforms' short runs cost what the GEMMs save
WINOGRAD_CHANNELS = 64
WINOGRAD_WIDTH = 20


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


def conv2d(x, w, b=None, stride=1, padding=0, relu=None, pool=None):
    """Cross-correlation of images ``[..., C, H, W]`` with ``w [O, C, kh, kw]`` (plus
    ``b [O]``), zero padding on both sides of H and W, as PyTorch's conv2d:
    ``[..., O, Ho, Wo]``.  ``relu``: a function applied in place to each chunk of the
    result after its bias (``relu_``).  ``pool``: a ``pool x pool`` max pool (stride
    ``pool``) after the relu, ``[..., O, Ho // pool, Wo // pool]``, taken from each chunk
    before it is written out (where ``pool`` is 2 and ``Ho``, ``Wo`` are even; with ``relu_``
    the same bits as pooling the relu's result: max and relu commute, and adding the
    bias after the max rounds the same values)."""
    x, w = np.asarray(x), np.asarray(w)
    lead, (c, h, wd) = x.shape[:-3], x.shape[-3:]
    o, _, kh, kw = w.shape
    ho, wo = out_size(h, kh, stride, padding), out_size(wd, kw, stride, padding)
    n = int(np.prod(lead, dtype=np.int64))
    dtype = np.result_type(x, w)
    x = x.reshape((n, c, h, wd))
    b = None if b is None else np.asarray(b)
    # the bias and relu go to each chunk while it is in the cache, where they keep the dtype
    inner = b is None or np.result_type(dtype, b) == dtype
    if pool is not None and (not inner or pool != 2 or ho % 2 or wo % 2):
        y = conv2d(x, w, b, stride, padding, relu)
        return max_pool2d(y, pool).reshape(lead + (o, ho // pool, wo // pool))
    s = pool or 1
    out = np.empty((n, o, ho // s, wo // s), dtype)
    emit = _Emit(out, b if inner else None, relu if inner else None, pool)
    if stride == 1 and kh == kw == 3 and c >= WINOGRAD_CHANNELS and wo >= WINOGRAD_WIDTH:
        _winograd(x, w, emit, padding, ho, wo)
    elif stride == 1 and WIDE:
        _wide(x, w.reshape(o, c * kh * kw).astype(dtype, copy=False), emit, kh, kw, padding,
              ho, wo)
    else:
        _strided(x, w.reshape(o, c * kh * kw).astype(dtype, copy=False), emit, kh, kw,
                 stride, padding, ho, wo)
    if not inner:
        out = out + b[:, None, None]
        if relu is not None:
            relu(out)
    return out.reshape(lead + out.shape[1:])


def _chunks(n: int, rows: int, row_bytes: int, column_bytes: int):
    """(images per chunk, output rows per chunk: even, so that 2x2 pools and Winograd
    tiles never straddle two chunks) for ``COLUMN_BYTES`` of columns, or ``MIN_COLUMNS``
    GEMM columns where that is more (a deep layer's K is large)."""
    budget = max(COLUMN_BYTES, MIN_COLUMNS * column_bytes)
    if rows * row_bytes <= budget or rows <= 2:
        return max(1, budget // max(rows * row_bytes, 1)), rows
    return 1, max(2, budget // row_bytes // 2 * 2)


class _Emit:
    """Writes blocks of the convolution (views ``[O, images, rows, Wo]``) into ``out``
    (``[images, O, Ho, Wo]``, or the pooled ``[images, O, Ho // k, Wo // k]``): pooled
    (the maxima of the block's ``k*k`` window offsets, in the window's row-major
    order), then the bias added as it is copied, then the relu in place."""

    def __init__(self, out, b, relu, pool) -> None:
        self.out, self.relu, self.pool = out, relu, pool
        self.b = None if b is None else b[:, None, None, None]

    def __call__(self, block, n0: int, r0: int) -> None:
        k = self.pool
        if k:
            views = _offsets(block, k, k)
            block = np.array(next(views))
            for part in views:
                np.maximum(block, part, out=block)
            r0 //= k
        self._write(block, n0, r0)

    def _write(self, block, n0: int, r0: int) -> None:
        dst = self.out[n0:n0 + block.shape[1], :, r0:r0 + block.shape[2]].transpose(1, 0, 2, 3)
        self._biased(block, dst)
        if self.relu is not None:
            self.relu(dst)

    def _biased(self, src, dst) -> None:
        if self.b is not None:
            np.add(src, self.b, out=dst)
        else:
            dst[...] = src

    def tiles(self, ys, n0: int, r0: int, rows: int, wo: int) -> None:
        """Winograd's 2x2 output tiles: ``ys[i][j]`` holds output pixels ``(2r + i, 2c
        + j)`` of the block's output rows ``[r0, r0 + rows)``, ``[O, images, tile rows,
        tile columns]`` (one unused tile column at the end)."""
        if self.pool:  # the tile is the 2x2 window
            m = ys[0][0]
            for y in (ys[0][1], ys[1][0], ys[1][1]):
                np.maximum(m, y, out=m)
            self._write(m[:, :, :rows // 2, :wo // 2], n0, r0 // 2)
            return
        dst = self.out[n0:n0 + ys[0][0].shape[1], :, r0:r0 + rows].transpose(1, 0, 2, 3)
        for i in range(2):
            for j in range(2):
                d = dst[:, :, i::2, j::2]
                self._biased(ys[i][j][:, :, :d.shape[2], :d.shape[3]], d)
        if self.relu is not None:
            self.relu(dst)


def _wide(x, wm, emit, kh, kw, padding, ho, wo) -> None:
    """Stride 1: the columns of each window offset over the padded image's full width
    (``Wp`` per output row, the last ``kw - 1`` of each row unused), so each is ONE
    contiguous run of the flattened padded image, copied at memory speed; the chunk's
    images side by side in the GEMM's N dimension (one BLAS call per chunk); the
    unused outputs are dropped when the chunk is written out."""
    n, c, h, wd = x.shape
    o, k = wm.shape
    hp, wp = h + 2 * padding, wd + 2 * padding
    step, rows = _chunks(n, ho, k * wp * wm.itemsize, k * wm.itemsize)
    for n0 in range(0, n, step):
        n1 = min(n, n0 + step)
        nb = n1 - n0
        # one row more than the padding: the last offset's run ends kw - 1 past it
        xp = np.zeros((c, nb, hp + 1, wp), wm.dtype)
        xp[:, :, padding:padding + h, padding:padding + wd] = x[n0:n1].transpose(1, 0, 2, 3)
        flat = xp.reshape(c, nb, (hp + 1) * wp)
        for r0 in range(0, ho, rows):
            r1 = min(ho, r0 + rows)
            span = (r1 - r0) * wp
            cols = np.empty((c, kh, kw, nb, span), wm.dtype)
            for i in range(kh):
                for j in range(kw):
                    at = (r0 + i) * wp + j
                    cols[:, i, j] = flat[:, :, at:at + span]
            full = np.matmul(wm, cols.reshape(k, nb * span)).reshape(o, nb, r1 - r0, wp)
            emit(full[..., :wo], n0, r0)


def _strided(x, wm, emit, kh, kw, stride, padding, ho, wo) -> None:
    """Any stride: the columns ``[images, C*kh*kw, Ho*Wo]`` by strided copies."""
    n, c, h, wd = x.shape
    o, k = wm.shape
    step, rows = _chunks(n, ho, k * wo * wm.itemsize, k * wm.itemsize)
    for n0 in range(0, n, step):
        n1 = min(n, n0 + step)
        for r0 in range(0, ho, rows):
            r1 = min(ho, r0 + rows)
            cols = np.empty((n1 - n0, c, kh, kw, r1 - r0, wo), wm.dtype)
            _im2col(x[n0:n1], cols, kh, kw, stride, padding, r0, r1, wo)
            full = np.matmul(wm, cols.reshape(n1 - n0, k, (r1 - r0) * wo))
            emit(full.reshape(n1 - n0, o, r1 - r0, wo).transpose(1, 0, 2, 3), n0, r0)


#: Winograd's F(2x2, 3x3) filter transform ``G``; its data transform ``B^T`` rows are
#: ``d0 - d2, d1 + d2, d2 - d1, d1 - d3`` and its output transform ``A^T`` rows
#: ``m0 + m1 + m2, m1 - m2 - m3`` (Lavin and Gray 2016), written out below
_G = np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]])


def _bt(d, out, i) -> None:
    if i == 0:
        np.subtract(d[0], d[2], out=out)
    elif i == 1:
        np.add(d[1], d[2], out=out)
    elif i == 2:
        np.subtract(d[2], d[1], out=out)
    else:
        np.subtract(d[1], d[3], out=out)


def _at(m, out, i) -> None:
    if i == 0:
        np.add(m[0], m[1], out=out)
        out += m[2]
    else:
        np.subtract(m[1], m[2], out=out)
        out -= m[3]


def _winograd(x, w, emit, padding, ho, wo) -> None:
    """Stride 1, 3x3, many channels (VGG's deep layers): Winograd's F(2x2, 3x3), 16
    GEMMs ``U[t] [O, C] @ V[t] [C, tiles]`` (t over the 4x4 transformed tile) in place
    of one ``[O, 9C] @ [9C, pixels]``: 2.25x fewer multiplications.  The padded images
    are split once by the parity of their rows and columns, so every transform below
    is a pass over contiguous runs: a tile row's ``tw + 1`` tiles (one unused, like
    ``_wide``'s extra columns) over the flattened (tile row, tile column) axis.  The
    result differs from the direct sums by rounding only (the transforms' adds and
    halvings; SPEC section 8's tolerance, as BLAS's own summation order)."""
    n, c, h, wd = x.shape
    o = w.shape[0]
    dt = emit.out.dtype
    th, tw = -(-ho // 2), -(-wo // 2)
    w1 = tw + 1
    u = np.einsum("ai,ocij,bj->aboc", _G, w.astype(np.float64), _G).astype(dt)
    u = u.reshape(16, o, c)
    step, rows = _chunks(n, 2 * th, 16 * (c + o) * w1 * dt.itemsize // 2,
                         16 * (c + o) * dt.itemsize)
    for n0 in range(0, n, step):
        n1 = min(n, n0 + step)
        nb = n1 - n0
        # z[:, :, a, b, R, K] = padded[2R + a, 2K + b]; one element more at the end, which
        # the last tile row's unused tile reads
        zf = np.zeros((c, nb, 2, 2, (th + 1) * w1 + 1), dt)
        z = zf[..., :-1].reshape(c, nb, 2, 2, th + 1, w1)
        xt = x[n0:n1].transpose(1, 0, 2, 3)
        for a in range(2):
            y0 = (a - padding) % 2
            for b in range(2):
                x0 = (b - padding) % 2
                part = xt[:, :, y0::2, x0::2]
                r, k = (padding + y0) // 2, (padding + x0) // 2
                z[:, :, a, b, r:r + part.shape[2], k:k + part.shape[3]] = part
        for t0 in range(0, th, rows // 2):
            t1 = min(th, t0 + rows // 2)
            span = (t1 - t0) * w1
            d = [zf[:, :, a % 2, :, (t0 + a // 2) * w1:(t0 + a // 2) * w1 + span + 1]
                 for a in range(4)]
            v = np.empty((4, 4, c, nb, span), dt)
            t = np.empty((c, nb, 2, span + 1), dt)
            for i in range(4):
                _bt(d, t, i)
                e = [t[:, :, j % 2, j // 2:j // 2 + span] for j in range(4)]
                for j in range(4):
                    _bt(e, v[i, j], j)
            m = np.matmul(u, v.reshape(16, c, nb * span)).reshape(4, 4, o, nb * span)
            s = np.empty((2, 4, o, nb * span), dt)
            for i in range(2):
                _at(m, s[i], i)
            ys = [[np.empty((o, nb, t1 - t0, w1), dt) for _ in range(2)] for _ in range(2)]
            for i in range(2):
                for j in range(2):
                    _at(s[i], ys[i][j].reshape(o, nb * span), j)
            emit.tiles(ys, n0, 2 * t0, min(ho, 2 * t1) - 2 * t0, wo)


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
