"""The cut-off below which the cpu backend runs a phase on the calling thread.

    python -m bench.threads_cutoff

Measures, on ONE thread (which a loaded machine disturbs least: no team waits for a
core), the ns per lane of generated straight-line kernels with k arithmetic ops or k
math functions, and compares them with the model of ``hydra.backends.cpu.schedule``
(``NS_PER_LANE + ops * NS_PER_OP``, a math function counting ``MATH_OPS`` ops).  Then it
times a tiny kernel at a few lane counts with the team and on one thread, and prints the
threads ``threads_for`` picks.  The team timings depend on how busy the machine is.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
import time

import numba
import numpy as np

import hydra
from hydra.backends.cpu import schedule
from hydra.backends.cpu.phases import Phase

LANES = 1 << 20


def _kernel(k: int, math_fn: bool):
    """``out[lane()] = f(x)`` with k chained ops (adds and muls, or math.exp)."""
    body = ["    y = x"]
    for i in range(k):
        body.append("    y = math.exp(-y)" if math_fn else f"    y = y * 0.999 + {i % 7}.5")
    src = ("import math\nfrom hydra import lane\n\n\ndef kern(x, out):\n"
           + "\n".join(body) + "\n    out[lane()] = y\n")
    path = os.path.join(tempfile.mkdtemp(), f"kern_{k}_{int(math_fn)}.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(f"kern_{k}_{int(math_fn)}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.kern


def best_ms(fn, repeat: int = 15) -> tuple[float, float]:
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times)) * 1e3, min(times) * 1e3


def model_cost(kernel, x, out) -> float:
    """The schedule's estimate for the kernel's (single) phase."""
    k = hydra.compile(kernel, varying=("x",), backend="cpu", threads=1)
    k(x, out)
    _, runner = next(iter(k._cache.values()))
    phases = [s for s in runner.__self__.steps if isinstance(s, Phase)]
    return sum(p.cost for p in phases)


def main() -> None:
    x = np.linspace(0.1, 1.0, LANES)
    out = np.zeros(LANES)
    print(f"# one thread, {LANES} lanes, float64; model: {schedule.NS_PER_LANE} ns/lane + "
          f"{schedule.NS_PER_OP} ns/op, math = {schedule.MATH_OPS} ops")
    print(f"{'kernel':<16}{'ns/lane best':>14}{'median':>10}{'model':>10}")
    for math_fn, ks in ((False, (1, 4, 16, 64, 256)), (True, (1, 4, 16))):
        for k in ks:
            kern = _kernel(k, math_fn)
            run = hydra.compile(kern, varying=("x",), backend="cpu", threads=1)
            med, best = best_ms(lambda: run(x, out))
            name = f"{k} {'exp' if math_fn else 'arith'}"
            print(f"{name:<16}{best * 1e6 / LANES:>14.3f}{med * 1e6 / LANES:>10.3f}"
                  f"{model_cost(kern, x, out):>10.3f}")
    tiny = _kernel(1, False)
    cost = model_cost(tiny, x, out)
    team = numba.config.NUMBA_NUM_THREADS
    print(f"\n# a 1-op kernel: median / best ms; the team has {team} threads; cut-off "
          f"{schedule.SERIAL_BELOW_NS / 1e3:.0f} us of single-core work = "
          f"{int(schedule.SERIAL_BELOW_NS / cost)} lanes")
    print(f"{'lanes':>9}{'team forced':>22}{'one thread':>20}{'chosen':>8}")
    saved = schedule.SERIAL_BELOW_NS
    for n in (1_000, 4_000, 16_000, 64_000, 256_000, 1_000_000):
        xs, outs = x[:n].copy(), out[:n].copy()
        k1 = hydra.compile(tiny, varying=("x",), backend="cpu", threads=1)
        kt = hydra.compile(tiny, varying=("x",), backend="cpu")
        schedule.SERIAL_BELOW_NS = 0  # force the team, to see what it costs
        t_team = best_ms(lambda: kt(xs, outs), 30)
        schedule.SERIAL_BELOW_NS = saved
        t_one = best_ms(lambda: k1(xs, outs), 30)
        chosen = schedule.threads_for(n, team, cost)
        print(f"{n:>9}{t_team[0]:>12.3f} /{t_team[1]:>7.3f}{t_one[0]:>10.3f} /{t_one[1]:>7.3f}"
              f"{chosen:>8}")


if __name__ == "__main__":
    main()
