"""Per-lane array shapes that depend on a loop counter (SPEC section 8): hydra unrolls
the loop (hydra/frontend/unroll.py), or says why it cannot."""

import numpy as np
import pytest

import hydra

BACKENDS = ("numpy", "cpu")
LANES = (1, 3, 17)


def run(fn, lanes, backend, *uniform):
    """The kernel on lanes rows of x, against fn run row by row in Python."""
    x = np.random.default_rng(lanes).standard_normal((lanes, 8))
    got = hydra.compile(fn, varying=("x",), backend=backend)(x, *uniform)
    want = np.stack([np.asarray(fn(r, *uniform), dtype=float) for r in x])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def prefix_slices(x):
    acc = np.zeros(4)
    for i in range(4):
        acc[: i + 1] += x[i]
        acc[i:] = acc[i:] * 0.5 + x[: 4 - i].sum()
    return acc


def counter_reshape(x):
    total = 0.0
    for i in range(1, 4):
        m = x[: 2 * i].reshape(i, 2)
        total += (m * m).sum() + m.shape[0]
    return total


def counter_constructor(x):
    out = 0.0
    for i in range(2, 8, 2):
        z = np.zeros(i + 1)
        z[:i] = x[:i]
        out = out * 0.5 + np.ones(i).sum() * z.sum()
    return out


def bound_from_argument(x, n):
    acc = np.zeros(8)
    for i in range(n):
        acc[: i + 1] += x[: i + 1]
    return acc


def nested(x):
    acc = np.zeros(6)
    for i in range(3):
        for j in range(i + 1):
            acc[j : i + j + 1] += x[: i + 1] * (j + 1)
    return acc


def zero_trip(x, n):
    i = -5
    acc = np.zeros(3)
    for i in range(n, 2):
        acc[:i] += x[:i]
    return acc + i


def counter_after(x):
    acc = np.zeros(5)
    for k in range(0, 5, 2):
        acc[: k + 1] += x[k]
    return acc * k


def in_a_branch(x, n):
    acc = np.zeros(4)
    for i in range(n):
        if x[i] > 0:
            acc[: i + 1] += x[i]
    return acc


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("fn", [prefix_slices, counter_reshape, counter_constructor,
                                nested, counter_after])
def test_counter_shapes(fn, lanes, backend):
    run(fn, lanes, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("lanes", LANES)
def test_bounds_from_uniform_arguments(lanes, backend):
    run(bound_from_argument, lanes, backend, 5)
    run(bound_from_argument, lanes, backend, 2)  # another trip count: another kernel
    run(in_a_branch, lanes, backend, 3)
    run(zero_trip, lanes, backend, 1)  # one trip: i ends as 1
    run(zero_trip, lanes, backend, 4)  # no trip: i keeps -5


def test_zero_trip_leaves_the_counter_unbound():
    def f(x):
        acc = np.zeros(2)
        for i in range(0):
            acc[:i] += x[0]
        return acc + i
    with pytest.raises(hydra.CompileError, match="'i'"):
        hydra.compile(f, varying=("x",), backend="numpy")(np.ones((3, 2)))


def test_loops_without_counter_shapes_are_not_unrolled():
    def f(x):
        acc = np.zeros(4)
        for i in range(4):
            acc[:2] += x[i]
        return acc
    k = hydra.compile(f, varying=("x",), backend="numpy")
    x = np.ones((3, 4))
    np.testing.assert_array_equal(k(x), np.stack([f(r) for r in x]))
    assert "while" in k.dump_ir("ssa", x)


def test_unrolled_loops_have_no_while():
    k = hydra.compile(prefix_slices, varying=("x",), backend="numpy")
    assert "while" not in k.dump_ir("ssa", np.ones((3, 8)))


def with_break(x):
    acc = np.zeros(4)
    for i in range(4):
        if x[i] > 10:
            break
        acc[: i + 1] += x[i]
    return acc


def varying_bound(x, n):
    acc = np.zeros(4)
    for i in range(n):
        acc[: i + 1] += x[i]
    return acc


def too_many_trips(x):
    acc = np.zeros(4)
    for i in range(65):
        acc[: i % 4] += x[0]
    return acc


def varying_bound_kernel(backend):
    k = hydra.compile(varying_bound, varying=("x", "n"), backend=backend)
    return lambda x: k(x, np.full(len(x), 2))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, why, line", [
    (with_break, r"loop counter `i` of a loop hydra cannot unroll \(a break in its body\)",
     with_break.__code__.co_firstlineno + 5),
    (too_many_trips, r"loop counter `i` of a loop hydra cannot unroll \(it runs 65 times",
     too_many_trips.__code__.co_firstlineno + 3),
    (varying_bound, r"loop counter `i` of a loop hydra cannot unroll \(its bounds are not "
                    r"constants", varying_bound.__code__.co_firstlineno + 3),
])
def test_loops_that_cannot_be_unrolled(fn, why, line, backend):
    if fn is varying_bound:
        kernel = varying_bound_kernel(backend)
    else:
        kernel = hydra.compile(fn, varying=("x",), backend=backend)
    with pytest.raises(hydra.CompileError, match=why) as e:
        kernel(np.ones((3, 8)))
    assert f"{__file__}:{line}" in str(e.value)


def test_constructor_sized_by_a_counter_of_a_loop_with_continue():
    def f(x):
        acc = 0.0
        for i in range(3):
            if x[i] > 10:
                continue
            acc += np.zeros(i + 1).sum()
        return acc
    with pytest.raises(hydra.CompileError, match=r"the loop counter `i` of a loop hydra "
                                                 r"cannot unroll \(a continue in its body\)"):
        hydra.compile(f, varying=("x",), backend="numpy")(np.ones((3, 8)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_uniform_int_shape_inside_a_loop_body(backend):
    def f(x, k):
        acc = np.zeros(4)
        for j in range(x.shape[0] // 4):
            if x[j] > 0:
                acc[:k] += x[j]
        return acc
    x = np.random.default_rng(1).standard_normal((5, 8))
    got = hydra.compile(f, varying=("x",), backend=backend)(x, 3)
    np.testing.assert_array_equal(got, np.stack([f(r, 3) for r in x]))


def test_a_zero_step_is_still_the_loops_error():
    def f(x):
        acc = np.zeros(4)
        for i in range(0, 4, 0):
            acc[: i + 1] += x[0]
        return acc
    with pytest.raises(hydra.CompileError, match="range\\(\\) arg 3 must not be zero"):
        hydra.compile(f, varying=("x",), backend="numpy")(np.ones((3, 8)))
