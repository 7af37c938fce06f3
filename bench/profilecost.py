"""What ``hydra.profile`` costs: ``python -m bench profile [--scale S] [--repeat N]``.

For the scalar workloads of ``bench/run.py`` and ML.md's three (``bench/ml.py``), on
the cpu backend with one thread: the plain kernel, its instrumented twin
(``Kernel.instrumented()``: the lane counters, no profile open) and a whole
``k.profile(...)`` (counters, timers and events), timed in interleaved rounds (each
once in turn, so a change of load hits every row alike) after warm-up calls: the
median and best wall time of each, and the best CPU time of the process
(``time.process_time``: the kernel's one thread plus any BLAS threads of the products;
on a shared machine it is far less disturbed by other processes than the wall time)
with its ratio to the plain kernel's.
"""

from __future__ import annotations

import platform
import statistics
import time

import numpy as np

import hydra

from . import ml
from .run import WORKLOADS, _module


def _cases(scale: float):
    for name in WORKLOADS:
        mod = _module(name)
        args = mod.setup()
        k = hydra.compile(mod.kernel, lanes=getattr(mod, "LANES", None), varying=mod.VARYING,
                          backend="cpu", threads=1)
        yield mod.NAME, k, args
    for name in ml.SIZES:
        fn, varying, args, _ = ml.workload(name, scale)
        yield name, hydra.compile(fn, varying=varying, backend="cpu", threads=1), args


def _rows(k, args, repeat: int) -> dict[str, list[float]]:
    twin = k.instrumented()
    impls = {"plain": lambda: k(*args), "counted": lambda: twin(*args),
             "profiled": lambda: k.profile(*args)}
    for f in impls.values():  # warm up: compile, and the fused loops' shapes
        f()
        f()
    times = {label: [] for label in impls}
    cpu = {label: [] for label in impls}
    for _ in range(repeat):
        for label, f in impls.items():
            t, c = time.perf_counter(), time.process_time()
            f()
            cpu[label].append(time.process_time() - c)
            times[label].append(time.perf_counter() - t)
    return times, cpu


def main(scale: float = 1.0, repeat: int = 5) -> None:
    print(f"# {platform.processor() or platform.machine()}, cpu backend, 1 thread, "
          f"numpy {np.__version__}; interleaved rounds of {repeat}")
    print(f"{'workload':14} {'run':10} {'median ms':>10} {'best ms':>9} {'x plain':>8} "
          f"{'best cpu ms':>12} {'x plain':>8}")
    for name, k, args in _cases(scale):
        times, cpu = _rows(k, args, repeat)
        base, cbase = min(times["plain"]), min(cpu["plain"])
        for label, ts in times.items():
            print(f"{name:14} {label:10} {statistics.median(ts) * 1e3:10.2f} "
                  f"{min(ts) * 1e3:9.2f} {min(ts) / base:8.2f} {min(cpu[label]) * 1e3:12.2f} "
                  f"{min(cpu[label]) / cbase:8.2f}", flush=True)


if __name__ == "__main__":
    main()
