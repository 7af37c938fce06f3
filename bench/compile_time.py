"""First-call time of long generated kernels on the cpu backend.

    python -m bench.compile_time [LINES ...]     # default 500 1000 2000

Each kernel is LINES statements of straight-line float64 arithmetic, one in five an
``if`` (the shape of a long generated simulation step), run on 100,000 lanes.  Prints
the specialization time (frontend, passes, LLVM text), the driver build (numba and LLVM,
at the first run) and a second run.  Each size runs in a fresh process, so nothing is
cached in memory (and ``cache`` is off).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import time

LANES = 100_000


def source(lines: int) -> str:
    rnd = random.Random(1)
    body = ["    a = x", "    b = y"]
    for _ in range(lines):
        r = rnd.random()
        if r < 0.6:
            body.append(f"    a = a * {rnd.uniform(0.9, 1.1):.4f} + b * "
                        f"{rnd.uniform(-0.1, 0.1):.4f}")
        elif r < 0.8:
            body.append(f"    b = b - a * {rnd.uniform(0.0, 0.01):.4f}")
        else:
            body += ["    if a > b:", f"        a = a - {rnd.uniform(0.0, 1):.3f}"]
    return ("from hydra import lane\n\n\ndef big(x, y, out):\n" + "\n".join(body)
            + "\n    out[lane()] = a + b\n")


def measure(path: str) -> None:
    """In this process: time the first and second call of the kernel in ``path``."""
    import importlib.util

    import numpy as np

    import hydra
    spec = importlib.util.spec_from_file_location("big_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    k = hydra.compile(mod.big, varying=("x", "y"), backend="cpu")
    x, y = np.linspace(0, 1, LANES), np.linspace(1, 2, LANES)
    out = np.zeros(LANES)
    t0 = time.perf_counter()
    k.specialize(k.signature((x, y, out))[1])
    t1 = time.perf_counter()
    k(x, y, out)
    t2 = time.perf_counter()
    k(x, y, out)
    t3 = time.perf_counter()
    print(f"{t1 - t0:14.2f}{t2 - t1:16.2f}{(t3 - t2) * 1e3:12.1f}")


def main(argv: list[str]) -> None:
    if argv[:1] == ["--measure"]:
        measure(argv[1])
        return
    sizes = [int(a) for a in argv] or [500, 1000, 2000]
    print(f"# {LANES} lanes; seconds, except the second run")
    print(f"{'lines':>6}{'specialize s':>14}{'driver build s':>16}{'2nd run ms':>12}")
    env = dict(os.environ, HYDRA_QUIET="1")
    for n in sizes:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, f"big{n}.py")
            with open(path, "w") as f:
                f.write(source(n))
            out = subprocess.run([sys.executable, "-m", "bench.compile_time", "--measure",
                                  path], capture_output=True, text=True, env=env)
            print(f"{n:>6}" + (out.stdout.rstrip() or " failed: " + out.stderr[-300:]))


if __name__ == "__main__":
    main(sys.argv[1:])
