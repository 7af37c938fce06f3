"""GPU benchmarks: ``python -m bench --gpu [--scale S] [names...]``.

For each workload it times, at its CPU size times ``S`` (default 1; the CUDA issue asks
for 1 and 100): hydra's ``cuda`` backend, the hand-written numba.cuda kernel a Numba user
would write for the same workload (one thread per element, the per-element function as a
device function), and hydra's ``cpu`` backend on all cores.  Inputs live on the device
for both GPU rows (hydra takes device arrays without copies); both GPU rows copy their
result back to the host, so each timed call is launch + kernel + result transfer.  The
ratio column is the hand-written kernel's best time over the row's: the CUDA issue's
target is at least 1/1.2 = 0.83 for hydra.  "agrees" compares each row's result with
hydra cpu's (the numpy reference's bits).

On numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) this runs too, but times Python;
``tests/test_bench_gpu.py`` uses it to check the hand-written kernels' results.
"""

from __future__ import annotations

import time

import numpy as np
from numba import cuda  # a global: the simulator swaps it inside kernels

import hydra

THREADS = 256


def scaled(mod, scale: int) -> tuple[tuple, int | None]:
    """The workload's arguments and lane count at ``scale`` times its CPU size: varying
    arrays tiled (``scale`` copies), mc-pi with ``scale`` times the lanes.  A scale
    below 1 takes that fraction of the elements (the simulator's tests)."""
    args = mod.setup()
    lanes = getattr(mod, "LANES", None)
    if lanes is not None:
        return args, max(1, int(lanes * scale))
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            a = np.tile(a, int(scale)) if scale >= 1 else a[: max(1, int(a.size * scale))]
        out.append(a)
    return tuple(out), None


def _grid(n: int) -> tuple[int, int]:
    return (n + THREADS - 1) // THREADS, THREADS


def hand_written(mod, lanes: int | None):
    """The numba.cuda kernel of workload ``mod``: a function of the (device) arguments
    returning the host result, as the hydra kernel's."""
    if mod.NAME == "mc-pi":
        return _mc_pi(mod, lanes)
    per_element = cuda.jit(device=True)(mod.kernel)
    varying = [p in mod.VARYING for p in mod.kernel.__code__.co_varnames[
        : mod.kernel.__code__.co_argcount]]
    out_type = {"mandelbrot": np.int32, "collatz": np.int64}.get(mod.NAME, np.float64)
    # one kernel per arity, written out: numba.cuda kernels take no *args
    if varying == [True, True, False]:  # mandelbrot
        @cuda.jit
        def k3(a, b, c, out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = per_element(a[i], b[i], c)
        launch = k3
    elif varying == [True]:  # collatz
        @cuda.jit
        def k1(a, out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = per_element(a[i])
        launch = k1
    elif varying == [True, True, True, True, False]:  # black-scholes
        @cuda.jit
        def k5(a, b, c, d, e, out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = per_element(a[i], b[i], c[i], d[i], e)
        launch = k5
    elif varying == [True, True, False, False, False]:  # aobench
        @cuda.jit
        def k2u(a, b, c, d, e, out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = per_element(a[i], b[i], c, d, e)
        launch = k2u
    else:
        raise NotImplementedError(f"no hand-written kernel for {mod.NAME}")

    def run(*args):
        n = next(a.size for a, v in zip(args, varying) if v)
        out = cuda.device_array(n, out_type)
        launch[_grid(n)](*args, out)
        return out.copy_to_host()
    return run


def _mc_pi(mod, lanes: int):
    """mc-pi by hand: each thread counts its hits, one atomic add per thread."""
    hash32 = cuda.jit(device=True)(mod._hash)  # the int64-masked uint32 hash
    scale = float(mod.SCALE)

    @cuda.jit
    def count(per_lane, n, hits):
        i = cuda.grid(1)
        if i < n:
            mine = 0
            for k in range(per_lane):
                c = np.int64(i) * per_lane * 2 + 2 * k
                x = np.float32(hash32(c & 0xFFFFFFFF)) * np.float32(scale)
                y = np.float32(hash32((c + 1) & 0xFFFFFFFF)) * np.float32(scale)
                if x * x + y * y < np.float32(1.0):
                    mine += 1
            cuda.atomic.add(hits, 0, mine)

    def run(per_lane):
        hits = cuda.to_device(np.zeros(1, np.int64))
        count[_grid(lanes)](per_lane, lanes, hits)
        return 4.0 * int(hits.copy_to_host()[0]) / (lanes * per_lane)
    return run


def implementations(mod, scale: float, threads: int):
    """(label, call) pairs of the GPU comparison."""
    args, lanes = scaled(mod, scale)
    on_device = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    gpu = hydra.compile(mod.kernel, lanes=lanes, varying=mod.VARYING, backend="cuda")
    cpu = hydra.compile(mod.kernel, lanes=lanes, varying=mod.VARYING, backend="cpu",
                        threads=threads)
    manual = hand_written(mod, lanes)
    return [("numba.cuda by hand", lambda: manual(*on_device)),
            ("hydra cuda", lambda: gpu(*on_device)),
            (f"hydra cpu, {threads} threads", lambda: cpu(*args))]


def run(names: list[str], repeat: int, scale: float) -> None:
    """Print the GPU table of ``names``."""
    import numba

    from .run import _agree, _module, _time
    if not numba.config.ENABLE_CUDASIM and not cuda.is_available():
        print("# bench --gpu: no GPU here (and numba's CUDA simulator is off): nothing timed")
        return
    gpu = "the CUDA simulator" if numba.config.ENABLE_CUDASIM else \
        cuda.get_current_device().name.decode() if isinstance(
            cuda.get_current_device().name, bytes) else cuda.get_current_device().name
    print(f"# {gpu}, scale {scale}, numba {numba.__version__}; ratio: the hand-written "
          f"kernel's best time over the row's")
    print(f"{'workload':14} {'implementation':26} {'median ms':>10} {'best ms':>8} "
          f"{'ratio':>7} {'agrees':>7} {'1st call s':>10}")
    for name in names:
        mod = _module(name)
        try:
            impls = implementations(mod, scale, numba.config.NUMBA_NUM_THREADS)
        except NotImplementedError as e:
            print(f"{mod.NAME:14} skipped: {e}", flush=True)
            continue
        rows = []
        for label, call in impls:
            t0 = time.perf_counter()
            call()
            first = time.perf_counter() - t0
            rows.append((label, first, *_time(call, repeat)))
        # agreement with hydra cpu, which gives the numpy reference's bits (within the
        # documented ulp of math functions): the hand-written kernel may differ where
        # NVVM fused a multiply and an add into an FMA
        ref_best, ref = rows[0][3], rows[-1][4]
        for label, first, t, best, out in rows:
            print(f"{mod.NAME:14} {label:26} {t * 1e3:10.2f} {best * 1e3:8.2f} "
                  f"{ref_best / best:6.2f}x {'yes' if _agree(out, ref) else 'NO':>7} "
                  f"{first:10.2f}", flush=True)
