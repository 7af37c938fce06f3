"""bench/startup.py and bench/firstcall.py run and print their rows: the cached hydra rows
(the per-lane array kernel's included) import neither numba nor scipy, and every row
agrees on the result."""

from bench import firstcall, startup


def test_startup_rows(capsys, monkeypatch):
    monkeypatch.delenv("HYDRA_CACHE_DIR", raising=False)
    startup.main(repeat=1)
    lines = capsys.readouterr().out.splitlines()
    rows = {line[:46].strip(): line[46:].split() for line in lines[2:]}
    assert set(rows) == {"hydra cache=True, threads=1", "hydra cache=True, threads=all",
                         "hydra cache=False, threads=1", "numba @njit(cache=True)",
                         "hydra digits step cache=True", "hydra digits step cache=False"}
    for label, cols in rows.items():
        assert all(float(x) > 0 for x in cols[:4])
        if label.startswith("hydra") and "cache=True" in label:
            assert cols[4:] == ["-"]  # the digits step's fused loops come from the cache too
        elif label.startswith("hydra digits"):  # compiling its fused loops takes numba
            assert cols[4].startswith("numba")
        elif label.startswith("hydra"):
            assert cols[4:] == ["-"]
        else:  # numba's cache loads its registries (and SciPy, where installed)
            assert cols[4].startswith("numba")


def test_firstcall_rows(capsys):
    firstcall.run(["mandelbrot"], repeat=1)
    lines = capsys.readouterr().out.splitlines()
    labels = [line[15:60].strip() for line in lines[2:]]
    assert labels == ["hydra, 1 thread", "hydra, all threads", "numba @njit"]
    assert all(float(x) > 0 for line in lines[2:] for x in line[60:].split())
