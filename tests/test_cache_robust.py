"""The cpu backend's disk cache: damaged entries are misses and are rebuilt, an unwritable
directory runs uncached with one warning (the cache must never be a reason for a kernel
to fail)."""

import os
import shutil
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import hydra
from hydra.backends.machinecode import diskcache

SCRIPT = textwrap.dedent("""
    import sys, warnings
    import numpy as np, hydra
    def f(x, out):
        out[hydra.lane()] = x * 2.0 + 1.0
    k = hydra.compile(f, varying=("x",), cache=True)
    out = np.zeros(100)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        k(np.arange(100.0), out)
    from hydra.backends.machinecode import functions
    print(out.sum(), int(not functions.BUILT), len(caught))
""")


def run(cache: str) -> list[str]:
    """Run the kernel in a new process (hydra reads its source: from a file)."""
    script = os.path.join(os.path.dirname(cache), "kernel_script.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    env = dict(os.environ, HYDRA_CACHE_DIR=cache)
    done = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """A cache directory after one process ran the kernel."""
    path = tmp_path_factory.mktemp("filled") / "cache"
    assert run(str(path)) == ["10000.0", "0", "0"]
    return path


def damage(path, how: str) -> None:
    data = path.read_bytes()
    path.write_bytes({"truncated": data[:len(data) // 2], "garbage": os.urandom(len(data)),
                      "empty": b""}[how])


@pytest.mark.parametrize("how", ["truncated", "garbage", "empty"])
def test_a_damaged_object_file_is_a_miss_and_is_rebuilt(filled, tmp_path, how):
    cache = tmp_path / "cache"
    shutil.copytree(filled, cache)
    files = list(cache.glob("hydra_*.o"))
    assert len(files) == 1
    whole = files[0].read_bytes()
    damage(files[0], how)
    assert run(str(cache)) == ["10000.0", "0", "0"]  # compiled again, no warning
    assert files[0].read_bytes() == whole  # and stored whole
    assert run(str(cache)) == ["10000.0", "1", "0"]  # a hit again


def test_an_object_file_for_another_cpu_is_not_loaded(filled, tmp_path):
    """The file name holds the target (CPU name and features): code for another CPU
    (here: numba's CPU override) is a miss, kept beside the first."""
    cache = tmp_path / "cache"
    shutil.copytree(filled, cache)
    script = cache.parent / "kernel_script.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, HYDRA_CACHE_DIR=str(cache), NUMBA_CPU_NAME="x86-64",
               NUMBA_CPU_FEATURES="")
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["10000.0", "0", "0"]
    assert len(list(cache.glob("hydra_*.o"))) == 2


def test_an_unwritable_cache_directory_runs_uncached_with_one_warning(tmp_path, monkeypatch):
    # tests run as root, which writes through any mode bits: a directory under a regular
    # file can be created by nobody
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("HYDRA_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setattr(diskcache, "_warned", False)

    def g(x, out):
        out[hydra.lane()] = x + 3.0

    def h(x, out):
        out[hydra.lane()] = x - 3.0
    out = np.zeros(5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hydra.compile(g, varying=("x",), backend="cpu", cache=True)(np.arange(5.0), out)
        np.testing.assert_array_equal(out, np.arange(5.0) + 3)
        hydra.compile(h, varying=("x",), backend="cpu", cache=True)(np.arange(5.0), out)
        np.testing.assert_array_equal(out, np.arange(5.0) - 3)
    assert [str(w.message) for w in caught] == [
        f"hydra: the disk cache at {blocker / 'cache'} cannot be written "
        f"([Errno 20] Not a directory: '{blocker / 'cache'}'); kernels run uncached "
        f"(set HYDRA_CACHE_DIR to a writable directory)"]
    assert caught[0].category is diskcache.HydraCacheWarning


def test_a_cache_that_fails_to_save_warns_and_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("HYDRA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(diskcache, "_warned", False)

    def refuse(path, data):
        raise PermissionError(13, "Permission denied", "index")
    monkeypatch.setattr(diskcache, "write_atomic", refuse)

    def g2(x, out):
        out[hydra.lane()] = x * 7.0
    out = np.zeros(5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hydra.compile(g2, varying=("x",), backend="cpu", cache=True)(np.arange(5.0), out)
    np.testing.assert_array_equal(out, np.arange(5.0) * 7)
    assert len(caught) == 1 and "[Errno 13] Permission denied: 'index'" in str(caught[0].message)


def test_a_driver_module_loads_from_its_file_or_uncached_with_one_warning(tmp_path,
                                                                           monkeypatch):
    """The cuda backend's driver modules (``diskcache.load_module``): from a source file
    under the cache directory, registered in ``sys.modules`` (numba's cache needs both);
    where the directory cannot be written, made without a file, with the one warning."""
    source = "def g():\n    return 3\n"
    monkeypatch.setenv("HYDRA_CACHE_DIR", str(tmp_path))
    mod = diskcache.load_module("hydra_test_driver", source)
    monkeypatch.delitem(sys.modules, "hydra_test_driver")
    assert mod.g() == 3 and mod.__file__ == str(tmp_path / "hydra_test_driver.py")
    assert (tmp_path / "hydra_test_driver.py").read_text() == source
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("HYDRA_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setattr(diskcache, "_warned", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mod = diskcache.load_module("hydra_test_driver2", source)
    assert mod.g() == 3 and not hasattr(mod, "__file__")
    assert "hydra_test_driver2" not in sys.modules
    assert len(caught) == 1 and caught[0].category is diskcache.HydraCacheWarning


def test_processes_racing_on_one_entry_each_get_a_whole_file(tmp_path):
    """Three processes compile the same kernel into an empty cache at once: each writes
    its object file under a temporary name and renames it into place, so all three run
    and the entry left behind is whole (the next process loads it)."""
    cache = tmp_path / "cache"
    script = tmp_path / "kernel_script.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, HYDRA_CACHE_DIR=str(cache))
    procs = [subprocess.Popen([sys.executable, str(script)], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(3)]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        assert out.split()[0::2] == ["10000.0", "0"]  # right, and no warning
    assert [f.name for f in cache.iterdir() if f.name.endswith(".tmp")] == []
    assert run(str(cache)) == ["10000.0", "1", "0"]
