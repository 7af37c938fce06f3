"""Generated loops built in the background (hydra/backends/machinecode/background.py): a
kernel's first call runs a fused chain's and an np.stack's ops with NumPy while their
loops build after the call; later calls use the loops; every call gives the same bits."""

import numpy as np
import pytest

import hydra
from hydra.backends.machinecode import background, loops
from hydra.executor import fuse


def chain(x, b):
    y = np.maximum(x * 3.0 - b, 0.25)
    return y, np.stack((x[0:2], x[1:3]))


def _fused_kernels(k, args):
    plan = k.specialize(k.signature(list(args))[1])[1].__self__
    (step,) = [s for s in plan.steps if isinstance(s, fuse.Fused)]
    return list(step._special.values()) or [step.kernel]


def test_first_call_runs_numpy_then_the_loop(monkeypatch):
    monkeypatch.setattr(background, "ENABLED", True)
    r = np.random.default_rng(0)
    x = r.standard_normal((37, 5, 3)).astype(np.float32)  # shapes no other test builds
    b = r.standard_normal(3).astype(np.float32)
    ref = hydra.compile(chain, varying="x", backend="numpy")(x, b)
    k = hydra.compile(chain, varying="x", backend="cpu")
    background.wait()  # other tests' builds
    built = len(loops.BUILT)
    first = k(x, b)
    assert len(loops.BUILT) == built  # nothing built during the call
    assert not any(loop._fns for loop in _fused_kernels(k, (x, b)))
    background.wait()
    assert len(loops.BUILT) >= built + 2  # the chain and the stack, after it
    assert all(loop._fns for loop in _fused_kernels(k, (x, b)))
    later = k(x, b)
    for got in (first, later):
        for g, w in zip(got, ref):
            assert g.tobytes() == w.tobytes()


def test_off_and_cached_kernels_build_in_the_call(monkeypatch, tmp_path):
    r = np.random.default_rng(1)
    x = r.standard_normal((23, 7, 2))
    b = r.standard_normal(2)
    monkeypatch.setattr(background, "ENABLED", False)
    k = hydra.compile(chain, varying="x", backend="cpu")
    k(x, b)
    assert all(loop._fns for loop in _fused_kernels(k, (x, b)))
    monkeypatch.setattr(background, "ENABLED", True)
    monkeypatch.setenv("HYDRA_CACHE_DIR", str(tmp_path))
    x2 = r.standard_normal((23, 7, 4))
    b2 = r.standard_normal(4)
    k2 = hydra.compile(chain, varying="x", backend="cpu", cache=True)
    k2(x2, b2)
    assert all(loop._fns for loop in _fused_kernels(k2, (x2, b2)))


def test_background_builds_leave_the_callers_streams_alone(monkeypatch):
    """Numba colours the error messages it builds while typing a loop through colorama,
    whose init()/deinit() swap sys.stdout for the whole process: from the build thread
    that undid the caller's redirect_stdout (pytest's capsys lost an example's output).
    Before its first build, the build thread makes numba's messages plain."""
    from numba.core import errors
    if not hasattr(errors, "ColorShell"):
        pytest.skip("numba colours no messages here (colorama is not installed)")
    calls = []
    for name in ("init", "reinit", "deinit"):
        monkeypatch.setattr(errors, name, lambda *a, name=name, **k: calls.append(name))
    saved = errors._termcolor_inst
    try:
        errors._termcolor_inst = None  # numba's own scheme, as at first use
        errors.termcolor().errmsg("x")
        assert "init" in calls  # the hazard: a global stream swap per message
        calls.clear()
        background.plain_numba_messages()
        assert errors.termcolor().errmsg("x") == "x" and not calls
    finally:
        errors._termcolor_inst = saved
        background.plain_numba_messages()  # as the build thread left it, if it runs


FORK_AND_EXIT = r"""
import os, signal, sys
import numpy as np
import hydra
from hydra.backends.machinecode import background, loops

def chain(x, b):
    return np.maximum(x * 3.0 - b, 0.25) + x * b

signal.alarm(120)  # a deadlock fails the test instead of hanging it
k = hydra.compile(chain, varying="x", backend="cpu")
r = np.random.default_rng(5)
x, b = r.standard_normal((19, 4, 3)), r.standard_normal(3)
first = k(x, b)  # its loops start building when it returns
pid = os.fork()  # between two builds: the parent's worker is held meanwhile
if pid == 0:
    signal.alarm(120)  # (a child inherits no alarm)
    again = k(x, b)
    background.wait()  # the child builds with a worker of its own
    last = k(x, b)
    same = again.tobytes() == first.tobytes() == last.tobytes()
    os._exit(0 if same and loops.BUILT else 3)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
k(r.standard_normal((19, 4, 5)), r.standard_normal(5))  # queues builds ...
print("exiting")  # ... and exits while they run: the one under way finishes first
"""


def test_fork_and_exit_between_builds(tmp_path):
    """A fork while a loop builds waits for that build; the child builds its own and
    gives the same bits; exiting with builds queued finishes the one under way (a daemon
    thread stopped inside LLVM at exit crashed the process once) and starts no other."""
    import pathlib
    import subprocess
    import sys

    from conftest import child_env
    root = pathlib.Path(__file__).resolve().parents[1]
    script = tmp_path / "fork_and_exit.py"
    script.write_text(FORK_AND_EXIT)
    env = child_env(root, HYDRA_CPU_BACKGROUND="1", HYDRA_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["child", "0", "exiting"]
