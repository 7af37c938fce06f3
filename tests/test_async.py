"""Asynchronous launches (SPEC section 9): futures, dependencies found from the IR,
errors, ``hydra.wait``, the launch graph, shutdown.

Ordering tests start a *slow* launch first (it spins a bounded number of iterations,
about a tenth of a second or more) and a fast one after it that touches the same
memory: without the ordering the fast one runs meanwhile and sees (or leaves) the
wrong values, as ``test_ordering_is_what_makes_the_result_right`` shows by turning the
hazard analysis off.  They also check the dependency the graph records.
"""

import concurrent.futures as cf
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import hydra
from conftest import child_env
from hydra import dataflow, lane, lanesum, scheduler

ROOT = Path(__file__).resolve().parents[1]
#: iterations of a ~0.1-0.3 s spin per backend (the simulator serializes cuda launches:
#: there order is never in doubt and a short spin keeps the test fast)
SPIN = {"numpy": 20_000, "cpu": 100_000_000, "cuda": 50_000}
LANES = 4


def slow_write(a, n, v):
    i = lane()
    x = 1.0
    for _ in range(n):
        x = x * 0.5 + 1.0
    a[i] = v + (x - x)  # x - x keeps the loop alive (not foldable without fastmath)


def slow_copy(src, dst, n):
    i = lane()
    x = 1.0
    for _ in range(n):
        x = x * 0.5 + 1.0
    dst[i] = src[i] + (x - x)


def fast_write(a, v):
    a[lane()] = v


def copy(src, dst):
    dst[lane()] = src[lane()]


def produce(n, v):
    x = 1.0
    for _ in range(n):
        x = x * 0.5 + 1.0
    return v * (lane() + 1) + (x - x)


def total(x):
    return lanesum(x)


def scale_in_place(a, f):
    a[lane()] = a[lane()] * f


def bump(a):
    a[lane()] += 1


def oob(a, k):
    return a[lane() + k]


_KERNELS: dict = {}


def kern(fn, backend, **options):
    """A kernel compiled (and run once) ahead: compiling happens at submit, and a slow
    compile would let the launch before it finish before the dependency is looked for."""
    key = (fn, backend, tuple(sorted(options.items())))
    if key not in _KERNELS:
        k = hydra.compile(fn, lanes=LANES, backend=backend, **options)
        z = np.zeros(LANES)
        warm = {slow_write: (z, 1, 0.0), slow_copy: (z, z.copy(), 1), fast_write: (z, 0.0),
                copy: (z, z.copy()), produce: (1, 0.0), scale_in_place: (z, 1.0),
                bump: (z,)}
        if fn in warm:
            k(*warm[fn])
        _KERNELS[key] = k
    return _KERNELS[key]


def reducer(backend):
    key = (total, backend)
    if key not in _KERNELS:
        _KERNELS[key] = hydra.compile(total, varying="x", backend=backend)
        _KERNELS[key](np.zeros(LANES))
    return _KERNELS[key]


def deps_of(fut):
    """The (launch id, why) pairs the graph records for the launch of ``fut``."""
    for r in hydra.launch_graph().records:
        if r.id == fut.launch_id:
            return list(r.deps)
    raise AssertionError(f"launch #{fut.launch_id} is not in the graph")


@pytest.fixture(autouse=True)
def settle():
    yield
    assert hydra.wait(timeout=120), "launches still outstanding after a test"


# --- futures ----------------------------------------------------------------------------

def test_submit_returns_a_concurrent_future(backend):
    k = hydra.compile(produce, lanes=LANES, backend=backend)
    f = k.submit(3, 2.0)
    assert isinstance(f, hydra.Future) and isinstance(f, cf.Future)
    done, _ = cf.wait([f], timeout=60)
    assert f in done and f.done() and f.exception() is None
    np.testing.assert_array_equal(f.result(), k(3, 2.0))
    assert f.kernel_name == "produce" and f.launch_id >= 1
    seen = []
    f.add_done_callback(seen.append)
    assert seen == [f]
    assert list(cf.as_completed([k.submit(1, 1.0)], timeout=60))[0].result()[0] == 1.0


def test_submit_takes_keywords(backend):
    k = kern(produce, backend)
    np.testing.assert_array_equal(k.submit(v=3.0, n=2).result(), [3.0, 6.0, 9.0, 12.0])


def test_future_as_argument(backend):
    sim, red = kern(produce, backend), reducer(backend)
    f = sim.submit(SPIN[backend], 1.5)
    g = red.submit(f)
    assert g.result() == 1.5 * (1 + 2 + 3 + 4)
    assert deps_of(g) == [(f.launch_id, "future")]


def test_done_future_is_its_value(backend):
    sim, red = kern(produce, backend), reducer(backend)
    f = sim.submit(1, 1.0)
    f.result()
    assert red(f) == 10.0 and red.submit(f).result() == 10.0


def test_consumers_of_one_future_are_ordered(backend):
    """Two launches get the same array from a future; one writes it: the other must
    see it before (WAR) or after (RAW) as submitted."""
    sim, sc = kern(produce, backend), kern(scale_in_place, backend)
    red = reducer(backend)
    f = sim.submit(SPIN[backend], 1.0)
    before = red.submit(f)        # reads [1, 2, 3, 4]
    sc.submit(f, 10.0)            # writes it: after the read
    after = red.submit(f)         # reads the scaled values
    assert before.result() == 10.0 and after.result() == 100.0
    np.testing.assert_array_equal(f.result(), [10.0, 20.0, 30.0, 40.0])


# --- hazards ----------------------------------------------------------------------------

def test_read_after_write(backend):
    k_slow_write = kern(slow_write, backend)
    k_copy = kern(copy, backend)
    a, b = np.zeros(LANES), np.zeros(LANES)
    w = k_slow_write.submit(a, SPIN[backend], 7.0)
    r = k_copy.submit(a, b)
    r.result()
    np.testing.assert_array_equal(b, 7.0)
    assert deps_of(r) == [(w.launch_id, "RAW")]


def test_write_after_read(backend):
    k_slow_copy = kern(slow_copy, backend)
    k_fast_write = kern(fast_write, backend)
    a, b = np.full(LANES, 3.0), np.zeros(LANES)
    r = k_slow_copy.submit(a, b, SPIN[backend])
    w = k_fast_write.submit(a, 9.0)
    w.result()
    np.testing.assert_array_equal(b, 3.0)   # the read saw the old values
    np.testing.assert_array_equal(a, 9.0)
    assert deps_of(w) == [(r.launch_id, "WAR")]


def test_write_after_write(backend):
    k_slow_write = kern(slow_write, backend)
    k_fast_write = kern(fast_write, backend)
    a = np.zeros(LANES)
    first = k_slow_write.submit(a, SPIN[backend], 1.0)
    second = k_fast_write.submit(a, 2.0)
    second.result()
    np.testing.assert_array_equal(a, 2.0)
    assert deps_of(second) == [(first.launch_id, "WAW")]


def twice(x):
    return 2.0 * x


def test_varying_argument_is_read(backend):
    """A varying argument is read whole (lane i gets x[i]): it orders after a writer."""
    k_slow_write, k_twice = kern(slow_write, backend), hydra.compile(twice, varying="x",
                                                                     backend=backend)
    a = np.zeros(LANES)
    k_twice(a)
    w = k_slow_write.submit(a, SPIN[backend], 4.0)
    r = k_twice.submit(a)
    np.testing.assert_array_equal(r.result(), 8.0)
    assert deps_of(r) == [(w.launch_id, "RAW")]


def test_readers_run_side_by_side():
    a, b, c = np.ones(LANES), np.zeros(LANES), np.zeros(LANES)
    k = kern(slow_copy, "numpy")
    f, g = k.submit(a, b, 10), k.submit(a, c, 10)
    assert deps_of(g) == [] and f.result() is None and g.result() is None


def test_views_of_one_buffer(backend):
    k_slow_write = kern(slow_write, backend)
    k_fast_write = kern(fast_write, backend)
    k_copy = kern(copy, backend)
    buf = np.zeros(2 * LANES)
    w = k_slow_write.submit(buf[:LANES], SPIN[backend], 5.0)
    apart = k_fast_write.submit(buf[LANES:], 1.0)
    assert deps_of(apart) == []   # disjoint halves: no order between them
    out = np.zeros(LANES)
    overlapping = k_copy.submit(buf[LANES // 2:LANES // 2 + LANES], out)
    strided = k_fast_write.submit(buf[::2], 3.0)  # interleaves both halves
    strided.result()
    assert (w.launch_id, "RAW") in deps_of(overlapping)
    assert {(w.launch_id, "WAW"), (overlapping.launch_id, "WAR")} <= set(deps_of(strided))
    np.testing.assert_array_equal(out, [5.0] * (LANES // 2) + [1.0] * (LANES // 2))
    np.testing.assert_array_equal(buf, [3.0, 5.0] * (LANES // 2) + [3.0, 1.0] * (LANES // 2))


def test_captured_array_is_tracked():
    k = hydra.compile(_writes_captured, lanes=LANES, backend="numpy")
    reads = hydra.compile(_reads_captured, lanes=LANES, backend="numpy")
    reads()
    f = k.submit(SPIN["numpy"])
    r = reads.submit()
    np.testing.assert_array_equal(r.result(), 4.0)
    assert deps_of(r) == [(f.launch_id, "RAW")]


CAPTURED = np.zeros(LANES)


def _writes_captured(n):
    i = lane()
    x = 1.0
    for _ in range(n):
        x = x * 0.5 + 1.0
    CAPTURED[i] = 4.0 + (x - x)


def _reads_captured():
    return CAPTURED[lane()]


def test_ordering_is_what_makes_the_result_right(monkeypatch):
    """Without the hazard analysis the reader runs meanwhile and sees zeros: the tests
    above can fail."""
    k_slow_write = kern(slow_write, "numpy")
    k_copy = kern(copy, "numpy")
    monkeypatch.setattr(scheduler.Scheduler, "_enter",
                        lambda self, acc, deps: acc.launch.accesses.append(acc))
    a, b = np.zeros(LANES), np.zeros(LANES)
    w = k_slow_write.submit(a, 2 * SPIN["numpy"], 7.0)
    k_copy.submit(a, b).result()
    assert not w.done()
    np.testing.assert_array_equal(b, 0.0)


def test_plain_call_waits_for_what_it_depends_on(backend):
    k_slow_write = kern(slow_write, backend)
    k_copy = kern(copy, backend)
    a, b = np.zeros(LANES), np.zeros(LANES)
    k_slow_write.submit(a, SPIN[backend], 6.0)
    assert k_copy(a, b) is None
    np.testing.assert_array_equal(b, 6.0)
    assert hydra.launch_graph(1).records[0].where == "caller"


# --- cores ------------------------------------------------------------------------------

def test_one_thread_launches_overlap_and_a_full_one_waits():
    cores = dataflow.scheduler().cores
    if cores < 2:
        pytest.skip("one core: nothing can overlap")
    n = SPIN["cpu"]
    one = hydra.compile(slow_write, lanes=LANES, backend="cpu", threads=1)
    f, g = one.submit(np.zeros(LANES), n, 1.0), one.submit(np.zeros(LANES), n, 1.0)
    f.result(), g.result()
    rf, rg = hydra.launch_graph(2).records
    assert rg.started < rf.finished   # both ran at once
    full = hydra.compile(slow_write, lanes=4096, backend="cpu", threads=cores)
    f = full.submit(np.zeros(4096), n // 100, 1.0)
    g = one.submit(np.zeros(LANES), 10, 1.0)
    f.result(), g.result()
    rf, rg = hydra.launch_graph(2).records
    assert rg.started >= rf.finished  # no core was free for it
    assert dataflow.scheduler().free_cores == cores


def test_a_launch_holds_the_cores_its_backend_says(backend):
    """numpy one core, cpu its threads (one for a run below the parallel driver's
    size), cuda none (a stream instead): each backend's ``launch_cores``."""
    from hydra.backends import get_backend
    from hydra.backends.protocol import cores
    k = hydra.compile(slow_write, lanes=4096, backend=backend, threads=2)
    f = k.submit(np.zeros(4096), 1, 1.0)
    f.result()
    launch = f.launch
    want = {"numpy": 1, "cpu": min(2, cores()), "cuda": 0}[str(backend)]
    assert get_backend(backend).launch_cores({"threads": 2}, 4096) == want
    assert get_backend(backend).launch_cores({"threads": 2}, 8) == min(want, 1)
    assert launch.cores == want and launch.gpu == (backend == "cuda")


def test_cpu_launch_releases_the_gil():
    """With a 30 s switch interval a thread holding the GIL keeps it until it blocks:
    the main thread gets past a short sleep while the launch runs only if the compiled
    code let the GIL go (the kernel is called through ctypes, which releases it)."""
    k = kern(slow_write, "cpu")
    assert "the GIL released" in k.dump_ir("numba", np.zeros(LANES), 1, 0.0)
    old = sys.getswitchinterval()
    sys.setswitchinterval(30)
    try:
        f = k.submit(np.zeros(LANES), 5 * SPIN["cpu"], 1.0)
        time.sleep(0.05)
        assert not f.done()
        f.result()
    finally:
        sys.setswitchinterval(old)


# --- errors -----------------------------------------------------------------------------

def _sync_error(k, *args):
    with pytest.raises(Exception) as info:
        k(*args)
    return info.value


def test_lane_error_surfaces_from_result(backend):
    k = kern(oob, backend)
    a = np.arange(LANES, dtype=np.float64)
    want = _sync_error(k, a, 2)
    f = k.submit(a, 2)
    with pytest.raises(type(want)) as info:
        f.result()
    assert str(info.value) == str(want)
    assert isinstance(f.exception(), IndexError)


def test_dependants_of_a_failed_launch(backend):
    k, red = kern(oob, backend), reducer(backend)
    bad = k.submit(np.arange(LANES, dtype=np.float64), 2)
    dep = red.submit(bad)
    dep2 = red.submit(dep)
    with pytest.raises(hydra.DependencyError, match=rf"launch #{bad.launch_id} \(oob\)") as e:
        dep.result()
    assert isinstance(e.value.__cause__, IndexError) and isinstance(e.value, hydra.HydraError)
    with pytest.raises(hydra.DependencyError, match=rf"#{dep.launch_id} \(total\).*"
                       rf"#{bad.launch_id} \(oob\)"):
        dep2.result()
    with pytest.raises(hydra.DependencyError):   # submitted after the failure
        red.submit(bad).result()
    with pytest.raises(hydra.DependencyError):   # a plain call too
        red(bad)


def fail_after_write(a, n):
    x = 1.0
    for _ in range(n):
        x = x * 0.5 + 1.0
    a[lane()] = x
    assert lane() < 2, "lane too high"


def test_dependant_through_memory_of_a_failed_launch():
    a, b = np.zeros(LANES), np.zeros(LANES)
    failing, k_copy = hydra.compile(fail_after_write, lanes=LANES), kern(copy, "numpy")
    bad = failing.submit(a, SPIN["numpy"])
    r = k_copy.submit(a, b)
    with pytest.raises(hydra.DependencyError, match="fail_after_write") as e:
        r.result()
    assert isinstance(e.value.__cause__, AssertionError)
    assert isinstance(bad.exception(), AssertionError)


def test_argument_errors_raise_from_submit():
    with pytest.raises(TypeError):
        kern(copy, "numpy").submit(np.zeros(LANES))


def test_cancelled_launch_fails_its_dependants():
    k_slow_write = kern(slow_write, "numpy")
    k_fast_write = kern(fast_write, "numpy")
    a = np.zeros(LANES)
    k_slow_write.submit(a, SPIN["numpy"], 1.0)
    waiting = k_fast_write.submit(a, 2.0)
    after = k_fast_write.submit(a, 3.0)
    assert waiting.cancel()
    with pytest.raises(hydra.DependencyError, match="cancelled"):
        after.result(timeout=60)
    np.testing.assert_array_equal(a, 1.0)


# --- wait, many launches, the graph, shutdown --------------------------------------------

def test_wait():
    a = np.zeros(LANES)
    f = kern(slow_write, "numpy").submit(a, 3 * SPIN["numpy"], 1.0)
    assert hydra.wait(timeout=0.001) is False and not f.done()
    assert hydra.wait() is True and f.done()
    np.testing.assert_array_equal(a, 1.0)


@pytest.mark.parametrize("backend_name", ["numpy", "cpu"])
def test_many_small_launches(backend_name):
    if backend_name not in hydra.backends.BACKENDS or not hydra.backends.available(backend_name):
        pytest.skip(f"{backend_name} is not available")
    k = kern(bump, backend_name)
    a = np.zeros(LANES)
    others = [np.zeros(LANES) for _ in range(8)]
    futures = [k.submit(a) if i % 2 else k.submit(others[i % 8]) for i in range(2000)]
    assert hydra.wait(timeout=120)
    assert all(f.done() and f.exception() is None for f in futures)
    np.testing.assert_array_equal(a, 1000)
    assert sum(o[0] for o in others) == 1000
    s = dataflow.scheduler()
    assert not s.table and not s.outstanding and len(s.history) <= scheduler.HISTORY


def add_to(a, b):
    a[lane()] = a[lane()] + b[lane()]


def shift_copy(src, dst):
    dst[lane()] = src[lane()] + 1.0


@pytest.mark.parametrize("backend_name", ["numpy", "cpu"])
def test_random_launch_sequences_match_serial(backend_name):
    """Random launches over overlapping views of three buffers (some plain calls among
    them) end with what running them one by one gives."""
    if not hydra.backends.available(backend_name):
        pytest.skip(f"{backend_name} is not available")
    add, sc = kern(add_to, backend_name), kern(scale_in_place, backend_name)
    cp = kern(shift_copy, backend_name)
    add(np.zeros(LANES), np.zeros(LANES))
    cp(np.zeros(LANES), np.zeros(LANES))
    rng = np.random.default_rng(14)
    for _ in range(10):
        bufs = [np.arange(2 * LANES, dtype=float) + j for j in range(3)]
        ref = [b.copy() for b in bufs]
        for _ in range(40):
            j1, j2, o1, o2 = (int(x) for x in rng.integers(0, [3, 3, LANES + 1, LANES + 1]))
            a, b = bufs[j1][o1:o1 + LANES], bufs[j2][o2:o2 + LANES]
            ra, rb = ref[j1][o1:o1 + LANES], ref[j2][o2:o2 + LANES]
            if np.shares_memory(a, b):
                continue
            how = (lambda k: k) if rng.random() < 0.1 else (lambda k: k.submit)
            op = rng.integers(3)
            if op == 0:
                how(add)(a, b)
                ra += rb
            elif op == 1:
                how(sc)(a, -2.0)
                ra *= -2.0
            else:
                how(cp)(b, a)
                ra[:] = rb + 1.0
        hydra.wait()
        for got, want in zip(bufs, ref):
            np.testing.assert_array_equal(got, want)


def test_launches_from_several_threads():
    k = kern(bump, "numpy")
    a = np.zeros(LANES)

    def hammer():
        for _ in range(100):
            k.submit(a)
    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    hydra.wait()
    np.testing.assert_array_equal(a, 400)


def test_launch_graph_svg(tmp_path):
    sim, red, k_oob = kern(produce, "numpy"), reducer("numpy"), kern(oob, "numpy")
    f1, f2 = sim.submit(SPIN["numpy"], 1.0), sim.submit(SPIN["numpy"], 2.0)
    bad = k_oob.submit(np.zeros(LANES), 9)
    r1, r2 = red.submit(f1), red.submit(f2)
    hydra.wait()
    assert (r1.result(), r2.result()) == (10.0, 20.0)
    g = hydra.launch_graph(last=5)
    assert len(g) == 5 and [r.status for r in g.records].count("failed") == 1
    svg = g._repr_svg_()
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert svg.count("marker-end") == 2 and ">future<" in svg and "IndexError" in svg
    assert f"#{bad.launch_id} oob" in svg
    g.save(tmp_path / "g.svg")
    assert (tmp_path / "g.svg").read_text() == svg
    assert "total" in repr(g) and "after: #" in repr(g)
    assert len(hydra.launch_graph(last=0)) == 0


#: a script's start: ``k`` runs ``n`` loop trips per lane, then writes 3.0 to ``a[lane]``
SLOW_SCRIPT = (
    "import os, signal, threading, numpy as np, hydra\n"
    "def slow(a, n):\n"
    "    x = 1.0\n"
    "    for _ in range(n):\n"
    "        x = x * 0.5 + 1.0\n"
    "    a[hydra.lane()] = 3.0 + (x - x)\n"
    "k = hydra.compile(slow, lanes=4, backend='numpy')\n")


def run_slow_script(path: Path, rest: str, timeout: float) -> subprocess.CompletedProcess:
    """Run ``SLOW_SCRIPT + rest`` in a fresh interpreter (exit and signals concern the
    whole process); it must succeed."""
    path.write_text(SLOW_SCRIPT + rest)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                         timeout=timeout, cwd=ROOT,
                         env=child_env(ROOT))
    assert out.returncode == 0, out.stderr
    return out


def test_interpreter_exit_waits_for_outstanding_launches(tmp_path):
    t = time.perf_counter()
    out = run_slow_script(
        tmp_path / "exit.py",
        "a = np.zeros(4)\n"
        "f = k.submit(a, 20000)\n"
        "f.add_done_callback(lambda f: print('finished', a.sum(), flush=True))\n"
        "print('leaving', flush=True)\n", timeout=120)
    assert out.stdout.split() == ["leaving", "finished", "12.0"]
    assert time.perf_counter() - t < 120


def test_ctrl_c_reaches_a_plain_call(tmp_path):
    """A plain call runs (or waits for its dependencies) on the calling thread: Ctrl-C
    interrupts it there, the launch it was fails or is cancelled, the submitted launch
    running meanwhile is stopped too (``hydra.stop``), and nothing hangs."""
    out = run_slow_script(
        tmp_path / "sigint.py",
        "a, b = np.zeros(4), np.zeros(4)\n"
        "k(a, 1)\n"
        "def interrupt():\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "submitted = []\n"
        "for target in (b, a):  # runs at once, then waits for the submitted launch\n"
        "    submitted.append(k.submit(a, 10**9))\n"
        "    threading.Timer(0.5, interrupt).start()\n"
        "    try:\n"
        "        k(target, 10**9)\n"
        "    except KeyboardInterrupt:\n"
        "        print('interrupted', flush=True)\n"
        "hydra.wait()\n"
        "print([repr(f.exception()) for f in submitted], a.sum(),\n"
        "      [r.status for r in hydra.launch_graph().records])\n",
        timeout=60)
    lines = out.stdout.splitlines()
    assert lines[:2] == ["interrupted", "interrupted"]
    assert lines[2] == ("['KeyboardInterrupt()', 'KeyboardInterrupt()'] 12.0 "
                        "['failed', 'failed', 'failed', 'did not run']")


def test_cuda_chains_get_streams_and_events(monkeypatch):
    """Two independent cuda launches get two streams; a launch after both continues one
    stream and waits for the other's event (the simulator still runs them in turn)."""
    if "cuda" not in hydra.backends.BACKENDS or not hydra.backends.available("cuda"):
        pytest.skip("no cuda backend")
    s = dataflow.scheduler()
    monkeypatch.setattr(s, "gpu_slots", 2)
    k_slow_write, k_add = kern(slow_write, "cuda"), kern(add_to, "cuda")
    k_add(np.zeros(LANES), np.zeros(LANES))
    a, b = np.zeros(LANES), np.zeros(LANES)
    fa = k_slow_write.submit(a, SPIN["cuda"], 1.0)
    fb = k_slow_write.submit(b, SPIN["cuda"], 2.0)
    fc = k_add.submit(a, b)
    fc.result()
    np.testing.assert_array_equal(a, 3.0)
    assert sorted(deps_of(fc)) == [(fa.launch_id, "RAW"), (fb.launch_id, "RAW")]
    la, lb, lc = fa.launch, fb.launch, fc.launch
    assert la.stream is not lb.stream and lc.stream in (la.stream, lb.stream)
    assert la.event is not None and lb.event is not None


class _FakeDeviceArray:
    """Just the ``__cuda_array_interface__`` of a device array (no GPU needed)."""

    def __init__(self, ptr, shape, strides=None, typestr="<f8"):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape,
                                         "strides": strides, "typestr": typestr,
                                         "version": 3}


def test_span_of_device_arrays():
    assert dataflow.span(_FakeDeviceArray(4096, (4, 3))) == (4096, 4096 + 96)
    assert dataflow.span(_FakeDeviceArray(4096, (4,), (16,))) == (4096, 4096 + 56)
    assert dataflow.span(_FakeDeviceArray(4096, (4,), (-8,))) == (4096 - 24, 4096 + 8)
    assert dataflow.span(_FakeDeviceArray(4096, (0, 3))) == (4096, 4096)
    a = np.zeros(10)
    lo, hi = dataflow.span(a[2:5])
    assert hi - lo == 24 and dataflow.span(3.0) is None


def test_device_arrays_are_ordered():
    if "cuda" not in hydra.backends.BACKENDS or not hydra.backends.available("cuda"):
        pytest.skip("no cuda backend")
    from numba import cuda
    k_slow_write, k_copy = kern(slow_write, "cuda"), kern(copy, "cuda")
    d, out = cuda.to_device(np.zeros(LANES)), np.zeros(LANES)
    w = k_slow_write.submit(d, SPIN["cuda"], 5.0)
    r = k_copy.submit(d, out)
    r.result()
    assert deps_of(r) == [(w.launch_id, "RAW")]
    np.testing.assert_array_equal(out, 5.0)
