"""``python -m bench ml --gpu [--scale S] [--repeat N] [--only NAME]``: the per-lane
array workloads of ML.md (MLP forward, ragged RNN, early exit) on one GPU.

Rows, each checked against hand-batched NumPy on the host (the first NumPy peer of
``bench/ml.py``): hydra's ``cuda`` backend with its inputs already on the device (a
row saying "not runnable yet" while per-lane arrays are refused on cuda: the cuda-ready
issue), PyTorch batched on the same GPU (inputs moved there once, outside the timed
calls; the timed call includes the copy of the result back, which waits for the
kernels), and hydra ``cpu`` on every core of the host for scale.  The ratio column is
the best PyTorch GPU time over the row's best (the GPU issue's target for hydra: at
least 1/1.5, and above 1 on early exit).  Without a GPU (or on numba's simulator) it
prints one line saying so and times nothing.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import hydra

from .ml import SIZES, agrees, torch_impls, workload


def _gpu_name() -> str | None:
    """The GPU's name, or None where there is no real one."""
    import numba
    from numba import cuda
    if numba.config.ENABLE_CUDASIM or not cuda.is_available():
        return None
    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else name


def _timed(call, args, repeat):
    t0 = time.perf_counter()
    out = call(*args)
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        call(*args)
        times.append(time.perf_counter() - t0)
    return out, first, statistics.median(times), min(times)


def rows(name, scale, repeat):
    """(label, result-or-reason) rows of one workload; results are (median, best, first,
    agreement)."""
    import torch
    from numba import cuda
    fn, varying, args, peers = workload(name, scale)
    ref = peers[0][1](*args)
    out = []
    try:
        k = hydra.compile(fn, varying=varying, backend="cuda")
        on_device = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
        res, first, med, best = _timed(k, on_device, repeat)
        out.append(("hydra cuda", (med, best, first, agrees(name, res, ref))))
    except hydra.CompileError as e:
        out.append(("hydra cuda", "not runnable yet: " + str(e).splitlines()[0][:70]))
    except Exception as e:  # noqa: BLE001  (a failing row is a row, not the end)
        out.append(("hydra cuda", f"failed: {type(e).__name__}: {e}"[:90]))
    on_gpu = [torch.from_numpy(np.asarray(a)).to("cuda") for a in args]
    for label, impl in torch_impls(name, device="cuda"):
        try:
            res, first, med, best = _timed(impl, on_gpu, repeat)
        except Exception as e:  # noqa: BLE001
            out.append((f"{label} (GPU)", f"failed: {type(e).__name__}: {e}"[:90]))
            continue
        out.append((f"{label} (GPU)", (med, best, first, agrees(name, res, ref))))
    k = hydra.compile(fn, varying=varying, backend="cpu")
    res, first, med, best = _timed(k, args, repeat)
    out.append(("hydra cpu, all cores", (med, best, first, agrees(name, res, ref))))
    return len(args[0]), out


def main(scale: float = 1.0, repeat: int = 5, names=tuple(SIZES)) -> None:
    gpu = _gpu_name()
    if gpu is None:
        print("# bench ml --gpu: no GPU here (or numba's CUDA simulator is on): nothing timed")
        return
    try:
        import torch
    except ImportError:
        print("# bench ml --gpu: PyTorch is not importable: nothing timed")
        return
    print(f"# {gpu}, torch {torch.__version__}, scale {scale}; ratio: the best PyTorch GPU "
          f"row's best time over the row's")
    print(f"{'workload':11} {'n':>6} {'implementation':34} {'median ms':>10} {'best ms':>8} "
          f"{'ratio':>7} {'1st call s':>10}  agrees")
    for name in names:
        n, table = rows(name, scale, repeat)
        torch_best = min((r[1] for label, r in table
                          if label.startswith("torch") and not isinstance(r, str)),
                         default=None)
        for label, r in table:
            if isinstance(r, str):
                print(f"{name:11} {n:6} {label:34} {r}", flush=True)
                continue
            med, best, first, ok = r
            ratio = f"{torch_best / best:6.2f}x" if torch_best else ""
            print(f"{name:11} {n:6} {label:34} {med * 1e3:10.2f} {best * 1e3:8.2f} "
                  f"{ratio:>7} {first:10.2f}  {ok}", flush=True)
