"""``python -m bench ml [--scale S] [--repeat N] [--only rnn]``: the three per-lane array
workloads of ML.md (MLP forward, ragged RNN, early exit) from their per-example source
(``examples/mlp.py``, ``examples/rnn.py``, ``examples/early_exit.py``) through hydra's
numpy and cpu backends, against the peers a user would otherwise write:

- the per-example NumPy loop (the function itself, example by example: the reference
  every other output is checked against);
- for the control-flow workloads, hydra cpu with compaction per loop region switched
  off (compaction per heavy operation only), with the compacted loop's steps run one by
  one instead of as planned (``hydra/executor/rowsteps.py``) and, for the RNN,
  without the trip-count sort (``hydra/backends/compact.py``);
- hand-batched NumPy: one GEMM per layer; for the control-flow workloads a masked
  variant (compute every row, keep the finished ones with ``where``) and a compacted one
  (gather the active rows, compute, scatter back), and for the RNN the length-sorted
  shrinking batch (sort once, then every step is a prefix of the rows);
- JAX ``jit(vmap(...))`` where jax is importable (for early exit both the rewritten
  ``fori_loop(0, L)`` + ``where`` and the natural ``vmap(while_loop)`` port);
- PyTorch where torch is importable (masked and compacted).

Sizes are ML.md's (16,384 / 4,096 x 200 steps / 16,384 examples) times ``--scale``.
The NumPy and hydra implementations run once to warm up, then ``repeat`` rounds time
each of them once in turn (interleaved); then each JAX and PyTorch one warms up and runs
``repeat`` times.  The table shows the median and best time, the best time's ratio to
the per-example loop and to the best hand-batched NumPy row, and whether the output
agrees with the loop's (floats within summation-order tolerance; early-exit depths may
differ only on a handful of examples whose confidence lies within rounding of the
threshold).  The BLAS that NumPy runs is reported with threadpoolctl, with
``OPENBLAS_CORETYPE``.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import hydra
from hydra.executor.policy import Policy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import early_exit  # noqa: E402  (the examples directory is not a package)
import mlp  # noqa: E402
import rnn  # noqa: E402
from _perlane import loop, max_rel_diff  # noqa: E402

SIZES = {"mlp": 16384, "rnn": 4096, "early exit": 16384}
TOLERANCE = 1e-3  # float32: one GEMM over the lanes sums in another order than mat-vecs


# ---- hand-batched NumPy --------------------------------------------------------------

def _softmax_rows(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def mlp_numpy(x, W1, b1, W2, b2, W3, b3):
    h = np.tanh(x @ W1.T + b1)
    h = np.maximum(h @ W2.T + b2, 0.0)
    return _softmax_rows(h @ W3.T + b3)


def rnn_numpy_masked(xs, n, Wx, Wh, b):
    h = np.zeros((len(xs), Wh.shape[0]), dtype=np.float32)
    for t in range(int(n.max())):
        h = np.where((t < n)[:, None], np.tanh(xs[:, t] @ Wx.T + h @ Wh.T + b), h)
    return h


def rnn_numpy_compacted(xs, n, Wx, Wh, b):
    h = np.zeros((len(xs), Wh.shape[0]), dtype=np.float32)
    for t in range(int(n.max())):
        rows = np.flatnonzero(t < n)
        h[rows] = np.tanh(xs[rows, t] @ Wx.T + h[rows] @ Wh.T + b)
    return h


def rnn_numpy_sorted(xs, n, Wx, Wh, b):
    order = np.argsort(-n, kind="stable")
    xs_sorted, n_sorted = xs[order], n[order]
    h = np.zeros((len(xs), Wh.shape[0]), dtype=np.float32)
    active = len(xs)
    for t in range(int(n.max())):
        while active and n_sorted[active - 1] <= t:
            active -= 1
        h[:active] = np.tanh(xs_sorted[:active, t] @ Wx.T + h[:active] @ Wh.T + b)
    out = np.empty_like(h)
    out[order] = h
    return out


def _head(h, Wc, bc):
    z = h @ Wc.T + bc
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return z, e.max(axis=1) / e.sum(axis=1)


def early_exit_numpy_masked(x, Ws, bs, Wc, bc, thr):
    h, done = x.copy(), np.zeros(len(x), dtype=bool)
    z_out, depth = np.zeros((len(x), len(bc)), dtype=np.float32), np.zeros(len(x), np.int64)
    for layer in range(len(Ws)):
        h = np.where(done[:, None], h, h + np.maximum(h @ Ws[layer].T + bs[layer], 0.0))
        z, conf = _head(h, Wc, bc)
        live = ~done
        z_out[live], depth[live] = z[live], layer + 1
        done |= conf > thr
    return z_out, depth


def early_exit_numpy_compacted(x, Ws, bs, Wc, bc, thr):
    rows, h = np.arange(len(x)), x.copy()
    z_out, depth = np.zeros((len(x), len(bc)), dtype=np.float32), np.zeros(len(x), np.int64)
    for layer in range(len(Ws)):
        h = h + np.maximum(h @ Ws[layer].T + bs[layer], 0.0)
        z, conf = _head(h, Wc, bc)
        z_out[rows], depth[rows] = z, layer + 1
        stay = conf <= thr[rows]
        rows, h = rows[stay], h[stay]
        if not len(rows):
            break
    return z_out, depth


# ---- JAX -----------------------------------------------------------------------------

def jax_impls(name):
    try:
        import jax
        import jax.numpy as jnp
        from jax import lax
    except ImportError:
        return
    if name == "mlp":
        def one(x, W1, b1, W2, b2, W3, b3):
            h = jnp.tanh(W1 @ x + b1)
            h = jnp.maximum(W2 @ h + b2, 0.0)
            z = W3 @ h + b3
            e = jnp.exp(z - z.max())
            return e / e.sum()
        f = jax.jit(jax.vmap(one, in_axes=(0,) + (None,) * 6))
        yield "jax jit(vmap)", lambda *a: np.asarray(f(*a))
    elif name == "rnn":
        def one(xs, n, Wx, Wh, b):
            step = lambda t, h: jnp.tanh(Wx @ xs[t] + Wh @ h + b)
            return lax.fori_loop(0, n, step, jnp.zeros(Wh.shape[0], jnp.float32))
        f = jax.jit(jax.vmap(one, in_axes=(0, 0, None, None, None)))
        yield "jax jit(vmap) fori_loop(0, n)", lambda *a: np.asarray(f(*a))
    else:
        def head(h, Wc, bc):
            z = Wc @ h + bc
            e = jnp.exp(z - z.max())
            return z, e.max() / e.sum()

        def rewritten(x, Ws, bs, Wc, bc, thr):
            def body(layer, c):
                h, z, depth, done = c
                h2 = h + jnp.maximum(Ws[layer] @ h + bs[layer], 0.0)
                z2, conf = head(h2, Wc, bc)
                keep = lambda new, old: jnp.where(done, old, new)
                return (keep(h2, h), keep(z2, z), keep(layer + 1, depth),
                        done | (conf > thr))
            init = (x, jnp.zeros(Wc.shape[0], jnp.float32), 0, False)
            _, z, depth, _ = lax.fori_loop(0, Ws.shape[0], body, init)
            return z, depth

        def natural(x, Ws, bs, Wc, bc, thr):
            def cond(c):
                layer, _, _, conf = c
                return (layer < Ws.shape[0]) & (conf <= thr)

            def body(c):
                layer, h, _, _ = c
                h = h + jnp.maximum(Ws[layer] @ h + bs[layer], 0.0)
                z, conf = head(h, Wc, bc)
                return layer + 1, h, z, conf
            init = (0, x, jnp.zeros(Wc.shape[0], jnp.float32), jnp.float32(0))
            layer, _, z, _ = lax.while_loop(cond, body, init)
            return z, layer

        axes = (0, None, None, None, None, 0)
        for label, one in (("jax rewritten fori_loop + where", rewritten),
                           ("jax natural vmap(while_loop)", natural)):
            f = jax.jit(jax.vmap(one, in_axes=axes))
            yield label, lambda *a, f=f: tuple(np.asarray(o) for o in f(*a))


# ---- PyTorch -------------------------------------------------------------------------

def torch_impls(name, device="cpu"):
    """The PyTorch peers of workload ``name`` on ``device``.  Each takes NumPy arrays or
    tensors already on ``device`` (the GPU table moves its inputs there once, outside the
    timed calls) and returns NumPy arrays (on a GPU, the copy back is timed: it waits for
    the kernels, as hydra's result does)."""
    try:
        import torch
    except ImportError:
        return
    if device == "cpu":
        torch.set_num_threads(os.cpu_count() or 1)

    def t(a):
        return a if torch.is_tensor(a) else torch.from_numpy(np.asarray(a)).to(device)

    def back(a):
        return a.cpu().numpy()
    if name == "mlp":
        def f(x, W1, b1, W2, b2, W3, b3):
            with torch.no_grad():
                h = torch.tanh(t(x) @ t(W1).T + t(b1))
                h = torch.relu(h @ t(W2).T + t(b2))
                return back(torch.softmax(h @ t(W3).T + t(b3), dim=1))
        yield "torch", f
    elif name == "rnn":
        def masked(xs, n, Wx, Wh, b):
            with torch.no_grad():
                xs, n, Wx, Wh, b = t(xs), t(n), t(Wx), t(Wh), t(b)
                h = torch.zeros(len(xs), Wh.shape[0], dtype=xs.dtype, device=device)
                for step in range(int(n.max())):
                    new = torch.tanh(xs[:, step] @ Wx.T + h @ Wh.T + b)
                    h = torch.where((step < n)[:, None], new, h)
                return back(h)

        def compacted(xs, n, Wx, Wh, b):
            with torch.no_grad():
                n = t(n)
                order = torch.argsort(-n, stable=True)
                xs_s, n_s = t(xs)[order], n[order].tolist()
                Wx, Wh, b = t(Wx), t(Wh), t(b)
                h = torch.zeros(len(n_s), Wh.shape[0], dtype=xs_s.dtype, device=device)
                active = len(n_s)
                for step in range(max(n_s)):
                    while active and n_s[active - 1] <= step:
                        active -= 1
                    h[:active] = torch.tanh(xs_s[:active, step] @ Wx.T + h[:active] @ Wh.T + b)
                out = torch.empty_like(h)
                out[order] = h
                return back(out)
        yield "torch masked", masked
        yield "torch sorted shrinking batch", compacted
    else:
        def run(x, Ws, bs, Wc, bc, thr, compact):
            with torch.no_grad():
                x, Ws, bs, Wc, bc, thr = map(t, (x, Ws, bs, Wc, bc, thr))
                z_out = torch.zeros(len(x), len(bc), dtype=x.dtype, device=device)
                depth = torch.zeros(len(x), dtype=torch.int64, device=device)
                rows, h = torch.arange(len(x), device=device), x.clone()
                done = torch.zeros(len(x), dtype=torch.bool, device=device)
                for layer in range(len(Ws)):
                    new = h + torch.relu(h @ Ws[layer].T + bs[layer])
                    h = new if compact else torch.where(done[:, None], h, new)
                    z = h @ Wc.T + bc
                    e = torch.exp(z - z.max(dim=1, keepdim=True).values)
                    conf = e.max(dim=1).values / e.sum(dim=1)
                    if compact:
                        z_out[rows], depth[rows] = z, layer + 1
                        stay = conf <= thr[rows]
                        rows, h = rows[stay], h[stay]
                        if not len(rows):
                            break
                    else:
                        z_out[~done], depth[~done] = z[~done], layer + 1
                        done |= conf > thr
                return back(z_out), back(depth)
        yield "torch masked", lambda *a: run(*a, compact=False)
        yield "torch compacted", lambda *a: run(*a, compact=True)


# ---- the table -----------------------------------------------------------------------

def workload(name, scale):
    """(per-example function, varying names, arguments, NumPy peers) of one workload."""
    n = max(3, int(SIZES[name] * scale))
    if name == "mlp":
        return (mlp.mlp_one, ("x",), (mlp.inputs(n), *mlp.weights()),
                [("numpy batched (one GEMM per layer)", mlp_numpy)])
    if name == "rnn":
        xs, lengths = rnn.sequences(n)
        return (rnn.rnn_one, ("xs", "n"), (xs, lengths, *rnn.weights()),
                [("numpy masked (where)", rnn_numpy_masked),
                 ("numpy compacted (gather/scatter)", rnn_numpy_compacted),
                 ("numpy sorted shrinking batch", rnn_numpy_sorted)])
    x, thr = early_exit.inputs(n)
    return (early_exit.early_exit_one, ("x", "thr"), (x, *early_exit.weights(), thr),
            [("numpy masked (all layers + where)", early_exit_numpy_masked),
             ("numpy compacted (active rows)", early_exit_numpy_compacted)])


def reference(fn, varying, args):
    """The per-example loop over the varying arguments (the others passed uniform)."""
    names = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    pos = [names.index(v) for v in varying]

    def call(*vs):
        full = list(args)
        for p, v in zip(pos, vs):
            full[p] = v
        return fn(*full)
    return lambda *_: loop(call, [args[p] for p in pos], ())


def agrees(name, out, ref) -> str:
    if name == "early exit":
        (z, depth), (z_ref, depth_ref) = out, ref
        same = np.asarray(depth) == depth_ref
        ok = same.mean() > 0.999 and max_rel_diff(np.asarray(z)[same], z_ref[same]) < TOLERANCE
        return "yes" if ok else f"NO ({int((~same).sum())} depths differ)"
    return "yes" if max_rel_diff(out, ref) < TOLERANCE else f"NO ({max_rel_diff(out, ref):.1e})"


def _first(fn, args):
    t = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t, out


def implementations(name, fn, varying, peers):
    yield "per-example NumPy loop", None
    for backend in ("numpy", "cpu"):
        try:
            k = hydra.compile(fn, varying=varying, backend=backend)
        except hydra.CompileError as e:
            yield f"hydra {backend}", str(e).splitlines()[0]
            continue
        yield f"hydra {backend}", k
    if name != "mlp":  # what compaction per loop region and the trip-count sort buy
        def cpu(**policy):
            return hydra.compile(fn, varying=varying, backend="cpu",
                                 compaction=Policy(**policy))
        yield "hydra cpu, per-op compaction only", cpu(loop_below=0.0)
        yield "hydra cpu, compacted steps unplanned", cpu(plan_steps=False)
        if name == "rnn":
            yield "hydra cpu, lanes not sorted", cpu(sort=False)
    yield from peers
    yield from jax_impls(name)
    yield from torch_impls(name)


def run(name, scale, repeat):
    """Each implementation's first call (compilation included) and output, and its
    times: the NumPy and hydra ones in ``repeat`` interleaved rounds (each once in turn,
    so that a change of load on a shared machine hits every row alike), then JAX and
    PyTorch, each run ``repeat`` times in a row (their thread pools keep spinning for a
    while after a call, which would slow whatever ran next on two cores)."""
    fn, varying, args, peers = workload(name, scale)
    rows, ref = [], None
    impls = list(implementations(name, fn, varying, peers))
    foreign = [i for i in impls if i[0].startswith(("jax", "torch"))]
    for group in ([i for i in impls if i not in foreign], *[[i] for i in foreign]):
        timed = []
        for label, impl in group:
            if impl is None:
                impl = reference(fn, varying, args)
            if isinstance(impl, str):
                rows.append([label, None, None, None, f"unsupported: {impl}"])
                continue
            try:
                first, out = _first(impl, args)
            except Exception as e:  # noqa: BLE001  (a failing peer is a row, not the end)
                rows.append([label, None, None, None, f"failed: {type(e).__name__}: {e}"[:90]])
                continue
            if ref is None:
                ref = out
            rows.append([label, [], None, first, agrees(name, out, ref)])
            timed.append((rows[-1], impl))
        for _ in range(repeat):
            for row, impl in timed:
                t = time.perf_counter()
                impl(*args)
                row[1].append(time.perf_counter() - t)
        for row, _ in timed:
            row[1], row[2] = statistics.median(row[1]), min(row[1])
    return len(args[0]), [tuple(r) for r in rows]


def blas_report() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "BLAS: threadpoolctl not installed (pip install threadpoolctl)"
    parts = [f"{i.get('internal_api')} {i.get('version')} {i.get('architecture', '')} "
             f"({i.get('num_threads')} threads, {Path(i.get('filepath', '')).name})"
             for i in threadpool_info() if i.get("user_api") == "blas"]
    env = ", ".join(f"{k}={os.environ.get(k, 'unset')}"
                    for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"))
    return f"BLAS: {'; '.join(parts) or 'none found'}; {env}"


TARGETS = {  # (workload, hydra row, peer rows, what the issue asks)
    "mlp": [("hydra cpu", ["numpy batched (one GEMM per layer)"], 1.0),
            ("hydra numpy", ["numpy batched (one GEMM per layer)"], 1.5)],
    "rnn": [("hydra cpu", ["numpy sorted shrinking batch", "numpy compacted (gather/scatter)"],
             1.0),
            ("hydra numpy", ["numpy masked (where)"], 1.5)],
    "early exit": [("hydra cpu", ["numpy compacted (active rows)"], 1.0),
                   ("hydra numpy", ["numpy masked (all layers + where)"], 1.5)],
}


def _jax_verdicts(name, timed) -> list[str]:
    """The issue's targets against JAX: the MLP no slower than jit(vmap) where OpenBLAS
    runs its native kernels (ML.md: with OPENBLAS_CORETYPE=Haswell on an AVX-512 machine
    NumPy's GEMMs are handicapped, JAX's are not); early exit about 45x the natural
    vmap(while_loop) port."""
    out = []
    if name == "mlp" and "jax jit(vmap)" in timed and "hydra cpu" in timed:
        ratio = timed["hydra cpu"] / timed["jax jit(vmap)"]
        core = os.environ.get("OPENBLAS_CORETYPE")
        verdict = ("met" if ratio <= 1.0 else "NOT MET") if core is None else (
            f"not required: OPENBLAS_CORETYPE={core} restricts NumPy's BLAS")
        out.append(f"mlp: hydra cpu no slower than jax jit(vmap): {verdict} ({ratio:.2f}x)")
    natural = timed.get("jax natural vmap(while_loop)")
    if name == "early exit" and natural and "hydra cpu" in timed:
        out.append(f"early exit: hydra cpu vs jax natural vmap(while_loop): "
                   f"{natural / timed['hydra cpu']:.1f}x faster (issue: about 45x)")
    return out


def main(scale: float = 1.0, repeat: int = 5, names=("mlp", "rnn", "early exit")) -> None:
    import numba
    unknown = [n for n in names if n not in SIZES]
    if unknown:
        raise SystemExit(f"bench ml: no workload {unknown[0]!r} (the workloads: "
                         f"{', '.join(SIZES)})")
    print(f"# per-lane arrays (ML.md workloads) at scale {scale}, {numba.config.NUMBA_NUM_THREADS}"
          f" threads, numpy {np.__version__}, float32; {blas_report()}", flush=True)
    print(f"{'workload':11} {'implementation':36} {'median ms':>10} {'best ms':>8} "
          f"{'vs loop':>8} {'vs best np':>10} {'1st s':>6}  agrees")
    verdicts = []
    for name in names:
        n, rows = run(name, scale, repeat)
        timed = {label: best for label, _, best, _, ok in rows if best is not None}
        best_np = min((b for label, b in timed.items() if label.startswith("numpy")),
                      default=None)
        loop_t = timed.get("per-example NumPy loop")
        for label, med, best, first, ok in rows:
            if best is None:
                print(f"{name:11} {label:36} {ok}")
                continue
            print(f"{name:11} {label:36} {med * 1e3:10.1f} {best * 1e3:8.1f} "
                  f"{loop_t / best:7.1f}x {best_np / best:9.2f}x {first:6.2f}  {ok}",
                  flush=True)
        for row, peers, factor in TARGETS[name]:
            peer = min((timed[p], p) for p in peers if p in timed)
            if row not in timed:
                verdicts.append(f"{name}: {row} within {factor}x of {peer[1]}: NOT MET "
                                "(hydra cannot run it yet)")
                continue
            met = timed[row] <= factor * peer[0]
            verdicts.append(f"{name}: {row} within {factor}x of {peer[1]}: "
                            f"{'met' if met else 'NOT MET'} ({timed[row] / peer[0]:.2f}x)")
        verdicts += _jax_verdicts(name, timed)
        print(f"{name:11} ({n} examples)")
    print("targets (best times):")
    for v in verdicts:
        print("  " + v)
