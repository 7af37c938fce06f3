"""A/B of two hydra trees: ``python -m bench.ab OLD_TREE NEW_TREE [--rounds R]
[--calls N] [--rows mandelbrot,mlp@2,...] [--scale S]``.

Each round runs one process per tree (old, new, old, new, ...), pinned to as many
cores as its rows' threads (``taskset -c 1`` for one, where taskset exists) with
``PYTHONPATH`` set to the tree, that compiles every row for the cpu backend and times
``N`` calls after a first (compiling) call.  A row is ``workload[:mode][@threads]``:

- a scalar workload of ``bench/`` (its module name), ``:fm`` for ``fastmath=True``, or
  ``:numba`` for its Numba @njit scalar peer (a reference that neither tree changes);
- an ML workload (``ML_WORKLOADS``): ``mlp``, ``rnn`` and ``early-exit`` of
  ``bench/ml.py`` (ML.md's sizes times ``--scale``) and ``digits``, one training step
  of ``examples/digits_cnn.py`` on 256 examples;
- ``@2``: the kernel compiled with ``threads=2`` (default one thread).

The table keeps each row's best and median over all rounds, the new/old ratio of the
bests, the best first-call time (compile included), and the load average, because on
a shared machine only interleaved ratios mean much.  A row whose new best is more than
``RERUN_ABOVE`` slower than its old best is timed again for ``RERUN_ROUNDS`` rounds
before it counts (noise is the usual reason); the table marks it.  The workloads and
hydra are imported from the tree being timed; this file does the timing in both.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

SCALAR_ROWS = ("mandelbrot,mandelbrot:fm,blackscholes,blackscholes:fm,collatz,aobench,mcpi,"
               "mcpiblock,mcpiblock:numba")
#: the per-lane array workloads: row name -> bench.ml's name (None: the digits step)
ML_WORKLOADS = {"mlp": "mlp", "rnn": "rnn", "early-exit": "early exit", "digits": None}
ML_ROWS = ",".join([*ML_WORKLOADS, *(f"{w}@2" for w in ML_WORKLOADS)])
ROWS = f"{SCALAR_ROWS},{ML_ROWS}"
#: a row more than this much slower (new best / old best) is timed again ...
RERUN_ABOVE = 1.05
#: ... for this many rounds, and those times count
RERUN_ROUNDS = 10


def parse_row(row: str) -> tuple[str, str, int]:
    """``workload[:mode][@threads]`` -> (workload, mode, threads)."""
    row, _, threads = row.partition("@")
    name, _, mode = row.partition(":")
    return name, mode, int(threads or 1)


def _ml_case(name: str, scale: float):
    """(per-example function, varying names, arguments) of an ML row."""
    import importlib
    if ML_WORKLOADS[name] is not None:
        fn, varying, args, _ = importlib.import_module("bench.ml").workload(
            ML_WORKLOADS[name], scale)
        return fn, varying, args
    import numpy as np
    sys.path.insert(0, os.path.join(os.getcwd(), "examples"))
    digits_cnn = importlib.import_module("digits_cnn")
    rng = np.random.default_rng(0)
    x = rng.random((256, 1, 10, 10), dtype=np.float32)
    y = rng.integers(0, 10, 256)
    return digits_cnn.batch_grads, ("x", "label"), (x, y, *digits_cnn.init())


def one(rows: str, calls: int, scale: float = 1.0) -> None:
    """In the timed process: one JSON line per row."""
    import importlib

    import hydra
    for row in rows.split(","):
        name, mode, threads = parse_row(row)
        if name in ML_WORKLOADS:
            kernel, varying, args = _ml_case(name, scale)
            lanes = None
        else:
            mod = importlib.import_module(f"bench.{name}")
            kernel, varying, lanes, args = (mod.kernel, mod.VARYING,
                                            getattr(mod, "LANES", None), mod.setup())
        if mode == "numba":
            def fn(mod=mod, args=args):
                return mod.numba_scalar(*args)
        else:
            k = hydra.compile(kernel, lanes=lanes, varying=varying, backend="cpu",
                              threads=threads, fastmath=mode == "fm")

            def fn(k=k, args=args):
                return k(*args)
        t0 = time.perf_counter()
        fn()
        first = time.perf_counter() - t0
        for where in ("machinecode", "cpu"):  # a tree that builds generated loops in the
            try:  # background (since issue 23 in machinecode/): the steady state
                background = importlib.import_module(f"hydra.backends.{where}.background")
            except ImportError:
                continue
            background.wait()
            break
        times = []
        for _ in range(calls):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        print(json.dumps({"row": row, "times": times, "first": first}), flush=True)


def _pin(rows: str) -> list[str]:
    """taskset to as many cores as the rows' most threads (core 1 alone for one)."""
    threads = max(parse_row(r)[2] for r in rows.split(","))
    if not shutil.which("taskset") or os.cpu_count() <= 1:
        return []
    cores = "1" if threads == 1 else f"0-{min(threads, os.cpu_count()) - 1}"
    return ["taskset", "-c", cores]


def _rounds(trees, rows: str, rounds: int, calls: int, scale: float, loads: list):
    """Interleaved rounds: (times, first-call times) per (row, tree label)."""
    times: dict = collections.defaultdict(list)
    firsts: dict = collections.defaultdict(list)
    for _ in range(rounds):
        for label, path in trees:
            loads.append(os.getloadavg()[0])
            # this file times the other tree too: hydra and the workloads come from
            # PYTHONPATH, so the old tree needs no bench/ab.py of its own
            cmd = _pin(rows) + [sys.executable, os.path.abspath(__file__), "--one", rows,
                                "--calls", str(calls), "--scale", str(scale)]
            out = subprocess.run(cmd, cwd=path, capture_output=True, text=True,
                                 env={**os.environ, "PYTHONPATH": os.path.abspath(path)})
            if out.returncode:
                raise SystemExit(f"bench.ab: the run in {path} failed:\n{out.stderr[-3000:]}")
            for line in out.stdout.splitlines():
                d = json.loads(line)
                times[d["row"], label] += d["times"]
                firsts[d["row"], label].append(d["first"])
    return times, firsts


def run(trees: list[tuple[str, str]], rows: str, rounds: int, calls: int,
        scale: float = 1.0, rerun_rounds: int = RERUN_ROUNDS) -> str:
    loads: list = []
    times, firsts = _rounds(trees, rows, rounds, calls, scale, loads)
    labels = [label for label, _ in trees]
    slow = [row for row in rows.split(",")
            if min(times[row, labels[-1]]) > RERUN_ABOVE * min(times[row, labels[0]])]
    if slow and rerun_rounds:  # timed again; those times replace the first ones
        again, firsts_again = _rounds(trees, ",".join(slow), rerun_rounds, calls, scale,
                                      loads)
        times.update(again)
        firsts.update(firsts_again)
    lines = [f"# {rounds} interleaved rounds x {calls} calls, {' '.join(_pin(rows)) or 'unpinned'}"
             f"; load (1 min) {min(loads):.2f}-{max(loads):.2f}",
             f"{'row':18}" + "".join(f"{lb + ' best':>13}{'median':>9}" for lb in labels)
             + f"{'new/old':>9}" + "".join(f"{lb + ' 1st s':>12}" for lb in labels)]
    for row in rows.split(","):
        cells, bests = "", []
        for label in labels:
            ts = times[row, label]
            bests.append(min(ts))
            cells += f"{min(ts) * 1e3:11.2f}ms{statistics.median(ts) * 1e3:9.2f}"
        fs = "".join(f"{min(firsts[row, label]):12.3f}" for label in labels)
        mark = f"  (re-run: {rerun_rounds} rounds)" if row in slow and rerun_rounds else ""
        lines.append(f"{row:18}{cells}{bests[-1] / bests[0]:9.2f}{fs}{mark}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.split("\n")[0])
    p.add_argument("trees", nargs="*", help="OLD_TREE NEW_TREE")
    p.add_argument("--rows", default=ROWS)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--scale", type=float, default=1.0,
                   help="ML workloads' sizes times this (ML.md's sizes at 1)")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.one is not None:
        here = os.path.dirname(os.path.abspath(__file__))
        # run as a file, bench/ is sys.path[0]: its dask.py must not shadow dask
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        one(a.one, a.calls, a.scale)
        return
    if len(a.trees) != 2:
        p.error("give two trees: OLD_TREE NEW_TREE")
    print(run(list(zip(("old", "new"), a.trees)), a.rows, a.rounds, a.calls, a.scale))


if __name__ == "__main__":
    main()
