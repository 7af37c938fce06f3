"""Golden dump-ir tests: the IR after each pass, for each situation of
``golden/programs.py``, must match ``golden/<situation>.ir`` (rewrite them with
``python tests/golden/regen.py`` and review the diff).  A few structural facts
per situation are checked as well, so that a regenerated file that went wrong does not
pass unnoticed."""

import pathlib
import sys

import numpy as np
import pytest

import hydra

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "golden"))

from programs import SITUATIONS, STEP_SITUATIONS  # noqa: E402
from regen import dump, dump_steps, path_of  # noqa: E402

from hydra.frontend import build_function  # noqa: E402
from hydra.passes import PASS_NAMES, run_pipeline  # noqa: E402


def expected(situation: str, pass_name: str) -> str:
    text = path_of(situation).read_text()
    head = f"=== after {pass_name} ===\n"
    assert head in text, f"{path_of(situation)} has no section {head.strip()}"
    body = text.split(head, 1)[1]
    return body.split("\n=== after ", 1)[0].rstrip("\n") + "\n"


@pytest.mark.parametrize("pass_name", PASS_NAMES)
@pytest.mark.parametrize("situation", sorted(SITUATIONS))
def test_golden(situation, pass_name):
    assert dump(situation, pass_name) == expected(situation, pass_name), (
        f"IR of {situation} after {pass_name} changed; if on purpose, run "
        f"python tests/golden/regen.py and review the diff")


@pytest.mark.parametrize("situation", sorted(STEP_SITUATIONS))
def test_golden_steps(situation):
    assert dump_steps(situation) == path_of(situation).read_text(), (
        f"the planned steps of {situation} changed; if on purpose, run "
        f"python tests/golden/regen.py and review the diff")


def test_steps_name_what_each_step_runs():
    text = path_of("steps_rnn").read_text()
    assert "body of while" in text and "(products._gemm)" in text and "fused step" in text
    assert "lanesum" in path_of("steps_mlp").read_text()


def final_ir(situation):
    fn, types, varying = SITUATIONS[situation]
    return run_pipeline(build_function(fn, list(types)), set(varying), check=True)


def ops(fn, opcode):
    return [op for op in fn.walk() if op.opcode == opcode]


def test_predicated_ir_branches_only_on_uniform_values():
    for situation in SITUATIONS:
        fn = final_ir(situation)
        for op in ops(fn, "if"):
            assert not op.operands[0].varying, f"{situation}: if on a varying value"


def test_uniform_if_stays_a_branch_and_varying_if_does_not():
    assert ops(final_ir("uniform_if_stays_branch"), "if")
    fn = final_ir("varying_if")
    assert all(op.attrs.get("guard") for op in ops(fn, "if"))
    assert ops(fn, "select")


def test_temporal_divergence_makes_the_live_out_varying():
    fn = final_ir("temporal_divergence")
    (loop,) = ops(fn, "while")
    assert loop.attrs.get("varying")
    assert fn.body.terminator.operands[0].varying


def test_sync_points():
    cross = final_ir("sync_point_cross_lane")
    reasons = [op.attrs.get("sync") for op in cross.walk() if op.attrs.get("sync")]
    assert len(reasons) == 2  # lanesum and print
    shared = final_ir("sync_point_shared_store")
    assert all(op.attrs.get("sync") for op in ops(shared, "load") + ops(shared, "store"))
    private = final_ir("lane_private_store_no_sync")
    assert not any(op.attrs.get("sync") for op in private.walk())


def _store_then_print(x, out):
    out[hydra.lane()] = x  # lane-private, but the print reads every lane's element
    print(out)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_a_print_of_a_shared_array_syncs_the_lane_private_store(backend, capfd):
    """``print`` is no indexed access (the analysis once read its operand list as a
    load's and failed): it reads all lanes' stores, so the store before it syncs."""
    from hydra.types import FLOAT64, ArrayType
    fn = run_pipeline(build_function(_store_then_print,
                                     [FLOAT64, ArrayType(FLOAT64, 1, (3,))]), {"x"}, check=True)
    assert [op.attrs.get("sync") for op in ops(fn, "store")] == [
        "store of out at this lane's own index, which other lanes may read"]
    out = np.zeros(3)
    hydra.compile(_store_then_print, varying=("x",), backend=backend)(np.arange(3.0), out)
    assert capfd.readouterr().out == "[0. 1. 2.]\n" * 3
    assert out.tolist() == [0.0, 1.0, 2.0]


def _stores_then_reads(out, x):
    out[hydra.lane(), 0] = x  # lane-private
    out[hydra.lane()] = out[hydra.lane()] * 2.0  # lane-private, a sub-array
    return out[(hydra.lane() + 1) % hydra.nlanes()].sum() + out.sum()


def test_sync_points_of_array_operations_on_a_shared_array():
    """Array operations that read a shared array the kernel writes sync where they reach
    other lanes' rows (Dask's chunks would read stale rows); the lane-private scalar and
    sub-array stores need none: an array operation runs on the host for all lanes at
    once, after every earlier store."""
    from hydra.types import FLOAT64, ArrayType
    fn = run_pipeline(build_function(_stores_then_reads,
                                     [ArrayType(FLOAT64, 2, (8, 3)), FLOAT64]), {"x"},
                      check=True)
    synced = [op for op in fn.walk() if op.attrs.get("sync")]
    assert not any(op.attrs.get("sync") for op in ops(fn, "store") + ops(fn, "array_store"))
    assert sorted(op.attrs["fn"] for op in synced) == ["getitem", "sum"]
    assert all("read of out may read another lane's store" == op.attrs["sync"]
               for op in synced)
