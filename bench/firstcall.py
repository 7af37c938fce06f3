"""First calls: hydra's first call of a kernel (compile included) against Numba's.

    python -m bench firstcall [names...] [--repeat N] [--against DIR]

Each row is timed in its own fresh process, the rows interleaved, ``N`` processes each
(best and median): the first call of the workload's kernel with hydra's cpu backend on
one thread, on all cores, and with ``fastmath`` for the transcendental workloads, and
the first call of Numba's ``@njit`` scalar loop (``numba_scalar``).  Before the timed
call each process has imported numba and hydra and compiled and run one small kernel
with each, so the row times what a notebook user waits for on every edit: compiling a
new kernel in a warm process (numba's one-time start, about 0.3 s of registries and
SciPy, and hydra's imports are not in it).  ``--against DIR`` adds the hydra rows of
another checkout (its ``hydra`` package in DIR).  Printed: the wall time (median, best)
and the calling thread's CPU time (median, best), which a loaded machine disturbs far
less; the compile runs on the calling thread, so on one thread the CPU time is the whole
first call.  ``bench/run.py``'s "1st call s" column is the same first call inside the
main benchmark's one process.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

from .run import _module

_SCRIPT = '''
import sys, time
import numba, numpy as np
import hydra
from bench.{module} import kernel, numba_scalar, setup, VARYING
import bench.{module} as mod


@numba.njit
def warm_numba(x):
    return x * 2.0 + 1.0


def warm_hydra(x):
    return x * 2.0 + 1.0


warm_numba(np.ones(4))
hydra.compile(warm_hydra, varying="x", backend="cpu")(np.ones(4))
args = setup()
if "{row}" == "numba":
    t, c = time.perf_counter(), time.thread_time()
    numba_scalar(*args)
else:
    k = hydra.compile(kernel, lanes=getattr(mod, "LANES", None), varying=VARYING,
                      backend="cpu", threads={threads}, fastmath={fastmath})
    t, c = time.perf_counter(), time.thread_time()
    k(*args)
print(time.perf_counter() - t, time.thread_time() - c)
'''


def _rows(module: str, against: str | None):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    mod = _module(module)
    trees = [("hydra", root)] + ([(f"hydra ({against})", os.path.abspath(against))]
                                 if against else [])
    for fastmath in (False, True) if getattr(mod, "TRANSCENDENTAL", False) else (False,):
        for threads in (1, None):
            for label, tree in trees:
                name = (f"{label}{' fastmath' * fastmath}, "
                        f"{'1 thread' if threads == 1 else 'all threads'}")
                yield name, tree, dict(row="hydra", threads=threads, fastmath=fastmath)
    yield "numba @njit", root, dict(row="numba", threads=None, fastmath=False)


def run(names: list[str], repeat: int, against: str | None = None) -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    print(f"# first call (compile included) in a warm process; {repeat} fresh processes "
          f"per row, interleaved; load {os.getloadavg()[0]:.2f}")
    print(f"{'workload':14} {'implementation':44} {'median s':>9} {'best s':>7} "
          f"{'cpu med s':>9} {'best':>7}")
    for name in names:
        module = _module(name).__name__.split(".")[-1]
        rows = list(_rows(module, against))
        times: dict[str, list[tuple[float, float]]] = {label: [] for label, _, _ in rows}
        for _ in range(repeat):
            for label, tree, fmt in rows:
                env = dict(os.environ, PYTHONPATH=os.pathsep.join([tree, root]),
                           HYDRA_QUIET="1")
                with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
                    f.write(_SCRIPT.format(module=module, **fmt))  # hydra reads sources
                try:
                    done = subprocess.run([sys.executable, f.name], env=env,
                                          capture_output=True, text=True, cwd=root)
                finally:
                    os.unlink(f.name)
                if done.returncode:
                    raise SystemExit(f"bench firstcall: {label} failed:\n{done.stderr}")
                wall, cpu = done.stdout.split()[-2:]
                times[label].append((float(wall), float(cpu)))
        for label, _, _ in rows:
            walls, cpus = [t[0] for t in times[label]], [t[1] for t in times[label]]
            print(f"{_module(name).NAME:14} {label:44} {statistics.median(walls):9.3f} "
                  f"{min(walls):7.3f} {statistics.median(cpus):9.3f} {min(cpus):7.3f}",
                  flush=True)

