"""Run the benchmarks: ``python -m bench [names...] [--repeat N]``; with ``--gpu [--scale
S]`` the GPU comparison of ``bench/gpu.py`` instead; ``python -m bench async`` the
asynchronous launches of ``bench/asyncbench.py``; ``python -m bench dask`` the Dask
comparison of ``bench/dask.py``; ``python -m bench cpeers`` mandelbrot against
hand-written C (``bench/cpeers.py``); ``python -m bench ml [--scale S] [--only rnn]`` the per-lane
array (ML) workloads of ``bench/ml.py``; ``python -m bench startup [--against DIR]`` a new
process's time to its first result from a filled disk cache (``bench/startup.py``);
``python -m bench firstcall [names...] [--against DIR]`` first calls, compile included,
each in a fresh process, against Numba's (``bench/firstcall.py``); ``python -m bench
profile`` what ``hydra.profile`` costs (``bench/profilecost.py``); ``python -m bench
random`` Monte Carlo pi with ``hydra.random`` against hand-written hashes
(``bench/mcrandom.py``); ``python -m bench cnn [--vgg19]`` per-example CNNs against PyTorch
(``bench/cnn.py``); ``python -m bench grad [--scale S] [--only rnn]`` training steps by
``hydra.grad`` against their forward passes (``bench/grad.py``).

For each workload (mandelbrot, black-scholes, collatz, aobench, mc-pi, mc-pi-block) it
times hydra's cpu backend on one core and on all cores, NumPy with masks, Numba @njit
(scalar loop), Numba @njit(parallel=True) with prange, and JAX jit(vmap) when jax is importable.  It
prints the median and the best time of each and its speed relative to Numba scalar
(best over best: on a shared machine the best time is the one least disturbed), and checks every
result against Numba scalar's.  Timed code runs in blocks (all repeats of one
implementation together): two OpenMP-style thread pools in one process steal cores.
"""

from __future__ import annotations

import argparse
import importlib
import platform
import statistics
import sys
import time

import numba
import numpy as np

import hydra

WORKLOADS = ("mandelbrot", "blackscholes", "collatz", "aobench", "mcpi", "mcpiblock")


def _time(fn, repeat: int) -> tuple[float, float, object]:
    """(median, min, result) of ``repeat`` timed calls after a warm-up call."""
    out = fn()  # warm up (compiles)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times), out


def _agree(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "iub":
        return bool(np.array_equal(a, b))
    return bool(np.allclose(a, b, rtol=1e-6, atol=1e-9))


def implementations(mod, args):
    lanes = getattr(mod, "LANES", None)
    # transcendental workloads also run with fastmath (FMA contraction, reassociation):
    # the gain is largest where long chains of multiply-adds feed the math functions
    for fastmath in (False, True) if getattr(mod, "TRANSCENDENTAL", False) else (False,):
        for threads in (1, numba.config.NUMBA_NUM_THREADS):
            k = hydra.compile(mod.kernel, lanes=lanes, varying=mod.VARYING, backend="cpu",
                              threads=threads, fastmath=fastmath)
            label = f"hydra cpu{' fastmath' * fastmath}, {threads} thread{'s' * (threads > 1)}"
            yield label, (lambda k=k: k(*args))
    yield "numpy (masks)", lambda: mod.numpy_masks(*args)
    yield "numba @njit", lambda: mod.numba_scalar(*args)
    yield "numba prange", lambda: mod.numba_parallel(*args)
    maker = getattr(mod, "jax_vmap", None)
    if maker is not None:
        try:
            import jax
            import jax.numpy as jnp
        except ImportError:
            return
        jax.config.update("jax_enable_x64", True)
        f = maker(jax, jnp)
        yield "jax jit(vmap)", lambda: np.asarray(f(*args))


def _module(name: str):
    """The workload module of ``name``, as printed ("mc-pi") or as its file ("mcpi")."""
    module = name.replace("-", "").replace("_", "")
    if module not in WORKLOADS:
        raise SystemExit(f"bench: no workload {name!r}; the workloads are "
                         "mandelbrot, black-scholes, collatz, aobench, mc-pi, mc-pi-block")
    return importlib.import_module(f"bench.{module}")


def run(name: str, repeat: int, rounds: int = 1) -> list[tuple]:
    """The table rows of one workload.  With ``rounds`` > 1 every implementation is timed
    in each of ``rounds`` passes over all of them and keeps its best pass: on a shared
    machine a disturbance of a minute then spoils one pass of a row, not the row."""
    mod = _module(name)
    args = mod.setup()
    t0 = time.perf_counter()
    mod.numba_scalar(*args)
    first_numba = time.perf_counter() - t0
    impls = list(implementations(mod, args))
    firsts, times, outs = {}, {}, {}
    for _ in range(rounds):
        for label, fn in [("numba @njit (reference)", lambda: mod.numba_scalar(*args))] + impls:
            if label not in firsts:
                t0 = time.perf_counter()
                fn()
                firsts[label] = time.perf_counter() - t0
            t, best, outs[label] = _time(fn, repeat)
            if label not in times or best < times[label][1]:
                times[label] = (t, best)
    ref_best, ref = times["numba @njit (reference)"][1], outs["numba @njit (reference)"]
    rows = [(mod.NAME, label, *times[label], ref_best / times[label][1],
             _agree(outs[label], ref), firsts[label]) for label, _ in impls]
    rows.append((mod.NAME, "(numba @njit first call)", first_numba, first_numba, None, True,
                 first_numba))
    return rows


def boundscheck_cost(name: str, repeat: int) -> tuple[float, float]:
    """hydra on one core with bounds checks on and off, timed alternately (min of runs)."""
    mod = _module(name)
    args = mod.setup()
    fast = getattr(mod, "TRANSCENDENTAL", False)
    ks = [hydra.compile(mod.kernel, lanes=getattr(mod, "LANES", None), varying=mod.VARYING,
                        backend="cpu", threads=1, fastmath=fast, boundscheck=bc)
          for bc in (True, False)]
    times: list[list[float]] = [[], []]
    for k in ks:
        k(*args)
    for _ in range(repeat):
        for k, ts in zip(ks, times):
            t = time.perf_counter()
            k(*args)
            ts.append(time.perf_counter() - t)
    return min(times[0]), min(times[1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=list(WORKLOADS))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=1,
                    help="time every implementation in this many passes, keep each's best")
    ap.add_argument("--gpu", action="store_true",
                    help="hydra cuda vs a hand-written numba.cuda kernel vs hydra cpu")
    ap.add_argument("--scale", type=float, default=1,
                    help="with --gpu: the workloads at this many times their CPU size; with "
                         "ml: the number of examples at this many times ML.md's")
    ap.add_argument("--only", action="append", metavar="WORKLOAD",
                    help="with ml, grad: just this workload (mlp, rnn, early exit, ...); may "
                         "repeat")
    ap.add_argument("--against", metavar="DIR",
                    help="with startup, firstcall: also the hydra rows of the checkout in DIR")
    ap.add_argument("--boundscheck-cost", action="store_true",
                    help="time hydra (one core) with and without bounds checks instead")
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["cnn"]:  # its own options (bench/cnn.py)
        from .cnn import main as run_cnn
        run_cnn(args[1:])
        return
    a = ap.parse_args(argv)
    if a.names[:1] == ["firstcall"]:
        from .firstcall import run as run_firstcall
        run_firstcall(a.names[1:] or list(WORKLOADS), a.repeat, a.against)
        return
    if a.names == ["startup"]:
        from .startup import main as run_startup
        run_startup(2 * a.repeat, a.against)
        return
    if a.names == ["cpeers"]:
        from .cpeers import main as run_cpeers
        run_cpeers(2 * a.repeat)
        return
    if a.names == ["ml"] and a.gpu:
        from .mlgpu import main as run_mlgpu
        run_mlgpu(a.scale, a.repeat, *([a.only] if a.only else []))
        return
    if a.names == ["ml"]:
        from .ml import main as run_ml
        run_ml(a.scale, a.repeat, *([a.only] if a.only else []))
        return
    if a.names == ["profile"]:
        from .profilecost import main as run_profilecost
        run_profilecost(a.scale, a.repeat)
        return
    if a.names == ["grad"]:
        from .grad import main as run_grad
        run_grad(a.scale, a.repeat, a.only)
        return
    if a.names == ["async"]:
        from .asyncbench import main as run_async
        run_async(a.repeat)
        return
    if a.names == ["random"]:
        from .mcrandom import main as run_random
        run_random(a.repeat, a.rounds)
        return
    if a.names == ["dask"]:
        from .dask import run as run_dask
        run_dask(repeat=a.repeat)
        return
    if a.gpu:
        from .gpu import run as run_gpu
        run_gpu(a.names, a.repeat, a.scale)
        return
    if a.boundscheck_cost:
        for name in a.names:
            on, off = boundscheck_cost(name, 2 * a.repeat)
            print(f"{name:14} checks on {on * 1e3:8.1f} ms  off {off * 1e3:8.1f} ms  "
                  f"cost {100 * (on / off - 1):+.1f}%", flush=True)
        return
    print(f"# {platform.processor() or platform.machine()}, {numba.config.NUMBA_NUM_THREADS} "
          f"threads, numba {numba.__version__}, numpy {np.__version__}")
    print(f"{'workload':14} {'implementation':26} {'median ms':>10} {'best ms':>8} "
          f"{'vs numba':>9} {'agrees':>7} {'1st call s':>10}")
    for name in a.names:
        for wl, label, t, best, ratio, ok, first in run(name, a.repeat, a.rounds):
            r = f"{ratio:8.2f}x" if ratio is not None else ""
            print(f"{wl:14} {label:26} {t * 1e3:10.1f} {best * 1e3:8.1f} {r:>9} "
                  f"{'yes' if ok else 'NO':>7} {first:10.2f}", flush=True)


if __name__ == "__main__":
    main()
