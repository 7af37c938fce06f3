"""Ctrl-C and submitted launches (SPEC sections 6 and 9, ``hydra.stop``): a Ctrl-C that
reaches a wait of hydra's on the main thread stops every running launch (its future
fails with ``KeyboardInterrupt``) and cancels those not started; the process stays
usable, and leaves at once and cleanly.  Each test runs a script in a fresh
interpreter (signals concern the whole process); before ``hydra.stop`` the endless
launch ran on, held its cores, and each script hung (at exit at the latest)."""

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import pytest

from conftest import BACKENDS, child_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PRELUDE = """
import sys, time
import numpy as np
import hydra
from hydra import dataflow


def spin(x):
    i = 0
    while x >= 0.0:  # never ends for x >= 0
        i += 1
    return i


def double(x):
    return x * 2.0


backend, threads, lanes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
k = hydra.compile(spin, varying="x", backend=backend, threads=threads)
d = hydra.compile(double, varying="x", backend=backend)
x = np.ones(lanes)
k(-x), d(x), d(k(-x))  # compiled before the clock starts
running = k.submit(x)
while not running.running():
    time.sleep(0.01)
time.sleep(0.2)  # well into the kernel (on the cpu pool's threads too)
"""

WAIT_FOR_RESULT = PRELUDE + """
after = d.submit(running)  # not started: it waits for `running`
print("ready", flush=True)
try:
    running.result()
    print("returned")
except KeyboardInterrupt:
    print("stopped", flush=True)
print(repr(running.exception()), after.cancelled())
print(d(x)[-1], d.submit(x).result()[-1], k(-x)[-1])  # the process still runs kernels
s = dataflow.scheduler()
print(s.free_cores == s.cores, not s.outstanding)  # no cores leaked
"""

LEAVE = PRELUDE + """
print("ready", flush=True)
if sys.argv[4] == "wait":
    hydra.wait()  # the Ctrl-C reaches hydra.wait: it goes on, uncaught
elif sys.argv[4] == "sleep":
    time.sleep(30)  # the Ctrl-C reaches the program: it goes on, uncaught
# else the program ends: the Ctrl-C reaches the wait at interpreter exit
"""


def cases():
    """(backend, threads, lanes): one thread (cuda: in the simulator, which conftest
    asks for); and the cpu backend's pool of threads."""
    for backend in BACKENDS:
        if backend != "cuda" or os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
            yield backend, 1, 8
    if "cpu" in BACKENDS:
        yield "cpu", 2, 8192


def run(source: str, *args) -> tuple[list[str], str, int, float]:
    """Run ``source``; 0.3 s after it prints "ready", Ctrl-C (SIGINT from here: a
    timer thread in the script may starve where the simulator's threads spin).  Its
    output lines, its stderr, its exit status, and how long after the SIGINT its next
    line (or its end) came."""
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"ctrl_c_{os.getpid()}.py")
    with open(path, "w") as f:
        f.write(textwrap.dedent(source))
    env = child_env(ROOT, HYDRA_QUIET="1")
    with tempfile.TemporaryFile("w+") as errors:  # not a pipe: stdout is read by lines
        proc = subprocess.Popen([sys.executable, path, *map(str, args)], env=env, cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=errors, text=True)
        try:
            ready = proc.stdout.readline()
            if ready != "ready\n":
                proc.wait(timeout=60)
                errors.seek(0)
                pytest.fail(f"the script failed before the Ctrl-C: {errors.read()}")
            time.sleep(0.3)
            proc.send_signal(signal.SIGINT)
            sent = time.perf_counter()
            line: list[str] = []  # the next line, or "" at the end: a hang times out
            reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()))
            reader.start()
            reader.join(timeout=30)
            assert line, "nothing 30 s after the Ctrl-C: the script hangs"
            latency = time.perf_counter() - sent
            first = line[0]
            proc.wait(timeout=30)
            out = first + proc.stdout.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            os.unlink(path)
        errors.seek(0)
        return out.split(), errors.read(), proc.returncode, latency


@pytest.mark.parametrize("backend, threads, lanes", list(cases()))
def test_ctrl_c_in_result_stops_the_launch(backend, threads, lanes):
    out, err, status, latency = run(WAIT_FOR_RESULT, backend, threads, lanes)
    assert status == 0, out + [err]
    assert out[0] == "stopped", out
    assert latency < 1.5, f"stopped {latency} s after SIGINT"  # SPEC: about 1 s
    assert out[1:3] == ["KeyboardInterrupt()", "True"]  # failed; the dependant cancelled
    assert out[3:6] == ["2.0", "2.0", "0"]
    assert out[6:] == ["True", "True"]
    assert "Exception ignored" not in err


def leave_cases():
    """Each configuration ending by a Ctrl-C in ``hydra.wait``; the cpu pool's also by
    one in the program's own code, and by one in the wait at interpreter exit."""
    for backend, threads, lanes in cases():
        yield backend, threads, lanes, "wait"
    if "cpu" in BACKENDS:
        yield "cpu", 2, 8192, "sleep"
        yield "cpu", 2, 8192, "exit"


@pytest.mark.parametrize("backend, threads, lanes, how", list(leave_cases()))
def test_ctrl_c_ends_the_program(backend, threads, lanes, how):
    """A Ctrl-C that ends the program (uncaught, from ``hydra.wait`` or from the
    program's own code; or in the wait at exit) ends it at once, without "Exception
    ignored" tracebacks: the launches are stopped (in ``hydra.wait``, or at exit, which
    sees ``sys.last_value``) before the exit waits for them, and before
    concurrent.futures joins the cpu pool's threads."""
    out, err, status, latency = run(LEAVE, backend, threads, lanes, how)
    assert out == [], out
    assert latency < 3.0, f"left {latency} s after SIGINT"
    assert "Exception ignored" not in err, err
    if how == "exit":  # the program had ended: the Ctrl-C only ends the wait
        assert status == 0, err
    else:
        assert status == -signal.SIGINT, err  # how Python ends a program a Ctrl-C ended
        assert err.rstrip().endswith("KeyboardInterrupt"), err
