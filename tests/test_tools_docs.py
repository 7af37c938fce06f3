"""The guide's generated parts are current."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_intrinsics_table_in_guide_is_current():
    out = subprocess.run([sys.executable, str(ROOT / "docs" / "regen.py"), "--check"],
                         capture_output=True, text=True)
    assert out.returncode == 0, "docs/guide.md is stale: run python docs/regen.py"


def test_guide_lists_every_intrinsic():
    from hydra.intrinsics import INTRINSICS
    text = (ROOT / "docs" / "guide.md").read_text()
    for name in INTRINSICS:
        assert f"`{name}(" in text


def test_the_model_walkthrough_runs(tmp_path):
    """Section 14's code runs as written (its asserts compare hydra with the function
    run example by example); hydra reads kernels' source, so it runs from a file."""
    import runpy
    text = (ROOT / "docs" / "guide.md").read_text()
    block = text.split("<!-- walkthrough:start -->\n```python\n")[1].split("```\n")[0]
    path = tmp_path / "walkthrough.py"
    path.write_text(block)
    runpy.run_path(str(path), run_name="walkthrough")


def test_guide_lists_every_numpy_function_kernels_take():
    """The generated table of NumPy on per-lane arrays names every spelling the frontend
    takes, with notes for each function hydra.arraylib added."""
    from hydra.arraylib import PER_LANE as MORE
    from hydra.frontend.arrayops import METHODS, ARRAY_FUNCTIONS
    from hydra.numpydoc import NOTES
    text = (ROOT / "docs" / "guide.md").read_text()
    table = text[text.index("<!-- numpy:start -->"):text.index("<!-- numpy:end -->")]
    for name in ARRAY_FUNCTIONS:
        assert f"`{name}`" in table or f"`np.{name}`" in table, name
    for name in METHODS - {"sort", "flatten", "copy"}:
        assert f"`a.{name}()`" in table, name
    assert all(NOTES.get(name) for name in MORE), "every new function has its notes"
