"""Rewrite the golden dump-ir files: ``python tests/golden/regen.py``.

One file per situation of ``programs.SITUATIONS``, with the IR printed after each pass
of ``hydra.passes.PIPELINE``, and per situation of ``programs.STEP_SITUATIONS`` the cpu
backend's planned steps (``dump-ir --stage steps``).  Review the diff before committing it."""

from __future__ import annotations

import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from hydra.frontend import build_function  # noqa: E402
from hydra.ir import print_function  # noqa: E402
from hydra.passes import PASS_NAMES, run_pipeline  # noqa: E402
from programs import SITUATIONS, STEP_SITUATIONS  # noqa: E402


def dump(situation: str, pass_name: str) -> str:
    """The IR of ``situation`` after ``pass_name``, as the golden file holds it."""
    fn, types, varying = SITUATIONS[situation]
    ir = run_pipeline(build_function(fn, list(types)), set(varying), stop_after=pass_name,
                      check=True)
    return print_function(ir, show_loc=True)


def render(situation: str) -> str:
    """The whole golden file of ``situation``: one section per pass."""
    return "".join(f"=== after {p} ===\n{dump(situation, p)}\n" for p in PASS_NAMES)


def path_of(situation: str) -> pathlib.Path:
    return HERE / f"{situation}.ir" if situation in SITUATIONS else HERE / f"{situation}.steps"


def dump_steps(situation: str) -> str:
    """The cpu backend's planned steps of an array kernel (``dump-ir --stage steps``)."""
    import hydra
    fn, args, varying = STEP_SITUATIONS[situation]
    return hydra.compile(fn, varying=varying, backend="cpu").dump_ir("steps", *args)


def main() -> None:
    for situation in SITUATIONS:
        path_of(situation).write_text(render(situation))
        print("wrote", path_of(situation).relative_to(HERE.parent.parent))
    for situation in STEP_SITUATIONS:
        path_of(situation).write_text(dump_steps(situation))
        print("wrote", path_of(situation).relative_to(HERE.parent.parent))


if __name__ == "__main__":
    main()
