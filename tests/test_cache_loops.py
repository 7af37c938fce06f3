"""The fused loops of per-lane array chains in the disk cache (``cache=True``,
hydra/backends/machinecode/loops.py): a new process loads them without compiling and
without importing numba; damaged entries and entries for another CPU are misses that are
rebuilt; racing processes are safe; loops that differ only in the arguments' strides or
dtypes get entries of their own."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hydra
from hydra.backends.machinecode import loops

# a fused chain (maximum of an affine map), an np.stack of per-lane views (one generated
# copy loop) and two small per-lane products (a rows loop, and a dots loop compiled with
# reassociation: integer-valued floats, so every order gives the same bits): four loops,
# no native phase
SCRIPT = textwrap.dedent("""
    import sys, json, warnings
    import numpy as np, hydra

    W = np.arange(8, dtype=np.float32).reshape(2, 4) - 3.0

    def f(x, b):
        y = np.maximum(x * 2.0 + b, 0.0)
        s = np.stack((x[0:2], x[1:3], x[2:4]))
        return y, s, W @ x, x @ x.T

    x = np.arange(60, dtype=np.float32).reshape(5, 4, 3) - 20.0
    b = np.linspace(-1, 1, 3).astype(np.float32)
    k = hydra.compile(f, varying=("x",), backend="cpu", cache=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = k(x, b)
    from hydra.backends.machinecode import loops
    right = all(np.array_equal(got, np.stack([f(r, b)[j] for r in x]))
                for j, got in enumerate(out))
    print(json.dumps([right, len(loops.BUILT), "numba" in sys.modules, len(caught)]))
""")
FILLED = [True, 4, True, 0]  # right, four loops built, numba imported, no warning
HIT = [True, 0, False, 0]  # right, nothing built, numba not imported


def run(cache, **env) -> list:
    script = os.path.join(os.path.dirname(cache), "loops_script.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    done = subprocess.run([sys.executable, script], capture_output=True, text=True,
                          env=dict(os.environ, HYDRA_CACHE_DIR=str(cache), **env))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    path = tmp_path_factory.mktemp("loops") / "cache"
    assert run(path) == FILLED
    return path


def loop_files(cache):
    return sorted(cache.glob("hydra_loop_*.o"))


def test_a_cached_kernel_with_chains_loads_its_loops_without_numba(filled, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(filled, cache)
    assert len(loop_files(cache)) == 4
    assert run(cache) == HIT


@pytest.mark.parametrize("how", ["truncated", "garbage", "empty"])
def test_a_damaged_loop_entry_is_a_miss_and_is_rebuilt(filled, tmp_path, how):
    cache = tmp_path / "cache"
    shutil.copytree(filled, cache)
    files = loop_files(cache)
    whole = [f.read_bytes() for f in files]
    for f, data in zip(files, whole):
        f.write_bytes({"truncated": data[:len(data) // 2], "garbage": os.urandom(len(data)),
                       "empty": b""}[how])
    assert run(cache) == FILLED  # rebuilt, silently
    assert [f.read_bytes() for f in files] == whole  # and stored whole
    assert run(cache) == HIT


def test_a_loop_entry_for_another_cpu_is_not_loaded(filled, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(filled, cache)
    other = dict(NUMBA_CPU_NAME="x86-64", NUMBA_CPU_FEATURES="")
    assert run(cache, **other) == FILLED
    assert len(loop_files(cache)) == 8  # beside the first CPU's
    assert run(cache, **other) == HIT
    assert run(cache) == HIT


def test_processes_racing_on_loop_entries(tmp_path):
    cache = tmp_path / "cache"
    script = tmp_path / "loops_script.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, HYDRA_CACHE_DIR=str(cache))
    procs = [subprocess.Popen([sys.executable, str(script)], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(3)]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        right, built, _, warned = json.loads(out.splitlines()[-1])
        # right, no warning; a process may load what a faster one stored
        assert right and built <= 4 and not warned
    assert [f.name for f in cache.iterdir() if f.name.endswith(".tmp")] == []
    assert run(cache) == HIT


def chain(x, b):
    return np.maximum(x * 2.0 + b, 0.0) - x


def test_strides_and_dtypes_get_entries_of_their_own(tmp_path, monkeypatch):
    """The same chain on a contiguous array, on a transposed view (the loop is
    specialized on the per-lane strides) and on float64 data: three entries, each
    result right; the same call again adds none."""
    monkeypatch.setenv("HYDRA_CACHE_DIR", str(tmp_path))
    k = hydra.compile(chain, varying=("x",), backend="cpu", cache=True)
    base = np.random.default_rng(5).standard_normal((6, 4, 5))
    b = np.float32(0.25)
    counts = []
    for x in (base.astype(np.float32),
              np.ascontiguousarray(base.transpose(0, 2, 1)).astype(np.float32)
              .transpose(0, 2, 1),
              base):
        got = k(x, b)
        np.testing.assert_array_equal(got, np.stack([chain(r, b) for r in x]))
        counts.append(len(loop_files(tmp_path)))
    assert counts == [1, 2, 3]
    k(base.astype(np.float32), b)
    assert len(loop_files(tmp_path)) == 3


def test_keys_name_the_signature():
    loop = loops.Loop("def fused(n, o0, a0):\n    pass\n")
    sigs = [loops.signature(a) for a in (
        (5, np.zeros((5, 3), np.float32), np.zeros((5, 3), np.float32)),
        (5, np.zeros((5, 3), np.float32), np.zeros((5, 3), np.float64)),
        (5, np.zeros((5, 3), np.float32), np.zeros((5, 3, 1), np.float32)),
        (5, np.zeros((5, 3), np.float32), np.float32(1)))]
    assert sigs[0] == (("s", "<i8"), ("a", "<f4", 2), ("a", "<f4", 2))
    assert len({loop.key(s) for s in sigs}) == 4
    assert loop.key(sigs[0]) != loops.Loop("def fused(n, o0, a0):\n    return\n"
                                                 ).key(sigs[0])


def test_a_loop_that_needs_numba_at_run_time_runs_but_is_not_stored(tmp_path, monkeypatch):
    """A generated loop that calls one of numba's C helpers (here: its random state)
    could not be loaded by a process without numba: it runs, and only the loop that
    calls nothing but the process's own functions is stored."""
    monkeypatch.setenv("HYDRA_CACHE_DIR", str(tmp_path))
    token = loops.CACHE.set(True)
    try:
        out = np.zeros(50)
        loops.Loop("def fused(n, o0):\n    for i in range(n):\n"
                         "        _st(o0, i, np.random.random())\n")(50, out)
        assert 0 < out.min() and out.max() < 1 and len(set(out)) == 50
        assert loop_files(tmp_path) == []
        loops.Loop("def fused(n, o0):\n    for i in range(n):\n"
                         "        _st(o0, i, np.float64(i) * 2.0)\n")(50, out)
        np.testing.assert_array_equal(out, np.arange(50) * 2.0)
        assert len(loop_files(tmp_path)) == 1
    finally:
        loops.CACHE.reset(token)
