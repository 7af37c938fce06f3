"""Every example runs (small sizes) and prints what it promises."""

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import child_env

ROOT = Path(__file__).resolve().parents[1]


def run_example(name, *args):
    out = subprocess.run([sys.executable, str(ROOT / "examples" / name), *args],
                         capture_output=True, text=True, cwd=ROOT / "examples", timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_hello():
    out = run_example("hello.py").splitlines()
    assert out[:4] == ["Hello, World!"] * 4
    assert out[4:12] == [f"Hello from lane {i}" for i in range(1, 5)] + [
        f"Goodbye from lane {i}" for i in range(1, 5)]
    assert out[12] == "lanesum((lane() + 1) * 2) over 4 lanes = 20"
    assert out[13:] == ["Hello from lane 2", "Hello from lane 4"]


def test_mandelbrot_png(tmp_path):
    png = tmp_path / "m.png"
    out = run_example("mandelbrot.py", "--width", "64", "--height", "24", "--png", str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "@" in out and "64x24 pixels" in out


def test_black_scholes():
    out = run_example("black_scholes.py", "--options", "20000")
    assert "max |hydra - plain Python|" in out
    err = float(out.split("= ")[1].split()[0])
    assert err < 1e-9


def test_collatz():
    out = run_example("collatz.py", "--count", "3000")
    assert "plain Python agrees: True" in out and "starts at 2919 (216 steps)" in out


def test_mc_pi():
    out = run_example("mc_pi.py", "--samples", "400000", "--lanes", "256")
    estimate = float(out.split("pi ~ ")[1].split()[0])
    assert abs(estimate - 3.14159) < 0.02
    import hydra
    x, y = (hydra.random.uniform(2024, i, lane=3) for i in (0, 1))
    assert f"lane 3's first point, in plain Python: ({x:.6f}, {y:.6f})" in out


def test_mc_option_agrees_with_black_scholes():
    out = run_example("mc_option.py", "--paths", "20000", "--steps", "16")
    assert "within 3 standard errors: True" in out
    assert "plain Python agrees on lane 10000: True" in out


@pytest.mark.parametrize("size", [24])
def test_aobench_png(tmp_path, size):
    png = tmp_path / "ao.png"
    out = run_example("aobench.py", "--size", str(size), "--png", str(png))
    assert png.exists() and "mean brightness" in out


def test_aobench_matches_plain_python():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import aobench
    finally:
        sys.path.pop(0)
    import numpy as np
    size = 16
    image = aobench.render(size)
    for pixel in (0, 100, 136, 200, 255):
        with np.errstate(over="ignore"):  # the hash wraps on purpose
            expected = aobench.shade(np.int64(pixel), size, size)
        assert image.flat[pixel] == expected


def test_async_pipeline(tmp_path):
    svg = tmp_path / "graph.svg"
    out = run_example("async_pipeline.py", "--walkers", "4000", "--steps", "100",
                      "--svg", str(svg))
    assert "plain Python agrees on the first walkers: True" in out
    assert "histograms: 4000 and 4000 walkers" in out
    # (which dependencies the graph shows depends on what had finished at each submit;
    # tests/test_async.py checks them)
    rows = [line.split() for line in out.splitlines() if line.startswith("  #")]
    assert [r[1] for r in rows] == ["walk", "walk", "histogram", "histogram", "spread",
                                    "spread", "compare"]
    assert all(r[3] == "ok" for r in rows) and rows[1][-1] == "-"
    assert svg.read_text().startswith("<svg") and "marker-end" in svg.read_text()


def test_dask_mandelbrot_png(tmp_path):
    pytest.importorskip("distributed", reason="the dask extra is not installed")
    png = tmp_path / "dm.png"
    out = run_example("dask_mandelbrot.py", "--width", "64", "--height", "32", "--workers", "1",
                      "--rows-per-chunk", "8", "--check", "--png", str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "64x32 pixels in 4 tasks" in out and "equal to a local call: True" in out


# The per-lane array examples: each is the function a user writes for ONE example; the
# plain-Python runs check the example itself (its oracle), the hydra runs check that the
# batched kernel agrees with it (on both backends).


def test_mlp_plain_python():
    out = run_example("mlp.py", "--examples", "64", "--python")
    assert "64 examples: per-example Python loop" in out
    assert 0.1 < float(out.split("probability ")[1]) <= 1.0


def test_rnn_plain_python():
    out = run_example("rnn.py", "--examples", "40", "--steps", "12", "--python")
    assert "40 sequences of 1..12 steps" in out


def test_early_exit_plain_python():
    out = run_example("early_exit.py", "--examples", "500", "--python")
    depth = float(out.split("mean depth ")[1].split()[0])
    assert 3.0 < depth < 4.5  # ML.md: 3.67 at 16,384 examples


def test_digits_cnn_plain_python():
    pytest.importorskip("sklearn")
    out = run_example("digits_cnn.py", "--python")
    acc = float(out.split("test accuracy ")[1].split(",")[0])
    assert acc >= 0.95


def _agrees(out: str) -> bool:
    return "agrees with the loop: True" in out or "logits agree: True" in out


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_mlp_hydra(backend):
    out = run_example("mlp.py", "--examples", "37", "--backend", backend)
    assert _agrees(out), out


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_rnn_hydra(backend):
    out = run_example("rnn.py", "--examples", "21", "--steps", "9", "--backend", backend)
    assert _agrees(out), out


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_early_exit_hydra(backend):
    out = run_example("early_exit.py", "--examples", "300", "--backend", backend)
    assert _agrees(out), out
    assert int(out.split("differing from the loop: ")[1].split(";")[0]) <= 1


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_digits_cnn_hydra(backend):
    pytest.importorskip("sklearn")
    out = run_example("digits_cnn.py", "--backend", backend)
    accs = [float(part.split(",")[0]) for part in out.split("test accuracy ")[1:]]
    assert len(accs) == 2 and accs[1] >= 0.95 and abs(accs[1] - accs[0]) <= 0.02, out
    assert "speed-up over the Python loop: " in out


def test_digits_cnn_autograd_against_the_hand_written_backward_pass():
    """The forward-only model trained with hydra.value_and_grad (SPEC section 11): its
    first step's gradients agree with the hand-written backward pass's, and so does the
    test accuracy (within 0.5 points)."""
    pytest.importorskip("sklearn")
    out = run_example("digits_cnn.py", "--autograd", "--limit", "600", "--epochs", "20",
                      "--batch", "128", "--repeat", "1")
    assert "autograd agrees with the hand-written backward pass: True" in out, out


def test_readme_per_lane_array_snippet(tmp_path):
    """The README's per-lane array snippet, in a new process that only did ``import
    hydra`` (``hydra.nn`` comes with it), agrees with the per-example function."""
    text = (ROOT / "README.md").read_text()
    snippet = next(block for block in text.split("```python")[1:] if "hydra.nn." in block)
    snippet = snippet.split("```")[0]
    setup = ("import numpy as np\nimport hydra\n"
             "rng = np.random.default_rng(0)\n"
             "X = rng.standard_normal((5, 784))\n"
             "W1, b1 = rng.standard_normal((16, 784)) * 0.05, rng.standard_normal(16)\n"
             "W2, b2 = rng.standard_normal((10, 16)), rng.standard_normal(10)\n")
    check = ("\nwant = np.stack([mlp_one(x, W1, b1, W2, b2) for x in X])\n"
             "assert probs.shape == (5, 10), probs.shape\n"
             "assert np.allclose(probs, want, rtol=1e-12, atol=1e-15)\n"
             "print('ok', type(hydra.nn.softmax).__name__)\n")
    script = tmp_path / "readme_snippet.py"  # hydra reads the kernel's source from a file
    script.write_text(setup + snippet + check)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         cwd=ROOT, timeout=600, env=child_env(ROOT))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ok", "function"]
