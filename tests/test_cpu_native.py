"""The cpu backend's machine code without numba (``hydra/backends/machinecode``): the
same machine code as numba's JIT, a cached kernel in a fresh process that compiles
nothing and imports no numba, and ``import hydra`` without numba."""

import json
import os
import subprocess
import sys

import llvmlite.binding as llvm
import numpy as np
import pytest

import hydra
from hydra.backends.cpu import backend
from hydra.backends.machinecode import engine

HERE = os.path.dirname(__file__)


def fresh(mode: str, cache) -> dict:
    env = dict(os.environ, HYDRA_CACHE_DIR=str(cache))
    done = subprocess.run([sys.executable, os.path.join(HERE, "native_kernels.py"), mode],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_cached_kernel_in_a_fresh_process_gives_the_compiled_results(tmp_path):
    """Scalars (float, int, bool, uint32), per-lane buffers, a strided 2-D array, a
    loop on one thread and on two, and an index error naming its lane and line: the
    process that compiles, the one that loads the object files and the reference agree."""
    first = fresh("cached", tmp_path)
    second = fresh("cached", tmp_path)
    reference = fresh("reference", tmp_path)
    assert first["built"] == 4 and second["built"] == 0  # the second compiled nothing
    assert not second["numba"] and not second["scipy"]
    assert first["results"] == second["results"]
    # the reference's line numbers are its own file's too
    assert second["results"] == reference["results"]
    assert "(lane 4990)" in second["results"]["bad_index/2"]
    assert "native_kernels.py:46" in second["results"]["bad_index/2"]


def test_import_hydra_imports_no_numba():
    script = ("import sys, hydra\n"
              "print(sorted(m for m in ('numba', 'scipy', 'llvmlite') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def _text(obj: bytes) -> bytes:
    return b"".join(s.data() for s in llvm.ObjectFileRef.from_data(obj).sections()
                    if s.is_text())


def mandel(c_re, c_im):
    z_re, z_im = c_re, c_im
    i = 0
    while i < 50 and z_re * z_re + z_im * z_im <= 4.0:
        z_re, z_im = z_re * z_re - z_im * z_im + c_re, 2.0 * z_re * z_im + c_im
        i += 1
    return i


def price(s, k, t):
    d = (np.log(s / k) + 0.5 * t) / np.sqrt(t)
    return s * (0.5 + 0.5 * np.tanh(d / np.sqrt(2.0))) - k * np.exp(-0.05 * t)


@pytest.mark.parametrize("fn, args", [
    (mandel, (np.linspace(-2, 1, 64), np.linspace(-1, 1, 64))),
    (price, (np.linspace(10, 20, 64), np.linspace(12, 14, 64), np.linspace(0.5, 2, 64))),
])
def test_the_machine_code_is_numbas(fn, args, monkeypatch):
    """hydra's pipeline makes, byte for byte, the code numba's JIT makes of the same
    module: dropping numba's driver changed no kernel's speed."""
    from numba.core import compiler_lock
    from numba.core.registry import cpu_target
    seen = []

    def both(phase):
        mod = [phase.text, sorted(phase.gen.b.modules), phase.gen.name]
        with compiler_lock.global_compiler_lock:
            lib = cpu_target.target_context.codegen().create_library("reference")
            lib.enable_object_caching()
            lib.add_llvm_module(engine.kernel_module(*mod))
            lib.finalize()
            theirs = lib._get_compiled_object()
        ours = engine.target()[0].emit_object(engine.optimize(engine.kernel_module(*mod)))
        seen.append(len(_text(ours)))
        assert _text(ours) == _text(theirs)
        return ""
    monkeypatch.setattr(backend, "asm", both)
    names = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    hydra.compile(fn, varying=names, backend="cpu").dump_ir("asm", *args)
    assert seen and min(seen) > 100
