"""python -m hydra dump-ir: every front-end stage, --after, --sig, annotations, and
one-line errors for a missing file, function or type."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MANDEL = f"{ROOT / 'examples' / 'mandelbrot.py'}::mandel"


def dump(*args):
    return subprocess.run([sys.executable, "-m", "hydra", "dump-ir", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("stage", ["ssa", "predicated"])
def test_stages_from_annotations(stage):
    out = dump(MANDEL, "--stage", stage, "--varying", "c_re,c_im")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("func mandel(%c_re: v float32, %c_im: v float32, "
                                 "%max_iter: u int32)")
    if stage == "predicated":
        assert "entry_mask" in out.stdout and "while[varying=True]" in out.stdout
        assert " any %m.loop" in out.stdout
    else:
        assert "entry_mask" not in out.stdout


def test_ast_stage():
    out = dump(MANDEL, "--stage", "ast")
    assert out.returncode == 0 and "FunctionDef" in out.stdout and "name='mandel'" in out.stdout


def test_after_each_pass_and_sig(tmp_path):
    src = tmp_path / "k.py"
    src.write_text("from hydra import lane, lanesum\n"
                   "def k(a, n):\n"
                   "    s = 0.0\n"
                   "    for i in range(n):\n"
                   "        if a[i] > lane():\n"
                   "            s += a[i]\n"
                   "    return lanesum(s)\n")
    texts = {}
    for p in ("uniformity", "linearize", "simplify", "syncpoints"):
        out = dump(f"{src}::k", "--sig", "float64[:], int64", "--after", p)
        assert out.returncode == 0, out.stderr
        texts[p] = out.stdout
    assert "entry_mask" not in texts["uniformity"] and "entry_mask" in texts["linearize"]
    assert "!sync(cross-lane lanesum)" in texts["syncpoints"]
    assert "!sync" not in texts["simplify"]
    assert dump(f"{src}::k", "--sig", "float64[:], int64").stdout == texts["syncpoints"]


@pytest.mark.parametrize("args, message", [
    (["nofile.py::f"], "hydra dump-ir: error: no such file: nofile.py\n"),
    ([MANDEL.replace("::mandel", "::nope")], "has no function 'nope'"),
    ([MANDEL, "--sig", "float32"], "--sig gives 1 type(s) but mandel takes 3 parameter(s)"),
    ([MANDEL, "--sig", "float32, float32, complex64"], "unknown type 'complex64'"),
    ([MANDEL.replace("::", "")], "expected FILE::FUNC"),
])
def test_one_line_errors(args, message):
    out = dump(*args)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1


def test_compile_error_is_reported_without_traceback(tmp_path):
    src = tmp_path / "bad.py"
    src.write_text("def k(x):\n    with open('f') as f:\n        pass\n    return x\n")
    out = dump(f"{src}::k", "--sig", "int64")
    assert out.returncode == 1
    assert "bad.py:2:5: with is not supported in hydra kernels" in out.stderr
    assert "Traceback" not in out.stderr


def test_profile_names_itself_in_its_errors(tmp_path):
    """``profile`` reports a compile error as ``dump-ir`` does, under its own name."""
    src = tmp_path / "bad.py"
    src.write_text("def k(x):\n    with open('f') as f:\n        pass\n    return x\n\n\n"
                   "def setup():\n    return (1.0,), {}\n")
    out = subprocess.run([sys.executable, "-m", "hydra", "profile", f"{src}::k", "--setup",
                          "setup", "--backend", "numpy"], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 1
    assert out.stderr.startswith("hydra profile: ")
    assert "bad.py:2:5: with is not supported in hydra kernels" in out.stderr
    assert "Traceback" not in out.stderr


def test_ptx_without_cuda_is_a_one_line_error():
    import os
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    out = subprocess.run([sys.executable, "-m", "hydra", "dump-ir", MANDEL, "--varying",
                          "c_re,c_im", "--stage", "ptx"], capture_output=True, text=True,
                         cwd=ROOT, timeout=120, env=env)
    if out.returncode == 0:
        pytest.skip("a GPU is here: the ptx stage works")
    assert out.returncode == 1
    assert out.stderr == (
        "hydra dump-ir: error: stage 'ptx' is not available here: the cuda backend needs an "
        "NVIDIA GPU with a working driver, or the CUDA simulator (set NUMBA_ENABLE_CUDASIM=1 "
        "before importing numba)\n")
