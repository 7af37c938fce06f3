"""The machine-code package's thread safety (``hydra/backends/machinecode``): one build
per key per process, and threads that run one native phase first wait for its one
driver and its one build (``cpu/phases.Plan.drivers``, ``cpu/driver.Driver.build``)."""

import ctypes
import threading
import time

import numpy as np
import pytest

import hydra
from hydra import lane
from hydra.backends import available
from hydra.backends.cpu import phases
from hydra.backends.machinecode import engine, functions

pytestmark = pytest.mark.skipif(not available("cpu"), reason="no cpu backend")


def scaled(x, k, out):
    out[lane()] = x * k + 0.25


def _slow(monkeypatch, module, name, calls):
    """``module.name`` counting its calls and slow enough that racing threads meet."""
    real = getattr(module, name)

    def slow(*args, **kwargs):
        calls.append(threading.current_thread().name)
        time.sleep(0.2)
        return real(*args, **kwargs)
    monkeypatch.setattr(module, name, slow)


def _together(fn, n=2) -> list:
    """Run ``fn(i)`` on ``n`` threads that start at once; their results (or errors)."""
    start = threading.Barrier(n)
    out: list = [None] * n

    def go(i):
        start.wait()
        try:
            out[i] = fn(i)
        except Exception as e:  # noqa: BLE001  (reported by the caller's assert)
            out[i] = e
    threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_two_threads_running_one_native_phase_first_build_it_once(monkeypatch):
    k = hydra.compile(scaled, varying="x", backend="cpu", threads=1)
    x = np.linspace(0.0, 1.0, 1000)
    _, types = k.signature([x, 0.5, np.zeros_like(x)])
    _, runner = k.specialize(types)  # compiled, its phase not built yet
    made: list = []
    calls: list = []
    _slow(monkeypatch, phases, "Driver", made)
    _slow(monkeypatch, functions, "load", calls)

    def run(i):
        out = np.zeros_like(x)
        runner([x, 0.5, out], len(x))
        return out
    outs = _together(run)
    for out in outs:
        assert not isinstance(out, Exception), out
        np.testing.assert_array_equal(out, x * 0.5 + 0.25)
    assert len(made) == 1  # one thread made the phase's driver,
    assert len(calls) == 1  # and built it; the other waited for both


def test_one_key_is_built_once_for_threads_that_ask_at_once(monkeypatch):
    text = """define void @hydra_test_race(ptr %p) {
  store i64 7, ptr %p
  ret void
}
"""
    builds: list = []

    def build():
        builds.append(1)
        time.sleep(0.2)
        mod = engine.kernel_module(text, [], "hydra_test_race")
        return engine.target()[0].emit_object(engine.optimize(mod)), True
    key = f"test_race_{time.time_ns()}"  # fresh in this process
    fns = _together(lambda i: engine.load_native(key, "hydra_test_race", [ctypes.c_void_p],
                                                 build, False))
    assert builds == [1]
    assert fns[0] is fns[1]
    word = np.zeros(1, np.int64)
    fns[0](word.ctypes.data)
    assert word[0] == 7
