"""House rules that CI watches: every module has a docstring and stays small, every
pass is a module with a docstring, and the pipeline names them all."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted((ROOT / "hydra").rglob("*.py"))
MAX_LINES = 700


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_has_docstring_and_fits_budget(path):
    text = path.read_text()
    assert ast.get_docstring(ast.parse(text)), f"{path} has no module docstring"
    assert text.count("\n") <= MAX_LINES, f"{path} is over {MAX_LINES} lines: split it"


def test_every_pass_module_is_in_the_pipeline():
    from hydra.passes import OPTIONAL, PIPELINE
    run_by_pipeline = {fn.__module__.rsplit(".", 1)[1] for _, fn, _ in PIPELINE}
    run_by_pipeline |= {fn.__module__.rsplit(".", 1)[1] for _, fn in OPTIONAL.values()}
    modules = {p.stem for p in (ROOT / "hydra" / "passes").glob("*.py")} - {"__init__"}
    assert modules == run_by_pipeline
