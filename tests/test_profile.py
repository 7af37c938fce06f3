"""hydra.profile (issue 30): lane counts per line, exact on every backend; the views.

Kernels whose utilization is known by construction: lane i runs i trips of a loop, so
on numpy with 64 lanes the body runs 63 times with exactly half the lanes on average
(2016 lane steps of 63 * 64); on cpu each gang runs as long as its last lane, so the
issues follow from the reported gang width.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hydra

LANES = 64


def trips(n):
    i = 0
    s = 0
    while i < n:
        s += i
        i += 1
    return s


def _line(fn, text: str) -> int:
    """The source line of ``fn`` holding ``text``."""
    import inspect
    src, first = inspect.getsourcelines(fn)
    return first + next(k for k, s in enumerate(src) if text in s)


BODY, TEST = _line(trips, "s += i"), _line(trips, "while i < n")
BACKENDS = ["numpy", "cpu", "cuda"]


def _expected_issues(width: int, counts: np.ndarray, extra: int = 0) -> int:
    """Gang by gang, the trips of its slowest lane (+ ``extra``: the loop test runs once
    more than the body)."""
    gangs = [counts[g:g + width] for g in range(0, len(counts), width)]
    return sum(int(g.max()) + extra for g in gangs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_lane_steps_exact_and_issues_by_width(backend):
    k = hydra.compile(trips, varying="n", backend=backend, threads=1)
    n = np.arange(LANES)
    p = k.profile(n)
    assert np.array_equal(p.result, n * (n - 1) // 2)
    body, test = p.line(BODY), p.line(TEST)
    assert body.lane_steps == LANES * (LANES - 1) // 2 == 2016
    assert test.lane_steps == 2016 + LANES
    assert p.line(_line(trips, "s = 0")).lane_steps == LANES
    if backend == "numpy":
        assert (body.issues, body.width, body.utilization) == (63, 64, 0.5)
        assert (test.issues, test.width) == (64, 64)
        assert p.kernels[0].trips[TEST] == [1] * LANES  # one lane each ran 0..63 trips
    elif backend == "cpu":
        w = body.width
        assert w in (4, 8, 16, 32, 64) and test.width == w
        assert body.issues == _expected_issues(w, n)
        assert test.issues == _expected_issues(w, n, extra=1)
        assert body.utilization == pytest.approx(2016 / (body.issues * w))
    else:  # cuda: a lane is the unit of issue
        assert (body.issues, body.width) == (2016, 1)


def branchy(x):
    y = 0
    if x % 4 == 0:
        y = x * 2
    else:
        y = x + 1
    return y


@pytest.mark.parametrize("backend", BACKENDS)
def test_arms_count_the_lanes_that_take_them(backend):
    k = hydra.compile(branchy, varying="x", backend=backend, threads=1)
    x = np.arange(LANES)
    p = k.profile(x)
    assert np.array_equal(p.result, np.where(x % 4 == 0, 2 * x, x + 1))
    assert p.line(_line(branchy, "y = x * 2")).lane_steps == LANES // 4
    assert p.line(_line(branchy, "y = x + 1")).lane_steps == 3 * LANES // 4


def _helper(v):
    while v > 1:
        v = v // 2
    return v


def with_helper(v):
    return _helper(v) + 1


def test_helpers_lines_are_counted_and_the_plain_kernel_has_no_counters():
    k = hydra.compile(with_helper, varying="v", backend="cpu", threads=1)
    v = np.arange(1, LANES + 1)
    plain = k(v)
    p = k.profile(v)
    assert np.array_equal(p.result, plain)
    files = {(ln.file, ln.line) for ln in p.lines()}
    assert (__file__, _line(_helper, "v = v // 2")) in files
    assert p.line(_line(_helper, "v = v // 2")).lane_steps == \
        sum(int(np.log2(x)) for x in v)
    assert "count" not in k.dump_ir("predicated", v)
    # numpy and cpu agree on every line's lane steps
    q = hydra.compile(with_helper, varying="v", backend="numpy").profile(v)
    assert {(ln.line, ln.lane_steps) for ln in p.lines()} == \
        {(ln.line, ln.lane_steps) for ln in q.lines()}


def test_the_table_the_data_and_the_advice():
    k = hydra.compile(trips, varying="n", backend="numpy")
    p = k.profile(np.arange(512))  # 511 trips: the loop's time dwarfs the rest
    text = str(p)
    assert "trips (numpy, 512 lanes, width 512)" in text
    assert f"{BODY:>6}" in text and "50%" in text
    frag = p._repr_html_()  # Jupyter's view: a fragment, every counted line in it
    assert frag.startswith('<div class="hydra-profile">') and f'data-line="{BODY}"' in frag
    d = json.loads(json.dumps(p.to_dict()))
    assert {ln["line"] for ln in d["lines"]} >= {BODY, TEST}
    assert d["kernels"][0]["runs"] == 1
    assert any(a.startswith(f"line {TEST}: 50% of lanes active") for a in p.advice)


def _check_trace(doc: dict) -> list[dict]:
    """The Chrome trace event format's rules for what the profiler writes."""
    events = doc["traceEvents"]
    assert events
    open_ = {}
    for e in events:
        for key in ("name", "ph", "ts", "pid", "tid"):
            assert key in e, (key, e)
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
        elif e["ph"] == "B":
            open_.setdefault(e["tid"], []).append(e["name"])
        elif e["ph"] == "E":
            assert open_.get(e["tid"]), "an E with no B on its thread"
            open_[e["tid"]].pop()
        elif e["ph"] in ("s", "f"):
            assert "id" in e
        else:
            assert e["ph"] in ("i", "M"), e
    assert not any(open_.values()), "B/E unbalanced"
    return events


def test_trace_is_chrome_trace_format_with_flows_for_dependencies(tmp_path):
    k = hydra.compile(trips, varying="n", backend="cpu", threads=1)
    n = np.arange(LANES)
    with hydra.profile() as p:
        a = k.submit(n)
        b = k.submit(a)  # depends on a's future
        c = k(n)
    assert np.array_equal(b.result(), k(n * (n - 1) // 2))
    assert np.array_equal(c, n * (n - 1) // 2)
    path = tmp_path / "trace.json"
    p.save_trace(path)
    events = _check_trace(json.loads(path.read_text()))
    kinds = {e.get("cat") for e in events}
    assert {"kernel", "phase", "launch"} <= kinds
    starts = [e for e in events if e["ph"] == "s"]
    ends = [e for e in events if e["ph"] == "f"]
    assert starts and {e["id"] for e in starts} == {e["id"] for e in ends}
    assert p.kernels[0].runs == 3
    assert p.line(BODY).lane_steps == 2 * 2016 + int(np.sum(n * (n - 1) // 2))


def checked(a, i):
    t = 0
    while t < i:
        t += 1
    return a[i]


def test_an_error_carries_the_profile_so_far():
    k = hydra.compile(checked, varying="i", backend="numpy")
    a = np.arange(10)
    with pytest.raises(IndexError) as info:
        k.profile(a, np.array([1, 2, 30, 3]))
    prof = info.value.profile
    assert isinstance(prof, hydra.Profile)
    assert prof.line(_line(checked, "t += 1")).lane_steps == 1 + 2 + 30 + 3


def test_compaction_and_gemm_events_on_cpu():
    def rnn(xs, n, W):
        h = np.zeros(W.shape[0])
        for t in range(n):
            h = np.tanh(W @ h + xs[t])
        return h
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((32, 6, 8))
    n = rng.integers(1, 7, 32)
    W = rng.standard_normal((8, 8)) / 4
    k = hydra.compile(rnn, varying=("xs", "n"), backend="cpu", threads=1)
    p = k.profile(xs, n, W)
    ref = hydra.compile(rnn, varying=("xs", "n"), backend="numpy").profile(xs, n, W)
    assert np.allclose(p.result, ref.result)
    body = _line(rnn, "h = np.tanh")
    assert p.line(body).lane_steps == ref.line(body).lane_steps == int(n.sum())
    assert ref.line(body).issues == int(n.max())
    kinds = {e.kind for e in p.events}
    assert "compaction" in kinds
    kept = [e.args["kept"] for e in p.events if e.kind == "compaction"]
    assert all(0 < x <= 32 for x in kept)
    assert any(e.kind == "gemm" for e in ref.events)


def test_cli_profile_and_html(tmp_path):
    """(The user's file is imported once: its top level runs once.)"""
    src = tmp_path / "kern.py"
    src.write_text(textwrap.dedent('''
        import numpy as np
        print("kern.py imported")

        def steps(n):
            k = 0
            while n > 1:
                n = n // 2
                k += 1
            return k

        def setup():
            return (np.arange(1, 65),), {}
    '''))
    out = tmp_path / "report.html"
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(__file__)))
    r = subprocess.run([sys.executable, "-m", "hydra", "profile", f"{src}::steps", "--setup",
                        "setup", "--varying", "n", "--backend", "numpy", "--html", str(out)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "steps (numpy, 64 lanes, width 64)" in r.stdout
    assert r.stdout.count("kern.py imported") == 1
    page = out.read_text()
    assert "n = n // 2" in page and 'data-util="' in page


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None, reason="headless Chromium is not installed "
                    "(apt-get install chromium): the HTML report is checked in a browser")
def test_html_report_in_headless_chromium(tmp_path):
    k = hydra.compile(trips, varying="n", backend="numpy")
    p = k.profile(np.arange(LANES))
    page = tmp_path / "p.html"
    p.save_html(page)
    r = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                        "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    for ln in p.lines():
        assert f'data-line="{ln.line}" data-util="{ln.utilization:.0%}"' in dom
        assert ln.source.strip().replace("<", "&lt;") in dom
    assert f"loop at line {TEST}: trips per lane" in dom
    # the page has no script: any console message is an error (a resource that failed)
    assert not [ln for ln in r.stderr.splitlines() if "CONSOLE" in ln], r.stderr[-2000:]


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_dask_chunks_profiles_merge_on_the_caller(backend):
    da = pytest.importorskip("dask.array")
    k = hydra.compile(trips, varying="n", backend=backend, threads=1)
    n = np.arange(LANES)
    with hydra.profile() as p:
        out = k(da.from_array(n, chunks=16)).compute(scheduler="threads")
    assert np.array_equal(out, n * (n - 1) // 2)
    body = p.line(BODY)
    assert body.lane_steps == 2016
    if backend == "numpy":  # each chunk runs its own slowest lane's trips
        assert body.issues == sum(int(n[c:c + 16].max()) for c in range(0, LANES, 16))
    assert sum(1 for e in p.events if e.kind == "chunk") == 4


def reduces(x, out):
    t = 0
    s = 0.0
    while t < x:
        s += hydra.lanesum(t)  # a sync point inside the loop: host steps on cpu and cuda
        t += 1
    out[hydra.lane()] = s
    return hydra.lanesum(x)


def test_sync_points_in_loops_count_alike_on_every_backend():
    x = np.arange(16)
    seen = {}
    for backend in BACKENDS:
        out = np.zeros(16)
        p = hydra.compile(reduces, varying="x", backend=backend, threads=1).profile(x, out)
        assert p.result == 120
        seen[backend] = {(ln.line, ln.lane_steps) for ln in p.lines()}
    assert seen["numpy"] == seen["cpu"] == seen["cuda"]
    assert (_line(reduces, "t += 1"), 120) in seen["numpy"]


def test_a_profiled_first_run_times_its_build_apart_from_its_phase():
    """The first profiled run of a phase builds its instrumented machine code: that time
    is the 'build' event's, not the phase's too (the phase's line times counted it
    twice)."""
    def scaled(x, W):
        h = np.tanh(W @ x)
        return hydra.lanesum(h.sum() * 2.0 + 1.0)
    k = hydra.compile(scaled, varying="x", backend="cpu", threads=1)
    x, W = np.random.default_rng(0).standard_normal((64, 5)), np.ones((3, 5))
    k(x, W)
    with hydra.profile() as p:
        k(x, W)
    builds = [e for e in p.events if e.kind == "build"]
    phases = [e for e in p.events if e.kind == "phase"]
    assert builds and phases
    for b in builds:
        assert not any(e.start < b.end and b.start < e.end for e in phases), (b, phases)
