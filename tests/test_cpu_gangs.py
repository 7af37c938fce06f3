"""The cpu backend's gang shape and gang edges: full gangs read and write per-lane
buffers with plain vector loads and stores, only the last, partial gang masks
(``cpu/memory.py``); the chain count (vectors per gang) is decided per kernel
(``cpu/chains.py``).  Results stay those of plain Python and the numpy backend at every
lane count, full gangs, partial ones and one lane alike, for every chain count."""

import importlib.util
import re

import numpy as np
import pytest

import hydra
from bench import mandelbrot as mb
from hydra.backends.cpu.backend import CpuBackend
from hydra.backends.cpu.chains import gang_vectors

LANE_COUNTS = [1, 15, 16, 31, 32, 33, 47, 48, 49, 63, 64, 65, 100, 1000]


def specialized(k, *args):
    fn, _ = k.specialize(k.signature(args)[1])
    return fn


def llvm(k, *args) -> str:
    return CpuBackend.dump(specialized(k, *args), "llvm", k.options)


def mixed(a: np.float32, b: np.float64, c: np.int8, d: bool, e: np.int64):
    """Varying inputs and outputs of every width, bools included, and a loop."""
    s = np.float32(0.0)
    i = 0
    while i < (e % 5):
        s = s + a * np.float32(i)
        i += 1
    return s, b * 2.0 + c, not d, c + np.int8(1), e * 3


def inputs(lanes: int):
    x = np.arange(lanes)
    return ((x * 0.25 - 3).astype(np.float32), x * 1.5, (x % 200 - 100).astype(np.int8),
            x % 3 == 1, x * 7 - 50)


def python_lanes(fn, args, lanes):
    return [fn(*(v[i] for v in args)) for i in range(lanes)]


@pytest.mark.parametrize("chains", [None, "2", "3", "4"])
@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_gang_edges_agree_with_python_and_numpy(lanes, chains, monkeypatch):
    if chains:
        monkeypatch.setenv("HYDRA_CPU_GANG_VECTORS", chains)
    args = inputs(lanes)
    k = hydra.compile(mixed, varying=("a", "b", "c", "d", "e"), backend="cpu")
    ref = hydra.compile(mixed, varying=("a", "b", "c", "d", "e"), backend="numpy")
    got, want = k(*args), ref(*args)
    py = python_lanes(mixed, args, lanes)
    for j, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(g, w)
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, np.array([p[j] for p in py], dtype=g.dtype))


def test_full_gangs_use_plain_loads_and_stores():
    k = hydra.compile(mixed, varying=("a", "b", "c", "d", "e"), backend="cpu")
    text = llvm(k, *inputs(100))
    # both ways are there: plain vector loads and stores for full gangs ...
    assert re.search(r"= load <\d+ x float>, ptr", text)
    assert re.search(r"store <\d+ x double> %\S+, ptr", text)
    # ... masked ones for the last gang, chosen by one scalar compare with n
    assert "@llvm.masked.load.v" in text and "@llvm.masked.store.v" in text
    assert re.search(r"%full\d+ = icmp sle i64 %\S+, %n", text)
    # a full gang's tail mask is a constant, joined with the partial gang's compares
    assert re.search(r"phi <\d+ x i1> \[<\d+ x i1> <i1 true", text) or re.search(
        r"phi <\d+ x i1> \[<i1 true", text)


def test_the_last_gang_does_not_keep_the_tail_mask_across_a_loop():
    """The partial gang's stores make their mask again from the lanes left (low bits of
    an i64), so the tail's compares are not live across the loop."""
    k = hydra.compile(mb.kernel, varying=mb.VARYING, backend="cpu")
    c_re, c_im, it = mb.setup()
    text = llvm(k, c_re[:100], c_im[:100], it)
    assert re.search(r"shl i64 1, %\S+", text)
    assert re.search(r"bitcast i\d+ %\S+ to <\d+ x i1>", text)


def live(n: int, where):
    """A float32 loop with n // 2 carried values and n - n // 2 read from outside."""
    params = ", ".join(f"a{j}: np.float32" for j in range(n - n // 2))
    src = ["import numpy as np", f"def f({params}, m: np.int32):"]
    for j in range(n // 2):
        src.append(f"    z{j} = a{j % (n - n // 2)}")
    src.append("    i = np.int32(0)")
    src.append("    while i < m:")
    src.append("        if z0 > np.float32(1e6):")
    src.append("            break")
    for j in range(n // 2):
        reads = " + ".join(f"a{t}" for t in range(n - n // 2))
        src.append(f"        z{j} = z{j} * np.float32(0.5) + z{(j + 1) % (n // 2)} + {reads}")
    src.append("        i += 1")
    src.append("    return " + " + ".join(f"z{j}" for j in range(n // 2)))
    path = where / f"live{n}.py"  # hydra reads the source from a file
    path.write_text("\n".join(src) + "\n")
    spec = importlib.util.spec_from_file_location(f"live{n}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.f, tuple(f"a{j}" for j in range(n - n // 2))


@pytest.mark.parametrize("n,want", [(4, 4), (6, 4), (8, 3), (12, 2)])
def test_chains_follow_the_loops_live_values(n, want, monkeypatch, tmp_path):
    monkeypatch.delenv("HYDRA_CPU_GANG_VECTORS", raising=False)
    f, names = live(n, tmp_path)
    k = hydra.compile(f, varying=names, backend="cpu")
    args = [np.linspace(-1, 1, 70, dtype=np.float32) for _ in names] + [np.int32(30)]
    fn = specialized(k, *args)
    # carried + read (the counter i counts: its per-lane value is carried too)
    assert gang_vectors(fn, 512) == want
    assert gang_vectors(fn, 256) == 2  # without AVX-512: 2 chains, as measured there
    np.testing.assert_allclose(k(*args), hydra.compile(f, varying=names, backend="numpy")(
        *args), rtol=0, atol=0)


def test_chains_stay_two_for_wide_types_and_loop_free_kernels(monkeypatch):
    monkeypatch.delenv("HYDRA_CPU_GANG_VECTORS", raising=False)

    def collatz(n: np.int64) -> np.int64:
        s = 0
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            s += 1
        return s

    def straight(x: np.float32) -> np.float32:
        return x * x + np.float32(1.0)

    c = hydra.compile(collatz, varying=("n",), backend="cpu")
    s = hydra.compile(straight, varying=("x",), backend="cpu")
    assert gang_vectors(specialized(c, np.arange(1, 9)), 512) == 2
    assert gang_vectors(specialized(s, np.ones(8, np.float32)), 512) == 2
    m = hydra.compile(mb.kernel, varying=mb.VARYING, backend="cpu")
    c_re, c_im, it = mb.setup()
    assert gang_vectors(specialized(m, c_re[:64], c_im[:64], it), 512) == 4
    monkeypatch.setenv("HYDRA_CPU_GANG_VECTORS", "2")
    assert gang_vectors(specialized(m, c_re[:64], c_im[:64], it), 512) == 2


def test_fastmath_fuses_products_with_two_uses():
    from hydra.backends.cpu.vectors import host_has_fma
    if not host_has_fma():
        pytest.skip("no FMA on this CPU")
    c_re, c_im, it = mb.setup()
    args = c_re[:100], c_im[:100], it
    fast = hydra.compile(mb.kernel, varying=mb.VARYING, backend="cpu", fastmath=True)
    text = llvm(fast, *args)
    # |z|^2 = zr*zr + zi*zi, re(z^2) = zr*zr - zi*zi, im = (2 zr) zi + c_im: three
    # fused multiply-adds a part (zr*zr has two uses; LLVM alone fuses only one-use ones)
    parts = len(re.findall(r"= fcmp ogt", text))  # the escape test, once a part
    assert parts and len(re.findall(r"= call <\d+ x float> @llvm\.fma", text)) == 3 * parts
    exact = hydra.compile(mb.kernel, varying=mb.VARYING, backend="cpu")
    assert "@llvm.fma" not in llvm(exact, *args)
    ref = hydra.compile(mb.kernel, varying=mb.VARYING, backend="numpy")(*args)
    assert np.mean(fast(*args) == ref) > 0.95
