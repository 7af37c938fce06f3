"""The generated kernels compiled for a real GPU, without one: numba-cuda types
and lowers each kernel to LLVM IR for the CUDA target (``compile_cuda``; only the
last step, NVVM to PTX, needs the CUDA toolkit).  The simulator runs kernels as
Python and so forgives what numba would reject (a NumPy ufunc numba-cuda lacks, a
variable whose type changes); this catches those here, on a machine without a GPU.

The kernels are generated in this (simulator) process and compiled in a child
process with the simulator off."""

import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hydra
from hydra.backends import available

pytestmark = pytest.mark.skipif(not available("cuda"), reason="numba.cuda unusable here")

sys.path.insert(0, os.path.dirname(__file__))
import test_cuda_runtime as runtime  # noqa: E402
import test_cuda_semantics as semantics  # noqa: E402

CHILD = textwrap.dedent('''
    import json, sys, types, os
    import hydra
    # the backend package refuses to import without a GPU or the simulator; its
    # modules are all this needs
    pkg = types.ModuleType("hydra.backends.cuda")
    pkg.__path__ = [os.path.join(os.path.dirname(hydra.__file__), "backends", "cuda")]
    sys.modules["hydra.backends.cuda"] = pkg
    from numba import types as nt
    from numba.cuda import compiler, dispatcher
    # device functions are compiled for "the current device": there is none here
    dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=(8, 0))
    from hydra.backends.cuda.backend import signature
    from hydra.types import ArrayType, ScalarType

    def hydra_type(t):
        return ScalarType(t[0]) if t[1] is None else ArrayType(ScalarType(t[0]), t[1])

    failures = []
    for source, entry, params, outs in json.load(open(sys.argv[1])):
        sig = signature([(hydra_type(t), v) for t, v in params], [hydra_type(t) for t in outs])
        namespace = {}
        exec(compile(source, entry, "exec"), namespace)
        try:
            compiler.compile_cuda(namespace[entry], nt.void, sig, cc=(8, 0))
        except Exception as e:
            failures.append(f"{entry}: {type(e).__name__}: {str(e)[:600]}")
    print(json.dumps(failures))
''')

CASES = [
    (semantics.wrap32, (np.arange(3, dtype=np.int32), np.int32(5)), ("x",)),
    (semantics.shifts, (np.arange(3), np.arange(3)), ("x", "s")),
    (semantics.powers, (np.arange(3), np.arange(3)), ("x", "e")),
    (semantics.divisions, (np.arange(3), np.arange(1, 4), np.arange(3.0)), ("x", "y", "f")),
    (semantics.casts, (np.arange(3.0),), ("f",)),
    (semantics.unsigned_casts, (np.arange(3.0),), ("f",)),
    (semantics.minmax, (np.arange(3.0), np.arange(3.0)), ("a", "b")),
    (semantics.domains, (np.arange(3.0),), ("x",)),
    (semantics.booleans, (np.arange(3), np.arange(3)), ("x", "y")),
    (runtime.scaled, (np.arange(3.0), np.zeros(3), 1.0), ("x",)),
    (runtime.ranked, (np.arange(3),), ("x",)),
    (runtime.varying_sync, (np.arange(3), np.zeros(5, np.int64)), ("x",)),
    (runtime.heavy, (np.arange(3), np.arange(4.0)), ("x",)),
    (runtime.rounds, (np.arange(3), 3), ("x",)),
    (runtime.sized, (np.arange(3.0), 4), ("x",)),
    (runtime.looped, (np.arange(3), np.zeros(3, np.int64)), ("x",)),
    (runtime.lookup, (np.arange(3),), ("x",)),
]


def local_arrays(x):
    buf = np.zeros(3, np.float32)
    flags = np.zeros(2, np.bool_)
    for i in range(3):
        buf[i] = np.float32(x) * i
    flags[1] = buf[2] > 1
    return buf[2] + math.floor(x), flags[1]


CASES.append((local_arrays, (np.arange(3.0),), ("x",)))


def random_draws(seed, i):
    """hydra.random's uint64 Philox rounds, its exact log and cos, Lemire's loop, size=."""
    return (hydra.random.normal(seed, i), hydra.random.integers(seed, i, 0, 7),
            hydra.random.uniform(seed, i, np.float32, size=2))


CASES.append((random_draws, (5, np.arange(3)), ("i",)))


def _type(t):
    from hydra.types import ArrayType
    return [t.dtype.name, t.ndim] if isinstance(t, ArrayType) else [t.name, None]


def _kernels(fn, args, varying):
    from hydra.backends.cuda.backend import choose, kernels
    from hydra.frontend import build_function
    from hydra.passes import run_pipeline
    kern = hydra.compile(fn, varying=varying, backend="cuda")
    _, types = kern.signature(args)

    def build(linearized):
        return run_pipeline(build_function(kern.pyfunc, list(types)), set(varying),
                            linearized=linearized)
    choice = choose(build(True), lambda: build(False), {})
    return [(src, entry, [(_type(t), bool(v)) for t, v in params], [_type(t) for t in outs])
            for src, entry, params, outs in kernels(choice)]


def typed_in_a_child(tmp_path, cases: list, child: str = CHILD) -> list[str]:
    """The failures of ``child`` (a program typing and lowering the kernel ``cases`` for
    the CUDA target) run with the simulator off; skips where numba-cuda cannot compile
    at all."""
    path = tmp_path / "kernels.json"
    path.write_text(json.dumps(cases))
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
    done = subprocess.run([sys.executable, "-c", child, str(path)], env=env,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0 and "compile_cuda" in done.stderr:
        pytest.skip(f"numba-cuda cannot compile here: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_generated_kernels_type_and_lower_for_the_cuda_target(tmp_path):
    found = [k for fn, args, varying in CASES for k in _kernels(fn, args, varying)]
    failures = typed_in_a_child(tmp_path, found)
    assert not failures, "\n".join(failures)
