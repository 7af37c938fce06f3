"""Messages a new user met that misled (issue 22, item 8): each test asserts the new
message, and fails with the old one."""

import inspect
import pathlib
import re

import numpy as np
import pytest

import hydra

ROOT = pathlib.Path(__file__).resolve().parents[1]


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, ln in enumerate(lines) if text in ln)


def test_launch_graph_save_refuses_a_suffix_that_is_not_svg(tmp_path):
    g = hydra.launch_graph(last=0)
    with pytest.raises(ValueError) as e:
        g.save(tmp_path / "g.png")
    assert str(e.value) == (f"LaunchGraph.save writes SVG: give a path ending in .svg, not "
                            f".png ({str(tmp_path / 'g.png')!r})")
    assert not (tmp_path / "g.png").exists()
    g.save(tmp_path / "g.SVG")
    assert (tmp_path / "g.SVG").read_text().startswith("<svg")


def add_k(x, k):
    return x + k


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_a_python_int_argument_too_big_for_int64_is_an_overflow_error(backend):
    k = hydra.compile(add_k, varying=("x",), backend=backend)
    with pytest.raises(OverflowError) as e:
        k(np.zeros(4), 2**70)
    assert str(e.value) == ("argument 'k' = 1180591620717411303424 does not fit in int64, "
                            "the type of a Python int argument (NumPy 2 raises "
                            "OverflowError there too)")


def outer_sort(x):
    return np.sort(x)


def test_refused_array_operation_cites_the_guide_chapter_by_title():
    k = hydra.compile(outer_sort, varying=("x",), backend="numpy")
    with pytest.raises(hydra.CompileError) as e:
        k(np.zeros((4, 3)))
    assert e.value.hint == ("docs/guide.md, chapter 12 'Per-lane arrays: per-example NumPy "
                            "code, batched', lists the array operations kernels support "
                            "('Operations')")
    assert "## 12. Per-lane arrays: per-example NumPy code, batched" in \
        (ROOT / "docs" / "guide.md").read_text()


def test_user_docs_cite_no_spec_section():
    """Users have the guide, not the SPEC: the README, the guide and every message cite
    the guide's chapters."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        assert not re.search(r"SPEC (section|§)", path.read_text()), path
    for path in sorted((ROOT / "hydra").rglob("*.py")):
        for m in re.finditer(r"(hint|message)=?[^\n]*SPEC", path.read_text()):
            raise AssertionError(f"{path}: {m.group()}")


def test_guide_does_not_speak_of_float16_or_complex_in_fused_chains():
    text = (ROOT / "docs" / "guide.md").read_text()
    assert "`float16` and complex values stay\nout of chains" not in text
    with pytest.raises(TypeError, match="unsupported dtype float16"):
        hydra.compile(add_k, varying=("x",), backend="numpy")(np.zeros(4, np.float16), 1)
