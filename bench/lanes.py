"""Lane utilization of a kernel's varying loop, lockstep gangs against persistent lanes.

A *counter build* of the cpu kernels (the production code has no counters): the phase
generators of ``hydra.backends.cpu.persistent`` are swapped for subclasses that add,
at each trip of the phase's top-level varying loop, the number of slots whose lane is
in the loop and the number of slots, to two counters; utilization is their ratio.  A
persistent gang also counts its refills.

    python -m bench.lanes            # collatz, 1e6 starts, one thread
    python -m bench.lanes --time     # and the times, interleaved with Numba's
    taskset -c 1 python -m bench.lanes --time   # one core
"""

from __future__ import annotations

import contextlib
import os

import numpy as np

import hydra
from hydra.backends.cpu import persistent
from hydra.backends.cpu.codegen import KernelGen

_COUNTERS = np.zeros(4, np.int64)  # active slot-trips, slot-trips, refills, trips


def _add(gen, word: int, value: str) -> None:
    ptr = f"inttoptr (i64 {_COUNTERS.ctypes.data + 8 * word} to ptr)"
    gen.b.do(f"atomicrmw add ptr {ptr}, i64 {value} monotonic")


def _count(gen, mask) -> None:
    b = gen.b
    b.declare("declare i64 @llvm.ctpop.i64(i64)")
    _add(gen, 0, b.emit(f"call i64 @llvm.ctpop.i64(i64 {b.bits(mask)})"))
    _add(gen, 1, str(gen.geo.lanes))
    _add(gen, 3, "1")


class _Lockstep(KernelGen):
    def op_while(self, op):
        self._top_loop = getattr(self, "_top_loop", None) or op.regions[1]
        return super().op_while(op)

    def bind(self, region, reps):
        super().bind(region, reps)
        if region is getattr(self, "_top_loop", None):
            _count(self, reps[0])


class _Persistent(persistent.PersistentGen):
    def count_trip(self, mask) -> None:
        _count(self, mask)

    def _fill(self, *args):
        _add(self, 2, "1")
        return super()._fill(*args)


@contextlib.contextmanager
def _counting(on: bool):
    saved, env = persistent.CLASSES, os.environ.get("HYDRA_CPU_PERSISTENT")
    persistent.CLASSES = (_Lockstep, _Persistent)
    os.environ["HYDRA_CPU_PERSISTENT"] = "1" if on else "0"
    try:
        yield
    finally:
        persistent.CLASSES = saved
        if env is None:
            os.environ.pop("HYDRA_CPU_PERSISTENT")
        else:
            os.environ["HYDRA_CPU_PERSISTENT"] = env


def utilization(fn, args: tuple, varying=(), persistent_lanes: bool = True,
                **options) -> dict:
    """Run ``fn`` once (a fresh counter build, one thread) and return its loop's
    ``trips`` (gang trips), ``active`` and ``slots`` (slot-trips), ``utilization``
    (active / slots) and ``refills`` (persistent gangs)."""
    with _counting(persistent_lanes):
        k = hydra.compile(fn, varying=varying, threads=1, **options)
        _COUNTERS[:] = 0
        k(*args)
    active, slots, refills, trips = (int(x) for x in _COUNTERS)
    return {"trips": trips, "active": active, "slots": slots, "refills": refills,
            "utilization": active / slots if slots else float("nan")}


def timings(rounds: int = 11) -> None:
    """Collatz 1..1e6, interleaved (lockstep, persistent, Numba @njit scalar, ...) on
    one thread and on all: best and median of ``rounds`` rounds, with the load."""
    import time

    import numba

    from bench import collatz
    args = collatz.setup()
    ref = collatz.numba_scalar(*args)
    runs = {}
    for threads in (1, numba.config.NUMBA_NUM_THREADS):
        for label, mode in (("lockstep", "0"), ("persistent", "1")):
            saved = os.environ.get("HYDRA_CPU_PERSISTENT")
            os.environ["HYDRA_CPU_PERSISTENT"] = mode
            k = hydra.compile(collatz.kernel, varying=collatz.VARYING, threads=threads)
            assert np.array_equal(k(*args), ref)  # (compiles here, under the mode)
            os.environ.pop("HYDRA_CPU_PERSISTENT")
            if saved is not None:
                os.environ["HYDRA_CPU_PERSISTENT"] = saved
            runs[f"hydra {label}, {threads} thread{'s' * (threads > 1)}"] = k
    runs["numba @njit (scalar)"] = collatz.numba_scalar
    wall: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, fn in runs.items():
            t, c = time.perf_counter(), time.thread_time()
            fn(*args)
            cpu[name].append(time.thread_time() - c)
            wall[name].append(time.perf_counter() - t)
    print(f"# collatz 1..1e6, {rounds} interleaved rounds, load {os.getloadavg()[0]:.2f}; "
          "x = Numba's time / this one's; cpu = the calling thread's CPU time (one-thread "
          "rows: the time the core ran it, less disturbed by other processes)")
    print(f"{'':32s}{'best ms':>9s}{'median':>8s}{'x best':>8s}{'x med':>7s}"
          f"{'cpu best':>10s}{'x cpu':>7s}")
    nb = "numba @njit (scalar)"
    for name in runs:
        best, med, cbest = min(wall[name]), float(np.median(wall[name])), min(cpu[name])
        one = "1 thread" in name or name == nb
        print(f"{name:32s}{best * 1e3:9.1f}{med * 1e3:8.1f}{min(wall[nb]) / best:8.2f}"
              f"{float(np.median(wall[nb])) / med:7.2f}"
              + (f"{cbest * 1e3:10.1f}{min(cpu[nb]) / cbest:7.2f}" if one else ""))


def main() -> None:
    import sys

    from bench import collatz
    args = collatz.setup()
    for on in (False, True):
        r = utilization(collatz.kernel, args, collatz.VARYING, on)
        print(f"collatz 1..{len(args[0])}: {'persistent' if on else 'lockstep  '} "
              f"utilization {r['utilization']:.3f} ({r['active']} / {r['slots']} "
              f"slot-trips, {r['trips']} trips, {r['refills']} refills)")
    if "--time" in sys.argv:
        timings()


if __name__ == "__main__":
    main()
