"""hydra inside processes: Ctrl-C stops a running kernel (SPEC section 6), and worker
processes started after a parallel kernel run kernels too.  Each test runs a script in
a fresh interpreter (signals and fork concern the whole process)."""

import os
import subprocess
import sys
import textwrap

import pytest

from conftest import BACKENDS, CUDA_ON_GPU, child_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_script(tmp_path, source: str, timeout: float = 120.0, args=()) -> str:
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(source))
    env = child_env(ROOT, HYDRA_QUIET="1")
    done = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


# --- worker processes after a parallel kernel -------------------------------------------

WORKERS = """
import multiprocessing as mp
import sys

import numpy as np

import hydra
from hydra import lane


def double(x, out):
    out[lane()] = x * 2.0


def work(n):
    out = np.zeros(n)
    hydra.compile(double, varying="x", backend="cpu", threads=2)(np.ones(n), out)
    return float(out.sum())


if __name__ == "__main__":
    assert work(8192) == 16384.0  # a parallel run in the parent first
    ctx = mp.get_context(sys.argv[1])
    with ctx.Pool(1) as pool:
        print(pool.apply_async(work, (8192,)).get(timeout=60))
"""


@pytest.mark.skipif("cpu" not in BACKENDS, reason="the cpu backend is not available")
@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_worker_processes_after_a_parallel_kernel(tmp_path, method):
    """Workers started after a parallel kernel run kernels, ``fork`` included: the cpu
    driver's threads are hydra's own pool (a forked child makes its own), not GNU
    OpenMP's team, which would end a forked child (docs/guide.md, section 7)."""
    assert run_script(tmp_path, WORKERS, args=[method]).split() == ["16384.0"]


# --- Ctrl-C -------------------------------------------------------------------------------

CTRL_C = """
import os
import signal
import sys
import threading
import time

import numpy as np

import hydra


def spin(x):
    i = 0
    while x >= 0.0:  # never ends
        i += 1
    return i


def double(x):
    return x * 2.0


backend, lanes = sys.argv[1], int(sys.argv[2])
k = hydra.compile(spin, varying="x", backend=backend)
x = np.ones(lanes)
k(-x)  # compiled and run once (no iteration) before the clock starts
threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
start = time.perf_counter()
try:
    k(x)
    print("returned")
except KeyboardInterrupt:
    print("KeyboardInterrupt", time.perf_counter() - start - 0.5)
assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
print(hydra.compile(double, varying="x", backend=backend)(x)[-1])
"""


def ctrl_c_cases():
    for backend in BACKENDS:
        if backend == "cpu":  # one gang on the calling thread; many on all threads
            yield backend, 8
            yield backend, 8192
        elif backend == "cuda" and CUDA_ON_GPU:
            yield pytest.param(backend, 8, marks=pytest.mark.skip(
                reason="a running kernel on a GPU cannot be interrupted (guide, section 6)"))
        else:
            yield backend, 8


@pytest.mark.parametrize("backend, lanes", list(ctrl_c_cases()))
def test_ctrl_c_stops_an_endless_kernel(tmp_path, backend, lanes):
    # before the stop word, the cpu backend's kernel ran on until this timeout
    out = run_script(tmp_path, CTRL_C, timeout=60, args=[backend, str(lanes)]).split()
    assert out[0] == "KeyboardInterrupt", out
    assert float(out[1]) < 1.5, f"stopped {out[1]} s after SIGINT"  # SPEC: about 1 s
    assert out[2] == "2.0"  # the process still runs kernels


def straight(x):
    return x * 2.0


@pytest.mark.skipif("cpu" not in BACKENDS, reason="the cpu backend is not available")
def test_only_kernels_with_loops_install_the_handler():
    """Installing the SIGINT handler costs microseconds a run: loop-free kernels (over
    fewer than ``INTERRUPTIBLE_GANGS`` gangs) end too soon to need it."""
    import numpy as np

    import hydra
    from hydra.backends.cpu.phases import Phase

    def drivers(fn):
        k = hydra.compile(fn, varying="x", backend="cpu")
        k(np.ones(8))
        plan = next(iter(k._cache.values()))[1].__self__
        return [s.driver.loops for s in plan.steps if isinstance(s, Phase)]
    assert drivers(straight) == [False]
    assert drivers(spin_briefly) == [True]


def spin_briefly(x):
    while x < 3.0:
        x += 1.0
    return x
