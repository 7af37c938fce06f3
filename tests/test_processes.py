"""hydra inside processes: Ctrl-C stops a running kernel (SPEC section 6), and worker
processes started after a parallel kernel run kernels too.  Each test runs a script in
a fresh interpreter (signals and fork concern the whole process)."""

import os
import subprocess
import sys
import textwrap

import pytest

from conftest import BACKENDS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_script(tmp_path, source: str, timeout: float = 120.0, args=()) -> str:
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(source))
    env = dict(os.environ, PYTHONPATH=ROOT, HYDRA_QUIET="1")
    done = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


# --- worker processes after a parallel kernel -------------------------------------------

WORKERS = """
import multiprocessing as mp
import sys

import numba
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
        print(pool.apply_async(work, (8192,)).get(timeout=60), numba.threading_layer())
"""


@pytest.mark.skipif("cpu" not in BACKENDS, reason="the cpu backend is not available")
@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_worker_processes_after_a_parallel_kernel(tmp_path, method):
    """The documented way (docs/guide.md, section 7): spawn or forkserver workers."""
    assert run_script(tmp_path, WORKERS, args=[method]).split()[0] == "16384.0"


@pytest.mark.skipif("cpu" not in BACKENDS, reason="the cpu backend is not available")
def test_fork_after_a_parallel_kernel_with_tbb(tmp_path):
    """With numba's tbb threading layer (``pip install tbb``) fork works too; GNU
    OpenMP's layer terminates a forked child ("fork() called from a process already
    using GNU OpenMP"), which the guide says."""
    try:
        from numba.np.ufunc import tbbpool  # noqa: F401
    except ImportError:
        pytest.skip("numba's tbb threading layer is not installed (pip install tbb)")
    assert run_script(tmp_path, WORKERS, args=["fork"]).split() == ["16384.0", "tbb"]
