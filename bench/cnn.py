"""Per-example CNNs on the cpu backend against PyTorch, hand-batched NumPy and the BLAS.

    python -m bench cnn [--repeat N] [--vgg19] [--threads 1,2] [--no-firstcall]
                        [--images K] [--coretype] [--only MODEL] [--against DIR]
                        [--profile]

Each model is written for ONE image with ``hydra.nn`` (``lenet``, ``vgg_small``,
``vgg19``) and compiled with ``hydra.compile(..., varying="x", backend="cpu")``; the
same function run image by image in plain Python is the oracle every row is checked
against (float32: summation order differs, ``TOLERANCE``).  Rows, each on one thread
and on all cores (hydra's ``threads=T`` and its BLAS held to T threads with threadpoolctl,
PyTorch's ``set_num_threads(T)``):

- ``hydra cpu``: the compiled per-example function on all images;
- ``numpy im2col+GEMM``: the same network hand-batched in NumPy (one contiguous im2col
  and one GEMM per convolution, lanes folded into the GEMM's N dimension);
- ``torch eager``: PyTorch's conv2d/max_pool2d/linear under ``no_grad`` (NCHW), where
  torch is importable, and ``jax jit(vmap)`` of the same network for one image
  (``bench/jaxpeers.py``) where jax is (XLA's threads are fixed when jax is imported:
  one thread if the first row is, then run other thread counts with ``--threads T``),
  and the same as two ``jit(vmap)`` calls, convolutions | dense layers (jaxlib 0.10.2
  fuses VGG-19's last pool and dense layers into one slow library call);
- ``sgemm ceiling``: only the GEMMs the network needs (each convolution as one
  ``[O, C*kh*kw] @ [C*kh*kw, images*Ho*Wo]`` and each dense layer), on contiguous
  operands, with the BLAS NumPy runs: the time no direct (im2col) implementation that
  spends its FLOPs in this BLAS can beat (hydra's Winograd layers do fewer).

``--profile`` prints, per convolution, the layer step's time, the GEMMs it runs and the
direct convolution's sgemm of the same size (one thread, interleaved).

Timings on one thread are interleaved (one call of each row in turn, ``repeat`` rounds;
median and best); on more, each row's calls run as one block (thread pools that spin
after a call steal the next row's cores).  The first calls: LeNet-5's forward and the
digits training kernel (``examples/digits_cnn.py``'s ``batch_grads``), each compiled and
called in a fresh process with an empty hydra cache, best of 3, and when the loops it
queued finished building in the background (``--against DIR``: also another checkout's
hydra).  ``--coretype`` unsets
``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` in a re-executed bench process (never in
tests) so OpenBLAS picks its kernel for this CPU; the BLAS line says which ran.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import hydra
from hydra import nn

from . import jaxpeers
from .ml import blas_report as ml_blas_report

try:  # a tree that builds generated loops in the background (its steady state is timed)
    from hydra.backends.machinecode import background
except ImportError:  # an older tree (first calls against it: --against)
    try:
        from hydra.backends.cpu import background
    except ImportError:
        background = None

TOLERANCE = 2e-3  # float32 sums in another order than the per-image oracle's


# ---- the models, for ONE image -------------------------------------------------------

def lenet(x, W1, b1, W2, b2, F1, c1, F2, c2, F3, c3):
    """LeNet-5 (as the issue's): 1x28x28 -> conv5x5 6, relu, pool 2, conv5x5 16, relu,
    pool 2, dense 256-120-84-10 with relu."""
    h = nn.max_pool2d(nn.relu(nn.conv2d(x, W1, b1)), 2)
    h = nn.max_pool2d(nn.relu(nn.conv2d(h, W2, b2)), 2)
    h = nn.relu(F1 @ h.reshape(256) + c1)
    h = nn.relu(F2 @ h + c2)
    return F3 @ h + c3


def vgg_small(x, W1, b1, W2, b2, W3, b3, W4, b4, F, c):
    """3x32x32 -> (conv3x3 32 pad 1, relu) x2, pool 2, (conv3x3 64 pad 1, relu) x2, pool 2,
    dense 4096-10."""
    h = nn.relu(nn.conv2d(x, W1, b1, padding=1))
    h = nn.max_pool2d(nn.relu(nn.conv2d(h, W2, b2, padding=1)), 2)
    h = nn.relu(nn.conv2d(h, W3, b3, padding=1))
    h = nn.max_pool2d(nn.relu(nn.conv2d(h, W4, b4, padding=1)), 2)
    return F @ h.reshape(4096) + c


VGG19 = (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
         512, 512, 512, 512, "M")


def vgg19(x, W1, b1, W2, b2, W3, b3, W4, b4, W5, b5, W6, b6, W7, b7, W8, b8, W9, b9,
          W10, b10, W11, b11, W12, b12, W13, b13, W14, b14, W15, b15, W16, b16,
          F1, c1, F2, c2, F3, c3):
    """VGG-19's shape on 3x224x224 (16 conv3x3 pad 1 + relu, 5 pools, dense
    25088-4096-4096-1000); random weights."""
    h = nn.relu(nn.conv2d(x, W1, b1, padding=1))
    h = nn.max_pool2d(nn.relu(nn.conv2d(h, W2, b2, padding=1)), 2)
    h = nn.relu(nn.conv2d(h, W3, b3, padding=1))
    h = nn.max_pool2d(nn.relu(nn.conv2d(h, W4, b4, padding=1)), 2)
    h = nn.relu(nn.conv2d(h, W5, b5, padding=1))
    h = nn.relu(nn.conv2d(h, W6, b6, padding=1))
    h = nn.relu(nn.conv2d(h, W7, b7, padding=1))
    h = nn.max_pool2d(nn.relu(nn.conv2d(h, W8, b8, padding=1)), 2)
    h = nn.relu(nn.conv2d(h, W9, b9, padding=1))
    h = nn.relu(nn.conv2d(h, W10, b10, padding=1))
    h = nn.relu(nn.conv2d(h, W11, b11, padding=1))
    h = nn.max_pool2d(nn.relu(nn.conv2d(h, W12, b12, padding=1)), 2)
    h = nn.relu(nn.conv2d(h, W13, b13, padding=1))
    h = nn.relu(nn.conv2d(h, W14, b14, padding=1))
    h = nn.relu(nn.conv2d(h, W15, b15, padding=1))
    h = nn.max_pool2d(nn.relu(nn.conv2d(h, W16, b16, padding=1)), 2)
    h = nn.relu(F1 @ h.reshape(25088) + c1)
    h = nn.relu(F2 @ h + c2)
    return F3 @ h + c3


# layer lists: ("conv", O, C, k, padding) / ("pool", k) / ("dense", out, in, relu)
ARCH = {
    "lenet": ((1, 28, 28), [("conv", 6, 1, 5, 0), ("pool", 2), ("conv", 16, 6, 5, 0),
                            ("pool", 2), ("dense", 120, 256, True), ("dense", 84, 120, True),
                            ("dense", 10, 84, False)]),
    "vgg_small": ((3, 32, 32), [("conv", 32, 3, 3, 1), ("conv", 32, 32, 3, 1), ("pool", 2),
                                ("conv", 64, 32, 3, 1), ("conv", 64, 64, 3, 1), ("pool", 2),
                                ("dense", 10, 4096, False)]),
}


def _vgg19_arch():
    layers, c = [], 3
    for v in VGG19:
        if v == "M":
            layers.append(("pool", 2))
        else:
            layers.append(("conv", v, c, 3, 1))
            c = v
    layers += [("dense", 4096, 25088, True), ("dense", 4096, 4096, True),
               ("dense", 1000, 4096, False)]
    return (3, 224, 224), layers


ARCH["vgg19"] = _vgg19_arch()
MODELS = {"lenet": lenet, "vgg_small": vgg_small, "vgg19": vgg19}
IMAGES = {"lenet": 256, "vgg_small": 64, "vgg19": 8}


def setup(name: str, images: int, seed: int = 0):
    """(x [images, *shape], params): weights N(0,1)/sqrt(fan_in), biases N(0,1)/10, inputs
    N(0,1), float32, fixed seed."""
    shape, layers = ARCH[name]
    rng = np.random.default_rng(seed)
    params = []
    for layer in layers:
        if layer[0] == "conv":
            _, o, c, k, _ = layer
            params += [rng.standard_normal((o, c, k, k)) / np.sqrt(c * k * k),
                       rng.standard_normal(o) / 10]
        elif layer[0] == "dense":
            _, o, i, _ = layer
            params += [rng.standard_normal((o, i)) / np.sqrt(i), rng.standard_normal(o) / 10]
    x = rng.standard_normal((images, *shape))
    return x.astype(np.float32), [p.astype(np.float32) for p in params]


# ---- peers ---------------------------------------------------------------------------

def oracle(name, x, params):
    f = MODELS[name]
    return np.stack([f(x[i], *params) for i in range(len(x))])


def _conv_numpy(x, w, b, padding):
    """All images' convolution as one contiguous im2col [C*k*k, N*Ho*Wo] and one GEMM."""
    n, c, h, wd = x.shape
    o, _, k, _ = w.shape
    if padding:
        x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    ho, wo = x.shape[2] - k + 1, x.shape[3] - k + 1
    cols = np.empty((c, k, k, n, ho, wo), x.dtype)
    xt = x.transpose(1, 0, 2, 3)
    for i in range(k):
        for j in range(k):
            cols[:, i, j] = xt[:, :, i:i + ho, j:j + wo]
    out = w.reshape(o, -1) @ cols.reshape(c * k * k, -1)
    out += b[:, None]
    np.maximum(out, 0, out=out)
    return out.reshape(o, n, ho, wo).transpose(1, 0, 2, 3)


def numpy_batched(name, x, params):
    """The network hand-batched: im2col+GEMM convolutions (relu fused after the GEMM),
    pooling as elementwise maxima of strided slices, dense layers as GEMMs."""
    _, layers = ARCH[name]
    it = iter(params)
    h = x
    for layer in layers:
        if layer[0] == "conv":
            h = _conv_numpy(h, next(it), next(it), layer[4])
        elif layer[0] == "pool":
            h = np.maximum(np.maximum(h[:, :, 0::2, 0::2], h[:, :, 0::2, 1::2]),
                           np.maximum(h[:, :, 1::2, 0::2], h[:, :, 1::2, 1::2]))
        else:
            w, b = next(it), next(it)
            h = h.reshape(len(h), -1) @ w.T + b
            if layer[3]:
                np.maximum(h, 0, out=h)
    return h


def gemm_ceiling(name, images):
    """A function running just the network's GEMMs (contiguous float32 operands)."""
    shape, layers = ARCH[name]
    rng = np.random.default_rng(1)
    c, hw = shape[0], shape[1]
    gemms = []
    for layer in layers:
        if layer[0] == "conv":
            _, o, _, k, p = layer
            hw = hw + 2 * p - k + 1
            gemms.append((rng.standard_normal((o, c * k * k), np.float32),
                          rng.standard_normal((c * k * k, images * hw * hw), np.float32)))
            c = o
        elif layer[0] == "pool":
            hw //= layer[1]
        else:
            _, o, i, _ = layer
            gemms.append((rng.standard_normal((images, i), np.float32),
                          rng.standard_normal((i, o), np.float32)))
    outs = [np.empty((a.shape[0], b.shape[1]), np.float32) for a, b in gemms]

    def run():
        for (a, b), out in zip(gemms, outs):
            np.matmul(a, b, out=out)
    return run


def torch_impl(name, threads):
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    _, layers = ARCH[name]

    def f(x, params):
        torch.set_num_threads(threads)
        it = iter([torch.from_numpy(p) for p in params])
        with torch.no_grad():
            h = torch.from_numpy(x)
            for layer in layers:
                if layer[0] == "conv":
                    h = torch.relu(F.conv2d(h, next(it), next(it), padding=layer[4]))
                elif layer[0] == "pool":
                    h = F.max_pool2d(h, layer[1])
                else:
                    h = F.linear(h.reshape(len(h), -1), next(it), next(it))
                    if layer[3]:
                        h = torch.relu(h)
            return h.numpy()
    return f


def jax_impl(name, threads, split=False):
    """``jit(vmap)`` of the network for one image (bench/jaxpeers.py; ``split``: its
    convolutions and its dense layers as two), or the line saying why there is no JAX
    row."""
    f, why = jaxpeers.cnn_forward(ARCH[name][1], threads, split)
    return f or why


# ---- timing --------------------------------------------------------------------------

def blas_report() -> str:
    """``bench.ml``'s BLAS line (kernel, threads, the OpenBLAS variables), with what
    PyTorch's oneDNN runs."""
    onednn = ""
    try:
        import torch
        onednn = f"; torch {torch.__version__} mkldnn={torch.backends.mkldnn.is_available()}" \
                 f" cpu capability {torch.backends.cpu.get_cpu_capability()}"
    except Exception:  # noqa: BLE001  (torch absent or too old to say)
        pass
    return ml_blas_report() + onednn


def _limit(threads):
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    return threadpool_limits(threads, user_api="blas")


def rows(name, images, threads, repeat):
    """[(label, median s, best s, agrees)] of every implementation of ``name``."""
    x, params = setup(name, images)
    want = oracle(name, x, params)
    impls = []
    k = hydra.compile(MODELS[name], varying="x", backend="cpu", threads=threads)
    impls.append(("hydra cpu", lambda: k(x, *params)))
    impls.append(("numpy im2col+GEMM", lambda: numpy_batched(name, x, params)))
    t = torch_impl(name, threads)
    impls.append(("torch eager (oneDNN)", (lambda: t(x, params)) if t else None))
    j, js = jax_impl(name, threads), jax_impl(name, threads, split=True)
    impls.append(("jax jit(vmap)", (lambda: j(x, params)) if callable(j) else None))
    impls.append(("jax jit(vmap), convs | dense", (lambda: js(x, params)) if callable(js)
                  else None))
    skipped = {"jax jit(vmap)": j if isinstance(j, str) else None,
               "jax jit(vmap), convs | dense": js if isinstance(js, str) else None}
    ceiling = gemm_ceiling(name, images)
    impls.append(("sgemm ceiling (GEMMs only)", ceiling))
    live = [(label, fn) for label, fn in impls if fn is not None]
    outs, times = {}, {label: [] for label, _ in live}
    with _limit(threads) or _Null():
        for label, fn in live:
            outs[label] = fn()  # warm up (compiles)
        if background is not None:
            background.wait()  # hydra's loops built in the background: the steady state
        # one thread: interleaved rounds; more: blocks (a thread pool that spins after
        # its call, OpenMP's, steals the cores of the next row's)
        order = [live] * repeat if threads == 1 else [[row] * repeat for row in live]
        for rnd in order:
            for label, fn in rnd:
                t0 = time.perf_counter()
                fn()
                times[label].append(time.perf_counter() - t0)
    scale = float(np.max(np.abs(want)))
    result = []
    for label, fn in impls:
        if fn is None:
            result.append((label, None, None, skipped.get(label) or "not importable"))
            continue
        ok = "-" if "ceiling" in label else (
            "yes" if float(np.max(np.abs(np.asarray(outs[label]) - want))) <= TOLERANCE * scale
            else "NO")
        result.append((label, statistics.median(times[label]), min(times[label]), ok))
    return result


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_FIRST = '''
import sys, time
sys.path.insert(0, "examples")
import numba
import numpy as np
import hydra
sys.path.insert(0, {root!r})  # this checkout's bench, whichever tree's hydra
from bench.cnn import lenet, setup


@numba.njit
def warm_numba(x):
    return x * 2.0 + 1.0


def warm(x):
    return x * 2.0 + 1.0


warm_numba(np.ones(4))
hydra.compile(warm, varying="x", backend="cpu")(np.ones(4))
if "{which}" == "lenet":
    x, params = setup("lenet", 256)
    k = hydra.compile(lenet, varying="x", backend="cpu")
    args = (x, *params)
else:
    import digits_cnn
    rng = np.random.default_rng(0)
    x = rng.random((256, 1, 10, 10)).astype(np.float32)
    y = rng.integers(0, 10, 256)
    k = hydra.compile(digits_cnn.batch_grads, varying=("x", "label"), backend="cpu")
    args = (x, y, *digits_cnn.init())
t, c = time.perf_counter(), time.thread_time()
k(*args)
first, cpu = time.perf_counter() - t, time.thread_time() - c
try:
    from hydra.backends.machinecode import background
except ImportError:  # an older tree: in cpu/, or builds every loop in the call
    try:
        from hydra.backends.cpu import background
    except ImportError:
        background = None
if background is not None:
    background.wait()
print(first, cpu, time.perf_counter() - t)
'''


def first_calls(tries: int = 3, tree: str | None = None):
    """{kernel: (best wall s, best cpu s, best wall s until the loops the call queued
    are built in the background)}: the first call in a fresh process with an
    empty hydra cache; before it the process has imported hydra and numba and compiled
    one small kernel with each (as ``bench/firstcall.py``: numba's one-time start, about
    0.3-0.5 s of registries and SciPy, is not in it)."""
    root = Path(__file__).resolve().parents[1]
    out = {}
    for which in ("lenet", "digits"):
        runs = []
        for _ in range(tries):
            with tempfile.TemporaryDirectory() as cache:
                # ``tree``: another checkout's hydra, this checkout's bench and examples
                path = os.pathsep.join([tree, str(root)]) if tree else str(root)
                env = dict(os.environ, PYTHONPATH=path, HYDRA_CACHE_DIR=cache,
                           HYDRA_QUIET="1")
                script = Path(cache) / "first.py"  # hydra reads the sources
                script.write_text(_FIRST.format(which=which, root=str(root)))
                done = subprocess.run([sys.executable, str(script)], env=env,
                                      capture_output=True, text=True, cwd=root)
            if done.returncode:
                raise SystemExit(f"bench cnn: first call of {which} failed:\n{done.stderr}")
            runs.append(tuple(float(v) for v in done.stdout.split()[-3:]))
        out[which] = tuple(min(r[j] for r in runs) for j in range(3))
    return out


def main(argv=None) -> None:
    import argparse
    import platform
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--vgg19", action="store_true", help="also VGG-19 on 8 224x224 images")
    ap.add_argument("--threads", default=f"1,{os.cpu_count()}")
    ap.add_argument("--only", action="append", help="lenet, vgg_small or vgg19; may repeat")
    ap.add_argument("--images", type=int, help="images per model instead of its default")
    ap.add_argument("--no-firstcall", action="store_true")
    ap.add_argument("--against", metavar="DIR",
                    help="also the first calls of the hydra in checkout DIR")
    ap.add_argument("--profile", action="store_true",
                    help="per convolution: the layer step, its GEMMs, the direct sgemm")
    ap.add_argument("--coretype", action="store_true",
                    help="re-run without OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE")
    a = ap.parse_args(argv)
    if a.coretype and any(k in os.environ for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")):
        env = {k: v for k, v in os.environ.items()
               if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
        args = [sys.executable, "-m", "bench", "cnn"] + [v for v in sys.argv[2:]]
        raise SystemExit(subprocess.call(args, env=env))
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        pass
    print(f"# {cpu}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; "
          f"numpy {np.__version__}; {blas_report()}")
    print(f"# {jaxpeers.describe(min(int(t) for t in a.threads.split(',')))}")
    names = a.only or ["lenet", "vgg_small"] + (["vgg19"] if a.vgg19 else [])
    if a.profile:
        from .cnnprofile import report
        with _limit(1) or _Null():
            for name in names:
                report(name, a.images or IMAGES[name], a.repeat)
        return
    print(f"{'model':10} {'images':>6} {'thr':>3} {'implementation':28} {'median ms':>10} "
          f"{'best ms':>8} {'img/s':>8} {'vs torch':>8} {'agrees':>7}")
    for name in names:
        images = a.images or IMAGES[name]
        for threads in sorted({int(t) for t in a.threads.split(",")}):
            table = rows(name, images, threads, a.repeat)
            torch_best = next((b for label, _, b, _ in table if label.startswith("torch")), None)
            for label, med, best, ok in table:
                if med is None:
                    print(f"{name:10} {images:6} {threads:3} {label:28} {ok}")
                    continue
                ratio = f"{best / torch_best:7.2f}x" if torch_best else "       -"
                print(f"{name:10} {images:6} {threads:3} {label:28} {med * 1e3:10.2f} "
                      f"{best * 1e3:8.2f} {images / best:8.0f} {ratio:>8} {ok:>7}", flush=True)
    for tree in ([] if a.no_firstcall else [None] + ([a.against] if a.against else [])):
        for which, (wall, cpu_s, built) in first_calls(tree=tree).items():
            what = "LeNet-5 forward, 256 images" if which == "lenet" else \
                "digits training step, 256 lanes"
            print(f"first call{f' of {tree}' if tree else ''} (fresh process, empty cache, "
                  f"best of 3): {what}: {wall:.3f} s wall, {cpu_s:.3f} s cpu; every loop "
                  f"built {built:.2f} s after the call began", flush=True)


if __name__ == "__main__":
    main()
