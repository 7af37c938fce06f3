"""The operation registry (``hydra.registry``): every operation the frontend accepts has
one complete record, and the facts a record holds agree with the code that uses them
(until that code reads the record itself)."""

import numpy as np
import pytest

from hydra import batching, nn
from hydra.arraylib import SPELLINGS
from hydra import random as hydra_random
from hydra.executor.rules import HOST_RULES
from hydra.frontend import arrayops
from hydra.frontend.calls import MATH_FUNCTIONS
from hydra.intrinsics import INTRINSICS
from hydra.ir.core import Memory
from hydra.ir.core import LANE_ARRAY_FNS, OPCODES
from hydra.registry import RECORDS, Adjoint, AdjointState, monoid, record
from hydra.types import BOOL, FLOAT64, INT64, WEAK_FLOAT, WEAK_INT, ScalarType


from hydra.grad.arrays import EMITTED, FUNCTIONAL  # noqa: E402

#: the operations still waiting for an adjoint rule (docs/gradients.md lists them: none
#: today); every operation has a rule or a declared reason why no gradient flows through it
NOT_YET: set = set()


def test_every_operation_has_an_adjoint_rule_or_a_reason():
    missing = {key for key in _accepted()
               if record(*key).adjoint.state is AdjointState.MISSING}
    assert missing == NOT_YET


def _accepted() -> list[tuple[str, str]]:
    """(kind, name) of every operation the frontend can put into a kernel."""
    aliases = {**arrayops.ALIASES, **SPELLINGS}  # np.ravel is a reshape, ...
    array_names = {aliases.get(n, n) for n in (
        *arrayops.ARRAY_FUNCTIONS, *arrayops.METHODS, *batching.MATH_UFUNCS,
        *batching.UFUNCS)}
    array_names |= {"getitem", "astype", "full", "copy", *LANE_ARRAY_FNS}
    array_names |= {getattr(nn, n).__hydra_array_op__[0] for n in ("conv2d", "max_pool2d",
                                                                  "avg_pool2d")}
    array_names |= EMITTED | FUNCTIONAL  # what hydra.grad emits (layers' adjoints, stores)
    return sorted(
        [("op", o) for o in OPCODES]
        + [("math", fn) for fn, _, _ in MATH_FUNCTIONS.values()] + [("math", "rint")]
        + [("array", n) for n in array_names]
        + [("intrinsic", n) for n in INTRINSICS]
        + [("layer", n) for n in ("relu", "sigmoid", "softmax", "log_softmax", "conv2d",
                                  "max_pool2d", "avg_pool2d")]
        + [("random", n) for n in hydra_random.FUNCTIONS])


@pytest.mark.parametrize("kind,name", _accepted())
def test_every_accepted_operation_has_a_complete_record(kind, name):
    r = record(kind, name)
    assert r.doc.strip(), "a record says what the operation does"
    assert isinstance(r.adjoint, Adjoint)
    if r.adjoint.state is AdjointState.RULE:
        assert callable(r.adjoint.rule)
    else:
        assert r.adjoint.reason, "no rule: the record says why"
    if kind == "op":  # the reference interpreter defines opcodes: one host rule each
        assert name in HOST_RULES or OPCODES[name].terminator
    elif kind == "layer" and not hasattr(getattr(nn, name), "__hydra_array_op__"):
        assert r.definition is getattr(nn, name)  # compiled from its body
    elif kind == "random":
        assert r.definition is getattr(hydra_random, name)  # compiled from its body
        assert r.adjoint.state is AdjointState.NOT_DIFFERENTIABLE
    else:
        assert callable(r.definition) and callable(r.type_rule)
    if kind == "array" and name not in LANE_ARRAY_FNS:
        assert callable(r.batching)
    compiled_from_body = r.type_rule is None and kind in ("layer", "random")
    assert compiled_from_body or isinstance(r.memory, Memory), \
        "a record declares what its operation reads and writes"


def test_no_record_without_an_operation():
    assert set(RECORDS) <= set(_accepted())


def test_the_frontend_spellings_lead_to_one_record():
    assert record("array", "max").aliases == ("amax",)
    assert "subtract" in record("array", "sub").aliases
    assert record("array", "reshape").aliases == ("ravel", "squeeze", "expand_dims")
    assert set(record("array", "getitem").aliases) == {"flip", "fliplr", "flipud"}
    assert record("array", "norm").aliases == ("np.linalg.norm",)
    with pytest.raises(KeyError, match="no record for the array operation 'fft'"):
        record("array", "fft")


def test_reductions_declare_their_monoid():
    x = np.array([[3.0, -1.0, 2.0], [0.5, 4.0, -2.0]])
    for name in ("sum", "prod", "max", "min", "any", "all"):
        m = record("array", name).monoid
        assert m is not None, name
        np.testing.assert_array_equal(m.ufunc.reduce(x, axis=-1),
                                      record("array", name).definition(x, axis=-1))
    for name in ("mean", "argmax", "argmin"):  # reductions that are no monoid
        assert record("array", name).monoid is None


def test_lane_reductions_agree_with_the_intrinsics_references():
    x = np.array([3.0, -1.0, 2.0, 7.0])
    mask = np.array([True, False, True, True])

    def fail(kind, message, lane):
        raise AssertionError(message)
    for name in ("lanesum", "laneprod", "lanemin", "lanemax", "laneany", "laneall"):
        m = monoid(name)
        active = x[mask].astype(bool) if m.ufunc in (np.logical_or, np.logical_and) \
            else x[mask]
        expected = INTRINSICS[name].reference([x], mask, len(x), fail)
        assert m.ufunc.reduce(active) == expected, name
        if m.identity is not None:
            assert m.ufunc.reduce(active[:0], initial=m.identity) == m.identity


@pytest.mark.parametrize("fn,types,expected", [
    ("sqrt", [INT64], FLOAT64), ("sqrt", [WEAK_INT], WEAK_FLOAT),
    ("sqrt", [ScalarType("float32")], ScalarType("float32")),
    ("atan2", [ScalarType("float32"), FLOAT64], FLOAT64), ("isnan", [FLOAT64], BOOL)])
def test_math_type_rules(fn, types, expected):
    assert record("math", fn).type_rule(types) == expected


def test_array_records_run_their_definitions():
    from hydra.types import ArrayType
    t = ArrayType(FLOAT64, 2, (2, 3))
    r = record("array", "sum")
    assert r.type_rule([t], {"axis": 1, "keepdims": False}) == ArrayType(FLOAT64, 1, (2,))
    out = r.batching(r.definition, [np.ones((4, 2, 3))], [True], 4,
                     ArrayType(FLOAT64, 1, (2,)), {"axis": 1, "keepdims": False})
    np.testing.assert_array_equal(out, np.full((4, 2), 3.0))


@pytest.mark.parametrize("fn,dtype,expected", [
    ("lanesum", BOOL, INT64), ("lanesum", FLOAT64, FLOAT64), ("laneprod", BOOL, INT64),
    ("lanemax", BOOL, BOOL), ("laneany", FLOAT64, BOOL), ("shuffle", FLOAT64, FLOAT64)])
def test_a_lane_intrinsic_of_an_array_is_typed_elementwise_by_its_record(fn, dtype, expected):
    # the record the frontend types the op by: the intrinsic's rule on the elements, the
    # array's shape (bools summed as int64, as lanesum of numbers counts them)
    from hydra.types import ArrayType
    rest = [INT64] if fn == "shuffle" else []
    got = record("array", fn).type_rule([ArrayType(dtype, 2, (2, 3)), *rest])
    assert got == ArrayType(expected, 2, (2, 3))


def test_integer_and_step_operations_carry_no_gradient():
    for key in (("op", "lt"), ("array", "floor"), ("math", "isnan"), ("intrinsic", "lane"),
                ("array", "argmax")):
        assert record(*key).adjoint.state is AdjointState.NOT_DIFFERENTIABLE, key
    assert record("op", "add").adjoint.state is AdjointState.RULE
    assert record("math", "atan2").adjoint.state is AdjointState.RULE
    assert record("array", "matmul").adjoint.state is AdjointState.RULE
    assert record("array", "getitem").adjoint.state is AdjointState.RULE
    assert record("array", "prod").adjoint.state is AdjointState.RULE
