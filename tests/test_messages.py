"""Messages a new user met that misled (issue 22, item 8): each test asserts the new
message, and fails with the old one."""

import inspect
import pathlib
import re

import numpy as np
import pytest

import hydra
from hydra import lane

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


def outer_unique(x):
    return np.unique(x)


def test_refused_array_operation_cites_the_guide_chapter_by_title():
    k = hydra.compile(outer_unique, varying=("x",), backend="numpy")
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


def swap_in_loop(a, b, n):
    for _ in range(n):
        b[lane()] = a[lane()] + 1.0
        a, b = b, a
    return a[lane()]


def swap_in_if(a, b, c):
    if c > 0:
        a, b = b, a
    a[lane()] = 1.0


@pytest.mark.parametrize("fn", [swap_in_loop, swap_in_if])
def test_array_swap_error_points_at_the_swap_not_the_def(fn):
    k = hydra.compile(fn, lanes=4, backend="numpy")
    with pytest.raises(hydra.CompileError) as e:
        k(np.zeros(4), np.zeros(4), 3)
    assert e.value.line == line_of(fn, "a, b = b, a")
    assert e.value.message.startswith("'a' is the array ")
    assert "    a, b = b, a\n" in str(e.value)


def private_store_read_elsewhere(a):
    a[lane()] = lane() * 2
    return a[(lane() + 1) % hydra.nlanes()]


def private_row_and_element(x, out):
    out[lane()] = np.zeros(2) + x
    out[lane(), 1] += x


def test_dump_ir_does_not_call_a_lane_private_store_one_at_other_lanes_indices():
    ir = hydra.compile(private_store_read_elsewhere, lanes=4).dump_ir(
        "predicated", np.zeros(4, np.int64))
    store = next(ln for ln in ir.splitlines() if ln.strip().startswith("store %a"))
    assert "!sync(store of a at this lane's own index, which other lanes may read)" in store
    assert "other lanes' indices" not in ir
    # a row stored at out[lane()] is lane-private too: no sync at out[lane(), 1]
    ir = hydra.compile(private_row_and_element, varying=("x",)).dump_ir(
        "predicated", np.zeros(4), np.zeros((4, 2)))
    assert "!sync" not in ir


@pytest.mark.parametrize("backend", ["numpy", "cpu"])  # per-lane arrays: not on cuda
def test_lane_private_rows_still_run_correctly(backend):
    out = np.zeros((5, 2))
    hydra.compile(private_row_and_element, varying=("x",), backend=backend)(
        np.arange(5.0), out)
    np.testing.assert_array_equal(out, np.stack([np.arange(5.0), 2 * np.arange(5.0)], 1))


def row_sum(x, k):
    if lane() >= 2:
        return x[k].sum()
    return 0.0


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_uniform_row_index_out_of_bounds_names_the_lowest_active_lane(backend):
    k = hydra.compile(row_sum, varying=("x",), backend=backend)
    with pytest.raises(IndexError) as e:
        k(np.ones((4, 3, 2)), 5)
    assert isinstance(e.value, hydra.HydraError) and e.value.lane == 2
    assert str(e.value) == (f"{__file__}:{line_of(row_sum, 'x[k].sum()')}: index 5 is out "
                            f"of bounds for axis 0 with size 3 (lane 2)\n"
                            f"    return x[k].sum()")


def unbound_after_loop(x):
    for i in range(lane()):  # noqa: B007 (i is used after the loop)
        x = x + 1.0
    return x + i


def test_name_bound_only_in_a_loop_is_possibly_unbound():
    k = hydra.compile(unbound_after_loop, varying=("x",), backend="numpy")
    with pytest.raises(hydra.CompileError) as e:
        k(np.zeros(4))
    loop = line_of(unbound_after_loop, "for i in range(lane())")
    assert e.value.line == line_of(unbound_after_loop, "return x + i")
    assert e.value.message == (f"'i' may be unbound here: it is assigned only inside the "
                               f"loop at line {loop}, which may run zero times (Python "
                               f"raises UnboundLocalError there)")
    assert e.value.hint == f"give 'i' a value before the loop at line {loop}"


def test_spmd_cell_errors_show_the_cells_own_lines():
    """A %%spmd cell's last expression is its result: an error there shows the cell's
    line and text, never a synthesized ``return``."""
    from hydra.ipython import cell_kernel
    k, args = cell_kernel("x = 1.0\nfor i in range(lane()):\n    x = x + 1.0\ni\n",
                          {"lane": lane}, 4)
    with pytest.raises(hydra.CompileError) as e:
        k(*args)
    assert (e.value.line, e.value.col) == (4, 0)
    assert str(e.value).splitlines()[1:3] == ["    i", "    ^"]
    assert e.value.message.startswith("'i' may be unbound here: it is assigned only inside "
                                      "the loop at line 2")
    k, args = cell_kernel("a = np.zeros(3)\ny = lane() * 2\na[y]", {"lane": lane, "np": np}, 4)
    with pytest.raises(IndexError) as e:
        k(*args)
    assert e.value.lane == 2 and e.value.loc.line == 3
    assert str(e.value).endswith(": index 4 is out of bounds for axis 0 with size 3 "
                                 "(lane 2)\n    a[y]")
    k, args = cell_kernel("y = lane() * 2\ny + 1", {"lane": lane}, 4)
    np.testing.assert_array_equal(k(*args), [1, 3, 5, 7])
