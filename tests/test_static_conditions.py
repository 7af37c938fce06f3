"""Conditions known when the kernel compiles (``x.ndim == 2``, ``len(W) > 1``, a
module-level flag): the ``if`` keeps only the arm Python runs, so the other arm may hold
code that does not type-check for these shapes (per-example code written for several
ranks, debug branches), as Numba prunes dead branches and JAX traces Python ifs. Every
program is checked against the per-lane oracle and across backends."""

import numpy as np
import pytest
from arrays_oracle import check
from conftest import check_against_oracle

import hydra

DEBUG = False
SCALE = 3


def rank_polymorphic(x):
    if x.ndim == 1:
        return x.sum()
    return x.sum(axis=1).max()


@pytest.mark.parametrize("shape", [(5,), (2, 5)])
def test_an_arm_for_another_rank_is_not_compiled(be, n, shape):
    x = np.random.default_rng(0).standard_normal((n, *shape))
    check(rank_polymorphic, ("x",), [x], n, be)


def shape_picks_a_value(x, W):
    y = W @ x if W.shape[1] == len(x) else x       # the other arm has the other shape
    if not DEBUG and len(W) > 1:
        y = y * 2.0
    else:
        y = x[0, 0, 0]                                # never compiled: x is 1-d
    return y


@pytest.mark.parametrize("cols", [4, 3])
def test_conditional_expressions_and_not_and_or_fold(be, n, cols):
    r = np.random.default_rng(1)
    check(shape_picks_a_value, ("x",), [r.standard_normal((n, 4)), r.standard_normal((3, cols))],
          n, be)


def returns_and_breaks(x, m):
    s = 0.0
    for i in range(m):
        if SCALE > 2:
            s += x * i
            if SCALE == 3:
                continue
        s = -1.0
    if SCALE * 2 == 6:
        return s
    return s[0, 0]                   # never compiled: s is a float


def breaks_at_once(x, m):
    s = x
    for i in range(m):
        s += i
        if 2 < SCALE < 4:
            break
        s = s[0]                       # never compiled
    return s


def test_return_break_continue_in_a_static_arm(backend):
    x = np.linspace(-1, 1, backend.lanes(17))
    check_against_oracle(returns_and_breaks, (x, 4), varying="x", backend=backend)
    check_against_oracle(breaks_at_once, (x, 4), varying="x", backend=backend)


def static_then_dynamic(x):
    if DEBUG:
        return x[0]                    # never compiled: x is a float
    if x > 0:        # a varying condition after a static one still masks
        return x * 2
    return -x


def test_a_varying_if_after_a_static_one_still_diverges(backend):
    check_against_oracle(static_then_dynamic, (np.linspace(-2, 2, backend.lanes(9)),),
                         varying="x", backend=backend)


def integer_constants_compare_by_value(x):
    big = 2**63                        # only uint64 holds it
    flag = np.uint64(big) > -1         # exact, as NumPy 2 compares
    return x + 1 if flag and np.int8(-1) < 0 else x


def test_integer_constant_comparisons_are_exact(backend):
    check_against_oracle(integer_constants_compare_by_value, (np.arange(4.0),), varying="x",
                         backend=backend)


def only_in_a_dead_arm(x):
    if DEBUG:
        y = x * 2
    return y


def test_a_name_only_a_dead_arm_assigns_is_not_defined():
    with pytest.raises(hydra.CompileError, match="name 'y' is not defined") as e:
        hydra.compile(only_in_a_dead_arm, varying="x", backend="numpy")(np.ones(3))
    assert e.value.line == only_in_a_dead_arm.__code__.co_firstlineno + 3


def dynamic_arms_must_agree(x, k):
    if k > 1:                          # k is an argument: not known when compiling
        return x.sum()
    return x


def test_a_uniform_argument_is_not_a_static_condition():
    with pytest.raises(hydra.CompileError, match="on one path .* and a float64 on another"):
        hydra.compile(dynamic_arms_must_agree, varying="x", backend="numpy")(np.ones((2, 3)), 2)


def test_dump_ir_shows_no_if_for_a_static_condition():
    k = hydra.compile(rank_polymorphic, varying="x", backend="numpy")
    ir = k.dump_ir("ssa", np.ones((2, 5)))
    assert " if " not in ir and "fn='sum'" in ir


def scaled(x, size=None, dtype=np.float64):
    if size is None:                   # a helper's default: known when compiling
        return dtype(x * 2)
    out = np.zeros(size, dtype)
    for j in range(size):
        out[j] = x + j
    return out


def is_and_is_not(x):
    a = scaled(x)
    b = scaled(x, 3, np.float32)       # the other arm
    c = x if dtype_is_float32(np.float32) and x is not None else -x
    return a, b, c


def dtype_is_float32(dtype):
    return dtype is np.float32


def test_is_and_is_not_fold_compile_time_objects(backend):
    check_against_oracle(is_and_is_not, (np.linspace(-1, 1, backend.lanes(5)),), varying="x",
                         backend=backend)


def test_is_between_two_numbers_is_refused():
    with pytest.raises(hydra.CompileError,
                       match="'is' compares objects; in a kernel it only tests for None"):
        hydra.compile(lambda x: x is x, varying="x", backend="numpy")(np.ones(3))
