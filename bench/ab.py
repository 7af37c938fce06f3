"""One-core A/B of two hydra trees: ``python -m bench.ab OLD_TREE NEW_TREE [--rounds R]
[--calls N] [--rows mandelbrot,mandelbrot:fm,...]``.

Each round runs one process per tree (old, new, old, new, ...), pinned to one core
(``taskset -c 1`` where it exists) with ``PYTHONPATH`` set to the tree, that compiles
every row with ``threads=1`` and times ``N`` calls after a first (compiling) call.  A
row is a workload of ``bench/`` (its module name), ``:fm`` for ``fastmath=True``, or
``:numba`` for its Numba @njit scalar peer (a reference that neither tree changes).
The table keeps each row's best and median over all rounds, the new/old ratio of the
bests, the best first-call time (compile included), and the load average, because on
a shared machine only interleaved ratios mean much.  The workloads and hydra are
imported from the tree being timed; this file does the timing in both.
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

ROWS = ("mandelbrot,mandelbrot:fm,blackscholes,blackscholes:fm,collatz,aobench,mcpi,"
        "mcpiblock,mcpiblock:numba")


def one(rows: str, calls: int) -> None:
    """In the timed process: one JSON line per row."""
    import importlib

    import hydra
    for row in rows.split(","):
        name, _, mode = row.partition(":")
        mod = importlib.import_module(f"bench.{name}")
        args = mod.setup()
        if mode == "numba":
            def fn(mod=mod, args=args):
                return mod.numba_scalar(*args)
        else:
            k = hydra.compile(mod.kernel, lanes=getattr(mod, "LANES", None),
                              varying=mod.VARYING, backend="cpu", threads=1,
                              fastmath=mode == "fm")

            def fn(k=k, args=args):
                return k(*args)
        t0 = time.perf_counter()
        fn()
        first = time.perf_counter() - t0
        times = []
        for _ in range(calls):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        print(json.dumps({"row": row, "times": times, "first": first}), flush=True)


def run(trees: list[tuple[str, str]], rows: str, rounds: int, calls: int) -> str:
    pin = ["taskset", "-c", "1"] if shutil.which("taskset") and os.cpu_count() > 1 else []
    times: dict = collections.defaultdict(list)
    firsts: dict = collections.defaultdict(list)
    loads = []
    for _ in range(rounds):
        for label, path in trees:
            loads.append(os.getloadavg()[0])
            # this file times the other tree too: hydra and the workloads come from
            # PYTHONPATH, so the old tree needs no bench/ab.py of its own
            cmd = pin + [sys.executable, os.path.abspath(__file__), "--one", rows,
                         "--calls", str(calls)]
            out = subprocess.run(cmd, cwd=path, capture_output=True, text=True,
                                 env={**os.environ, "PYTHONPATH": os.path.abspath(path)})
            if out.returncode:
                raise SystemExit(f"bench.ab: the run in {path} failed:\n{out.stderr[-3000:]}")
            for line in out.stdout.splitlines():
                d = json.loads(line)
                times[d["row"], label] += d["times"]
                firsts[d["row"], label].append(d["first"])
    labels = [label for label, _ in trees]
    lines = [f"# {rounds} interleaved rounds x {calls} calls, {' '.join(pin) or 'unpinned'}, "
             f"threads=1; load (1 min) {min(loads):.2f}-{max(loads):.2f}",
             f"{'row':18}" + "".join(f"{lb + ' best':>13}{'median':>9}" for lb in labels)
             + f"{'new/old':>9}" + "".join(f"{lb + ' 1st s':>12}" for lb in labels)]
    for row in rows.split(","):
        cells, bests = "", []
        for label in labels:
            ts = times[row, label]
            bests.append(min(ts))
            cells += f"{min(ts) * 1e3:11.2f}ms{statistics.median(ts) * 1e3:9.2f}"
        fs = "".join(f"{min(firsts[row, label]):12.3f}" for label in labels)
        lines.append(f"{row:18}{cells}{bests[-1] / bests[0]:9.2f}{fs}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.split("\n")[0])
    p.add_argument("trees", nargs="*", help="OLD_TREE NEW_TREE")
    p.add_argument("--rows", default=ROWS)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.one is not None:
        here = os.path.dirname(os.path.abspath(__file__))
        # run as a file, bench/ is sys.path[0]: its dask.py must not shadow dask
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        one(a.one, a.calls)
        return
    if len(a.trees) != 2:
        p.error("give two trees: OLD_TREE NEW_TREE")
    print(run(list(zip(("old", "new"), a.trees)), a.rows, a.rounds, a.calls))


if __name__ == "__main__":
    main()
