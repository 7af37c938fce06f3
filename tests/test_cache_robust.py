"""The cpu backend's disk cache: damaged entries are misses, an unwritable directory runs
uncached with one warning (the cache must never be a reason for a kernel to fail)."""

import os
import shutil
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import hydra
from hydra.backends import diskcache

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
    mod = next(m for n, m in sys.modules.items() if n.startswith("hydra_driver_"))
    print(out.sum(), sum(mod.serial.stats.cache_hits.values()), len(caught))
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
@pytest.mark.parametrize("which", ["*.nbi", "*.nbc", "hydra_driver_*.py"])
def test_a_damaged_cache_file_is_a_miss_and_is_rebuilt(filled, tmp_path, which, how):
    cache = tmp_path / "cache"
    shutil.copytree(filled, cache)
    files = list(cache.rglob(which))
    assert len(files) == 1
    damage(files[0], how)
    total, hits, warned = run(str(cache))
    assert (total, warned) == ("10000.0", "0")
    # a damaged index or data file is a miss; a damaged driver source is rewritten
    # (numba's index may still serve it: its entries are keyed by the code they hold)
    assert hits in (("0", "1") if which.endswith(".py") else ("0",))
    assert run(str(cache)) == ["10000.0", "1", "0"]  # the entry is whole again
    assert files[0].read_bytes() != b""


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

    def refuse(self, *args):
        raise PermissionError(13, "Permission denied", "index")
    monkeypatch.setattr(diskcache.IndexDataCacheFile, "save", refuse)

    def g2(x, out):
        out[hydra.lane()] = x * 7.0
    out = np.zeros(5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hydra.compile(g2, varying=("x",), backend="cpu", cache=True)(np.arange(5.0), out)
    np.testing.assert_array_equal(out, np.arange(5.0) * 7)
    assert len(caught) == 1 and "[Errno 13] Permission denied: 'index'" in str(caught[0].message)
