"""The GPU benchmark's hand-written numba.cuda kernels (bench/gpu.py): on the simulator
they give the workloads' results at a small size, and numba-cuda types and lowers them
for a real GPU (as test_cuda_typing does for hydra's kernels), so that a session with a
GPU only has to run ``python -m bench --gpu``."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from hydra.backends import available
from conftest import child_env

pytestmark = pytest.mark.skipif(not available("cuda"), reason="numba.cuda unusable here")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

WORKLOADS = ["mandelbrot", "collatz", "black-scholes", "aobench", "mc-pi"]


@pytest.mark.parametrize("name", WORKLOADS)
def test_hand_written_kernel_gives_the_workload_result(name):
    from bench.gpu import implementations, scaled
    from bench.run import _agree, _module
    mod = _module(name)
    calls = dict(implementations(mod, 0.0003, 1))
    manual = calls["numba.cuda by hand"]()
    assert _agree(manual, calls["hydra cuda"]())
    args, lanes = scaled(mod, 0.0003)
    if lanes is None:  # lane-local: the numba scalar loop over the same elements
        assert _agree(manual, mod.numba_scalar(*args))
    assert np.asarray(manual).size > 0


CHILD = textwrap.dedent('''
    import sys, types
    from numba import types as nt
    from numba.cuda import compiler, dispatcher
    # device functions are compiled for "the current device": there is none here
    dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=(8, 0))
    import bench.gpu as gpu
    from bench.run import _module
    A = lambda t: nt.Array(t, 1, "C")
    SIGS = {
        "mandelbrot": (A(nt.float32), A(nt.float32), nt.int32, A(nt.int32)),
        "collatz": (A(nt.int64), A(nt.int64)),
        "black-scholes": (A(nt.float64),) * 4 + (nt.float64, A(nt.float64)),
        "aobench": (A(nt.int64), A(nt.int64), nt.int64, nt.int64, nt.int64, A(nt.float64)),
        "mc-pi": (nt.int64, nt.int64, A(nt.int64)),
    }
    kernels = []
    jit = gpu.cuda.jit

    def spy(*args, **kw):  # keep each kernel's Python function
        if args and callable(args[0]) and not kw:
            kernels.append(args[0])
        return jit(*args, **kw)
    gpu.cuda.jit = spy
    failures = []
    for name, sig in SIGS.items():
        kernels.clear()
        gpu.hand_written(_module(name), 10)
        try:
            compiler.compile_cuda(kernels[-1], nt.void, sig, cc=(8, 0))
        except Exception as e:
            failures.append(f"{name}: {type(e).__name__}: {str(e)[:600]}")
    print("\\n".join(failures))
    sys.exit(1 if failures else 0)
''')


def test_hand_written_kernels_type_and_lower_for_the_cuda_target():
    env = child_env(ROOT, NUMBA_ENABLE_CUDASIM="0")
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0 and "compile_cuda" in done.stderr:
        pytest.skip(f"numba-cuda cannot compile here: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
