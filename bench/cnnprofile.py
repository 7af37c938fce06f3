"""``python -m bench cnn --profile``: where a conv net's layer steps spend their time.

For each convolution of a ``bench.cnn`` model, one thread: the layer step's own call
(``hydra.windows.conv2d`` with the bias, the relu and a following 2x2 pool), the GEMMs it
runs on contiguous operands (Winograd's 16 transformed ones, or the im2col GEMM), and the
direct convolution's single ``[O, 9C] @ [9C, images*Ho*Wo]`` sgemm of the same size: what
is left outside BLAS, and what Winograd saves.  Calls interleaved, ``repeat`` rounds, best.
"""

from __future__ import annotations

import time

import numpy as np

from hydra import windows

from .cnn import ARCH


def layer_profile(name, images, repeat):
    """[(layer, path, step best s, its GEMMs best s, same-size sgemm best s)] for each
    convolution of ``name``: the layer step's own call (``hydra.windows.conv2d`` with the
    bias, the relu and a following 2x2 pool), the GEMMs it runs (Winograd: the 16
    transformed ones) on contiguous operands, and the direct convolution's single
    ``[O, 9C] @ [9C, images*Ho*Wo]`` sgemm: what is left outside BLAS and what Winograd
    saves.  Calls interleaved, ``repeat`` rounds."""
    shape, layers = ARCH[name]
    rng = np.random.default_rng(2)
    c, hw = shape[0], shape[1]
    out = []
    for at, layer in enumerate(layers):
        if layer[0] != "conv":
            continue  # a pool follows a convolution, which halves ``hw``
        _, o, _, k, p = layer
        pool = at + 1 < len(layers) and layers[at + 1][0] == "pool"
        x = rng.standard_normal((images, c, hw, hw), np.float32)
        w = (rng.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
        b = (rng.standard_normal(o) / 10).astype(np.float32)
        ho = hw + 2 * p - k + 1
        wino = k == 3 and c >= windows.WINOGRAD_CHANNELS and ho >= windows.WINOGRAD_WIDTH
        a = rng.standard_normal((o, c * k * k), np.float32)
        cols = rng.standard_normal((c * k * k, images * ho * ho), np.float32)
        u = rng.standard_normal((16, o, c), np.float32)
        v = rng.standard_normal((16, c, images * ((ho + 1) // 2) * ((ho + 1) // 2 + 1)),
                                np.float32)
        fns = [lambda: windows.conv2d(x, w, b, padding=p, relu=windows.relu_,
                                      pool=2 if pool else None),
               (lambda: np.matmul(u, v)) if wino else (lambda: np.matmul(a, cols)),
               lambda: np.matmul(a, cols)]
        times = [[] for _ in fns]
        for _ in range(repeat):
            for t, fn in zip(times, fns):
                t0 = time.perf_counter()
                fn()
                t.append(time.perf_counter() - t0)
        what = f"conv{k}x{k} {c}->{o} {hw}x{hw}" + (" +pool" if pool else "")
        out.append((what, "winograd" if wino else "im2col", *(min(t) for t in times)))
        c, hw = o, ho // 2 if pool else ho
    return out


def report(name, images, repeat) -> None:
    print(f"{'layer of ' + name:36} {'path':8} {'step ms':>8} {'its GEMMs':>9} "
          f"{'direct sgemm':>12}")
    for what, path, step, gemms, direct in layer_profile(name, images, repeat):
        print(f"{what:36} {path:8} {step * 1e3:8.2f} {gemms * 1e3:9.2f} {direct * 1e3:12.2f}",
              flush=True)
