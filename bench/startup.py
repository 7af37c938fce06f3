"""Start-up with a disk cache: a new process's time to the first result of a cached kernel.

    python -m bench startup [--repeat R] [--against DIR]

Each row is a kernel whose machine code is already in its disk cache (one unmeasured
run fills it), run in 2R fresh processes (R = 5 by default), the rows interleaved (A, B,
A, B, ...): hydra's cpu backend with ``cache=True`` (the mandelbrot kernel of
``bench/mandelbrot``, 1024x768 pixels, 256 iterations; one row per thread count, and
one without the cache: a new process that compiles), and a peer, Numba's
``@njit(cache=True)`` of the same scalar loop; and a kernel with per-lane arrays (one
training step of ``examples/digits_cnn.py``, 256 lanes: its fused elementwise loops are
cached beside its native phases), with and without the cache.  ``--against DIR`` adds
the hydra rows of another checkout (its ``hydra`` package in DIR) for before/after
comparisons.  Printed per row: the median and best of "to result" (from before ``import
hydra`` / ``import numba`` to the first result, inside the process) and "process" (the
whole process's wall time, interpreter start included), and which of numba and scipy
the process imported.  Bytecode is cached as for an installed package
(``PYTHONDONTWRITEBYTECODE`` is dropped; the unmeasured run writes it).
"""

from __future__ import annotations

import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from . import mandelbrot

# the kernel's source is bench/mandelbrot's, so both measure the same code
_HYDRA = '''
import time
t0 = time.perf_counter()
import hydra
import numpy as np

TWO, FOUR = np.float32(2.0), np.float32(4.0)


''' + inspect.getsource(mandelbrot.kernel) + '''

xs = np.linspace(-2.0, 1.0, 1024, dtype=np.float32)
ys = np.linspace(-1.0, 1.0, 768, dtype=np.float32)
k = hydra.compile(kernel, varying=("c_re", "c_im"), backend="cpu", cache={cache},
                  threads={threads})
out = k(np.tile(xs, 768), np.repeat(ys, 1024), np.int32(256))
t1 = time.perf_counter()
import sys, json
print(json.dumps([t1 - t0, int(out.sum()), "numba" in sys.modules, "scipy" in sys.modules]))
'''

# one training step of examples/digits_cnn.py (the checkout's own copy)
_ARRAYS = '''
import time
t0 = time.perf_counter()
import hydra
import numpy as np
import sys
sys.path.insert(0, {examples!r})
import digits_cnn

rng = np.random.default_rng(0)
x = rng.random((256, 1, 10, 10), dtype=np.float32)
y = rng.integers(0, 10, 256)
k = hydra.compile(digits_cnn.batch_grads, varying=("x", "label"), backend="cpu",
                  cache={cache})
out = k(x, y, *digits_cnn.init())
t1 = time.perf_counter()
import json
print(json.dumps([t1 - t0, round(sum(float(np.sum(o)) for o in out), 3),
                  "numba" in sys.modules, "scipy" in sys.modules]))
'''

_NUMBA = '''
import time
t0 = time.perf_counter()
import numba
import numpy as np

@numba.njit(cache=True)
def mandel(c_re, c_im, max_iter):
    out = np.empty(c_re.shape[0], np.int32)
    for j in range(c_re.shape[0]):
        z_re, z_im = c_re[j], c_im[j]
        i = np.int32(0)
        while i < max_iter:
            if z_re * z_re + z_im * z_im > np.float32(4.0):
                break
            new_re = z_re * z_re - z_im * z_im
            new_im = np.float32(2.0) * z_re * z_im
            z_re = c_re[j] + new_re
            z_im = c_im[j] + new_im
            i += 1
        out[j] = i
    return out

xs = np.linspace(-2.0, 1.0, 1024, dtype=np.float32)
ys = np.linspace(-1.0, 1.0, 768, dtype=np.float32)
out = mandel(np.tile(xs, 768), np.repeat(ys, 1024), np.int32(256))
t1 = time.perf_counter()
import sys, json
print(json.dumps([t1 - t0, int(out.sum()), "numba" in sys.modules, "scipy" in sys.modules]))
'''


def _once(script: str, env: dict) -> tuple[float, float, int, bool, bool]:
    t = time.perf_counter()
    done = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if done.returncode:
        raise SystemExit(f"bench startup: {script} failed:\n{done.stderr}")
    inside, total, numba, scipy = json.loads(done.stdout.splitlines()[-1])
    return inside, wall, total, numba, scipy


def main(repeat: int = 10, against: str | None = None) -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tmp = tempfile.mkdtemp(prefix="hydra-startup-")
    # an installed package has its bytecode: the unmeasured first run writes it
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    rows = []  # (label, script, env)
    trees = [("hydra", root)] + ([(f"hydra ({against})", os.path.abspath(against))]
                                 if against else [])
    for cache, threads in ((True, 1), (True, None), (False, 1)):
        for label, tree in trees:
            script = os.path.join(tmp, f"hydra_{len(rows)}.py")
            with open(script, "w") as f:
                f.write(_HYDRA.format(threads=threads, cache=cache))
            env = dict(base, PYTHONPATH=tree,
                       HYDRA_CACHE_DIR=os.path.join(tmp, f"cache{len(rows)}"), HYDRA_QUIET="1")
            rows.append((f"{label} cache={cache}, threads={threads or 'all'}", script, env))
    for cache in (True, False):
        for label, tree in trees:
            script = os.path.join(tmp, f"hydra_{len(rows)}.py")
            with open(script, "w") as f:
                f.write(_ARRAYS.format(cache=cache, examples=os.path.join(tree, "examples")))
            env = dict(base, PYTHONPATH=tree,
                       HYDRA_CACHE_DIR=os.path.join(tmp, f"cache{len(rows)}"), HYDRA_QUIET="1")
            rows.append((f"{label} digits step cache={cache}", script, env))
    script = os.path.join(tmp, "numba_peer.py")
    with open(script, "w") as f:
        f.write(_NUMBA)
    rows.append(("numba @njit(cache=True)", script,
                 dict(base, NUMBA_CACHE_DIR=os.path.join(tmp, "numba"))))
    sums = {label: _once(script, env)[2] for label, script, env in rows}  # fill the caches
    for digits in (False, True):  # each workload's rows agree
        if len({v for label, v in sums.items() if ("digits" in label) == digits}) != 1:
            raise SystemExit(f"bench startup: the results differ: {sums}")
    times: dict[str, list] = {label: [] for label, _, _ in rows}
    for _ in range(repeat):
        for label, script, env in rows:
            times[label].append(_once(script, env))
    print(f"# start-up with a filled disk cache, {repeat} fresh processes per row, "
          f"interleaved; load {os.getloadavg()[0]:.2f}")
    print(f"{'row':46} {'to result s':>11} {'best':>6} {'process s':>10} {'best':>6}  imports")
    for label, _, _ in rows:
        ts = times[label]
        inside, wall = [t[0] for t in ts], [t[1] for t in ts]
        imported = ", ".join(m for m, on in (("numba", ts[-1][3]), ("scipy", ts[-1][4]))
                             if on) or "-"
        print(f"{label:46} {statistics.median(inside):11.3f} {min(inside):6.3f} "
              f"{statistics.median(wall):10.3f} {min(wall):6.3f}  {imported}", flush=True)
