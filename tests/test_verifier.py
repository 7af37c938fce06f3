"""The verifier's contracts: what each opcode takes (``OPCODES``), the optional
attributes passes hand each other (``ATTRS``), and the mask rule that linearize
guarantees (``Op.needs_mask``), each broken once on IR that verifies before."""

import pytest

from hydra import atomic_add, lane, lanesum
from hydra.frontend import build_function
from hydra.ir import VerifyError, verify
from hydra.ir.core import ATTRS, OPCODES
from hydra.passes import run_pipeline
from hydra.types import FLOAT64, INT64, ArrayType


def histogram(a, x):
    atomic_add(a, x % 4, 1)
    return lanesum(x)


def divide(x, y):
    if x > 0:
        x = x // y
    return x + lane()


def predicated(fn, types, varying):
    return run_pipeline(build_function(fn, types), set(varying), check=True)


def first(fn, opcode):
    return next(op for op in fn.walk() if op.opcode == opcode)


def test_the_pipeline_keeps_every_contract():
    fn = predicated(histogram, [ArrayType(INT64, 1), INT64], ["x"])
    verify(fn, predicated=True)
    assert first(fn, "intrinsic").mask is not None


def test_a_cross_lane_or_writing_intrinsic_without_a_mask_is_rejected():
    fn = predicated(histogram, [ArrayType(INT64, 1), INT64], ["x"])
    atomic = next(op for op in fn.walk() if op.attrs.get("name") == "atomic_add")
    atomic.mask = None
    with pytest.raises(VerifyError, match="without a mask"):
        verify(fn, predicated=True)
    verify(fn)  # structured IR has no masks: only the predicated stage needs them


def test_integer_division_needs_a_mask_and_float_division_does_not():
    fn = predicated(divide, [INT64, INT64], ["x", "y"])
    first(fn, "floordiv").mask = None
    with pytest.raises(VerifyError, match="without a mask"):
        verify(fn, predicated=True)
    fn = predicated(divide, [FLOAT64, FLOAT64], ["x", "y"])
    first(fn, "floordiv").mask = None
    verify(fn, predicated=True)  # IEEE: nan or inf, never an exception


def test_arity_results_and_attributes():
    fn = predicated(divide, [INT64, INT64], ["x", "y"])
    op = first(fn, "floordiv")
    op.operands.append(op.operands[0])
    with pytest.raises(VerifyError, match="3 operands where it takes 2"):
        verify(fn)
    fn = predicated(histogram, [ArrayType(INT64, 1), INT64], ["x"])
    del first(fn, "const").attrs["value"]
    with pytest.raises(VerifyError, match="attribute 'value' missing"):
        verify(fn)
    fn = predicated(divide, [INT64, INT64], ["x", "y"])
    first(fn, "floordiv").attrs["guard"] = True
    with pytest.raises(VerifyError, match="'guard' does not belong on floordiv"):
        verify(fn)
    first(fn, "floordiv").attrs = {"sync": "any op may be a sync point"}
    verify(fn)


def test_loads_take_one_index_per_axis_and_intrinsics_their_arity():
    def get(a, i):
        return a[i, 0]
    fn = predicated(get, [ArrayType(FLOAT64, 2), INT64], ["i"])
    first(fn, "load").operands.pop()
    with pytest.raises(VerifyError, match="2 operands where it takes 3"):
        verify(fn)
    fn = predicated(histogram, [ArrayType(INT64, 1), INT64], ["x"])
    first(fn, "intrinsic").operands.pop()
    with pytest.raises(VerifyError, match="where it takes"):
        verify(fn)


def test_exit_flags_do_not_survive_linearization():
    def find(x):
        i = 0
        while i < 10:
            if i * i > x:
                break
            i += 1
        return i
    fn = predicated(find, [INT64], ["x"])
    first(fn, "while").attrs["exit_flags"] = [0]
    with pytest.raises(VerifyError, match="exit_flags left"):
        verify(fn, predicated=True)


def test_every_optional_attribute_is_documented_with_its_opcodes():
    for name, (opcodes, meaning) in ATTRS.items():
        assert meaning and (opcodes is None or all(o in OPCODES for o in opcodes)), name
    assert all(info.doc for info in OPCODES.values())
    assert all(OPCODES[o].traps for o in ("floordiv", "mod", "load", "store", "check"))


def _loop_loss(x, n):
    while n > 0:
        x, n = x * x, n - 1
    return x


def test_a_tape_pops_what_its_pushes_hold():
    from hydra import grad
    fn = predicated(grad(_loop_loss), [FLOAT64, INT64], ["x", "n"])
    verify(fn, predicated=True)
    pop = first(fn, "tape_pop")
    assert first(fn, "tape_push").mask is not None and pop.mask is not None
    pop.results[0].type = INT64
    with pytest.raises(VerifyError, match=r"pops \['int64'.*from tape 0, which holds"):
        verify(fn, predicated=True)
    pop.attrs["tape"] = 7
    with pytest.raises(VerifyError, match="tape 7 is popped but never pushed"):
        verify(fn, predicated=True)
