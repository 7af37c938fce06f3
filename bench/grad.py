"""``python -m bench grad [--scale S] [--repeat N]``: training steps by ``hydra.grad``
against their own forward pass (the gradients-at-speed issue), on the cpu backend.

Workloads, each written for ONE example and batched across lanes, the loss of every
one a per-example cross-entropy against a label (ML.md's shapes, scaled):

- ``mlp``: ML.md's MLP (784-256-256-10) + softmax cross-entropy; the step returns
  ``lanesum`` of every weight's gradient / N;
- ``rnn``: the ragged Elman RNN (each lane stops at its own length) with a 10-class
  readout ``Wo @ h``; the step's weight gradients come from the reverse of the loop
  (back-propagation through time, each lane its own trips);
- ``early exit``: ML.md's early-exit network, cross-entropy of the exit layer's logits;
- ``digits``: the CNN of ``examples/digits_cnn.py``: automatic (its ``hydra.nn``
  forward), hand-written after the same ``hydra.nn`` forward (only the backward passes
  differ) and hand-written as the example has it;
- ``dp-sgd``: the MLP's step with per-example clipping and noise
  (``examples/dp_sgd.py``'s shape), against hydra's own non-private step;
- ``greeks``: Black-Scholes price and its four Greeks by ``hydra.value_and_grad``
  (``examples/greeks.py``) against the price kernel alone.

Every row runs forward and gradient kernels interleaved (``repeat`` rounds after a
warm-up), reports best and median milliseconds and the gradient / forward ratio of the
best times, and checks each gradient against the numpy reference backend on the same
inputs (max relative difference), and the peak memory one call holds beyond its
arguments (tracemalloc: NumPy's buffers; PyTorch's are not traced).  One thread
(``HYDRA_THREADS=1``, set before the run) and all cores: run it twice.  The PyTorch
peers (``bench/gradpeers.py``: batched autograd, ``torch.func`` ``vmap(grad)``,
padded/packed RNNs, masked early exit, ``vmap(grad)`` + clipping) are checked against
hydra's gradient step; so are the JAX peers (``bench/jaxpeers.py``: ``jit(grad)`` of
the batched mean loss, ``jit(vmap(grad))``, a masked ``scan``, early exit's
``fori_loop`` + ``where`` and its refused ``while_loop`` port, ``jit(vmap(grad))`` +
clipping) where jax is importable (the header says whether it is, and XLA's thread
setting).  Each peer is called once first (JAX compiles), then timed in the same
interleaved rounds as hydra's rows.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import hydra
from hydra import lanesum, nlanes

from . import gradpeers, jaxpeers

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import digits_cnn  # noqa: E402  (the examples directory is not a package)
import dp_sgd  # noqa: E402
import early_exit  # noqa: E402
import greeks  # noqa: E402
import mlp  # noqa: E402
import rnn  # noqa: E402

SIZES = {"mlp": 4096, "rnn": 1024, "early exit": 4096, "digits": 512, "dp-sgd": 4096,
         "greeks": 1_000_000}


# ---- per-example losses --------------------------------------------------------------

def xent(z, label):
    s = z - z.max()
    return np.log(np.sum(np.exp(s))) - s[label]


def mlp_loss(x, label, W1, b1, W2, b2, W3, b3):
    h = np.tanh(W1 @ x + b1)
    h = np.maximum(W2 @ h + b2, 0.0)
    return xent(W3 @ h + b3, label)


def rnn_loss(xs, n, label, Wx, Wh, b, Wo):
    h = np.zeros(Wh.shape[0], dtype=np.float32)
    for t in range(n):
        h = np.tanh(Wx @ xs[t] + Wh @ h + b)
    return xent(Wo @ h, label)


def early_exit_loss(x, label, Ws, bs, Wc, bc, thr):
    h = x
    z = Wc @ h + bc
    for l in range(Ws.shape[0]):  # noqa: E741
        h = h + np.maximum(Ws[l] @ h + bs[l], 0.0)
        z = Wc @ h + bc
        e = np.exp(z - z.max())
        if e.max() / e.sum() > thr:
            break
    return xent(z, label)


_mlp_grad = hydra.value_and_grad(mlp_loss, argnums=(2, 3, 4, 5, 6, 7))
_rnn_grad = hydra.value_and_grad(rnn_loss, argnums=(3, 4, 5, 6))
_rnn_grad_ck = hydra.value_and_grad(rnn_loss, argnums=(3, 4, 5, 6), checkpoint=16)
_ee_grad = hydra.value_and_grad(early_exit_loss, argnums=(2, 3, 4, 5))


def mlp_forward(x, label, W1, b1, W2, b2, W3, b3):
    return lanesum(mlp_loss(x, label, W1, b1, W2, b2, W3, b3)) / nlanes()


def mlp_step(x, label, W1, b1, W2, b2, W3, b3):
    loss, (g1, c1, g2, c2, g3, c3) = _mlp_grad(x, label, W1, b1, W2, b2, W3, b3)
    n = nlanes()
    return (lanesum(loss) / n, lanesum(g1) / n, lanesum(c1) / n, lanesum(g2) / n,
            lanesum(c2) / n, lanesum(g3) / n, lanesum(c3) / n)


def rnn_forward(xs, n, label, Wx, Wh, b, Wo):
    return lanesum(rnn_loss(xs, n, label, Wx, Wh, b, Wo)) / nlanes()


def rnn_step(xs, n, label, Wx, Wh, b, Wo):
    loss, (gx, gh, gb, go) = _rnn_grad(xs, n, label, Wx, Wh, b, Wo)
    k = nlanes()
    return (lanesum(loss) / k, lanesum(gx) / k, lanesum(gh) / k, lanesum(gb) / k,
            lanesum(go) / k)


def rnn_step_checkpointed(xs, n, label, Wx, Wh, b, Wo):
    loss, (gx, gh, gb, go) = _rnn_grad_ck(xs, n, label, Wx, Wh, b, Wo)
    k = nlanes()
    return (lanesum(loss) / k, lanesum(gx) / k, lanesum(gh) / k, lanesum(gb) / k,
            lanesum(go) / k)


def early_exit_forward(x, label, Ws, bs, Wc, bc, thr):
    return lanesum(early_exit_loss(x, label, Ws, bs, Wc, bc, thr)) / nlanes()


def early_exit_step(x, label, Ws, bs, Wc, bc, thr):
    loss, (g1, g2, g3, g4) = _ee_grad(x, label, Ws, bs, Wc, bc, thr)
    k = nlanes()
    return (lanesum(loss) / k, lanesum(g1) / k, lanesum(g2) / k, lanesum(g3) / k,
            lanesum(g4) / k)


def digits_forward(x, label, W, b, V, c):
    return lanesum(digits_cnn.loss_one(x, label, W, b, V, c)) / nlanes()


# ---- the workloads: (kernels by row name, their varying names, arguments) -----------

def workload(name: str, scale: float):
    n = max(8, int(SIZES[name] * scale))
    rng = np.random.default_rng(0)
    if name in ("mlp", "dp-sgd"):
        x = mlp.inputs(n)
        label = rng.integers(0, 10, n)
        args = (x, label, *mlp.weights())
        if name == "mlp":
            return {"forward": mlp_forward, "gradient step": mlp_step}, ("x", "label"), args
        x = np.random.default_rng(1).uniform(0.0, 1.0, (n, 64)).astype(np.float32)
        return ({"non-private step": dp_sgd.mean_step, "DP-SGD step (clip, no noise)":
                 dp_sgd.private_step}, ("x", "label"), (x, label, *dp_sgd.init(), 1.0))
    if name == "rnn":
        steps = max(4, int(200 * min(scale * 4, 1.0)))
        xs, lengths = rnn.sequences(n, steps)
        wx, wh, b = rnn.weights()
        wo = (rng.standard_normal((10, wh.shape[0])) / np.sqrt(wh.shape[0])).astype(np.float32)
        return ({"forward": rnn_forward, "gradient step (BPTT)": rnn_step,
                 "gradient step, checkpoint=16": rnn_step_checkpointed}, ("xs", "n", "label"),
                (xs, lengths, rng.integers(0, 10, n), wx, wh, b, wo))
    if name == "early exit":
        ws, bs, wc, bc = early_exit.weights()
        x, thr = early_exit.inputs(n)
        return ({"forward": early_exit_forward, "gradient step": early_exit_step},
                ("x", "label", "thr"), (x, rng.integers(0, 10, n), ws, bs, wc, bc, thr))
    if name == "digits":
        x, y, _, _ = digits_cnn.load()
        idx = rng.integers(0, len(y), n)
        return ({"forward (hydra.nn)": digits_forward,
                 "automatic step (hydra.nn)": digits_cnn.batch_autograd,
                 "hand-written step (hydra.nn forward)": digits_cnn.batch_grads_nn,
                 "hand-written step": digits_cnn.batch_grads}, ("x", "label"),
                (x[idx], y[idx], *digits_cnn.init()))
    if name == "greeks":
        s, k, t, r, sigma = greeks.market(n)
        return ({"price": greeks.price_kernel_fn, "price + 4 greeks": greeks.greeks_fn},
                ("s", "k", "t"), (s, k, t, r, sigma))
    raise ValueError(name)


def max_rel(a, b) -> float:
    a = [np.asarray(x, dtype=np.float64) for x in (a if isinstance(a, tuple) else (a,))]
    b = [np.asarray(x, dtype=np.float64) for x in (b if isinstance(b, tuple) else (b,))]
    return max(float(np.max(np.abs(x - y)) / max(float(np.max(np.abs(y))), 1e-30))
               for x, y in zip(a, b))


def run(name: str, scale: float, repeat: int) -> list[tuple]:
    fns, varying, args = workload(name, scale)
    kernels = {row: hydra.compile(f, varying=varying, backend="cpu") for row, f in fns.items()}
    checks = {}
    for row, f in fns.items():
        got = kernels[row](*args)
        ref = hydra.compile(f, varying=varying, backend="numpy")(*args)
        checks[row] = max_rel(got, ref)
    reference = kernels[list(kernels)[1]](*args)  # the gradient step the peers compute
    live, refused, got = warm_peers(name, args)
    calls = {**kernels, **live}
    times = {row: [] for row in calls}
    for _ in range(repeat):  # hydra's rows and the peers interleaved, round by round
        for row, k in calls.items():
            t = time.perf_counter()
            result = k(*args)
            times[row].append((time.perf_counter() - t) * 1e3)
            if row in live:
                got[row] = result
    base = min(times[next(iter(times))])
    lanes = len(args[0])
    out = [(name, lanes, row, min(times[row]), statistics.median(times[row]),
            min(times[row]) / base, checks[row], peak_mib(kernels[row], args))
           for row in kernels]
    nan = float("nan")
    for row in got:
        if row in refused:
            out.append((name, lanes, refused[row], nan, nan, nan, nan, nan))
        else:  # (peak memory: torch's and XLA's buffers are not traced)
            ts = times[row]
            out.append((name, lanes, row, min(ts), statistics.median(ts), min(ts) / base,
                        max_rel(tuple(got[row]), reference), nan))
    return out


def warm_peers(name, args):
    """({row: step} of the peers that ran, {row: the error line} of those that refused,
    {row: first result or None}, in the peers' order): each called once (JAX compiles)."""
    live, refused, got = {}, {}, {}
    for row, step in gradpeers.peers(name) or ():
        try:
            got[row] = step(*args)
            live[row] = step
        except Exception as e:  # noqa: BLE001 (a peer that refuses: its error is the row)
            refused[row] = f"{row}: {type(e).__name__}: {str(e).splitlines()[0][:110]}"
            got[row] = None
    return live, refused, got


def peak_mib(step, args) -> float:
    """The most memory one call holds at once beyond its arguments, MiB (tracemalloc:
    NumPy's and PyTorch's CPU buffers are traced; the call runs once more, traced)."""
    import tracemalloc
    tracemalloc.start()
    try:
        step(*args)
        return tracemalloc.get_traced_memory()[1] / 2 ** 20
    finally:
        tracemalloc.stop()


def peers() -> str:
    torch = "PyTorch rows: bench/gradpeers.py" if importlib.util.find_spec("torch") \
        else "torch not installed on this machine: no PyTorch rows"
    threads = 1 if os.environ.get("HYDRA_THREADS") == "1" else 0
    jax = jaxpeers.missing() or f"JAX rows: bench/jaxpeers.py ({jaxpeers.describe(threads)})"
    return f"peers: {torch}; {jax}"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def main(scale: float = 1.0, repeat: int = 5, names=None) -> None:
    names = names or list(SIZES)
    threads = os.environ.get("HYDRA_THREADS", "all")
    print(f"# bench grad: {cpu_model()}, {os.cpu_count()} cores, HYDRA_THREADS={threads}, "
          f"scale {scale}, {repeat} interleaved rounds")
    print(f"# {peers()}")
    print("| workload | lanes | row | best ms | median ms | / first row | max rel. diff. "
          "(hydra: vs numpy backend; peers: vs hydra's step) | peak MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        for w, lanes, row, best, med, ratio, err, mib in run(name, scale, repeat):
            print(f"| {w} | {lanes} | {row} | {best:.2f} | {med:.2f} | {ratio:.2f}x | "
                  f"{err:.1e} | {'n/a' if mib != mib else f'{mib:.1f}'} |", flush=True)


if __name__ == "__main__":
    main()
