"""The Python idioms per-example code is written with (issue 25 item 3): loops over
tuples (``enumerate``, ``zip``), ``sum`` of a tuple or a generator, ``in``, ``is None``
with ``None`` defaults, nested ``def`` and ``lambda`` reading the enclosing variables,
``round``/``divmod``/``pow``, ``np.array`` of per-lane numbers; each against the
function run lane by lane, on every backend; refusals by their messages."""

import numpy as np
import pytest

import hydra
from arrays_oracle import check
from conftest import check_against_oracle
from hydra import atomic_add


def over_tuples(x, w):
    s = 0.0
    for c in (1.0, 2.0, x):
        s += c * x
    for i, c in enumerate(w):
        s += i * c
    for a, b in zip(w, (10, 20, 30)):
        s -= a * b
    return s


def exits_tuple_loops(x, n):
    s = 0.0
    for t in (0.0, 1.0, 2.5):
        if x < t:
            break
        if x == t:
            continue
        s += t
    i = 0
    while i < n:  # an unrolled loop inside a loop: its break is its own
        for t in (1.0, 2.0):
            if x > t:
                break
            s += 0.5
        i += 1
    return s


def test_break_and_continue_in_loops_over_tuples(backend):
    x = np.linspace(-1.0, 4.0, backend.lanes(11))
    check_against_oracle(exits_tuple_loops, [x, 2], varying="x", backend=backend)


def sums(x, n):
    a = sum((x, 2.0 * x, 1.0))
    b = sum(x * i for i in range(4))
    c = sum((x + k for k in range(n)), 0.5)  # a bound known only at the call: a loop
    return a, b, c


def membership(x, k):
    small = k in (1, 2, 3)
    odd = k % 7 not in (0, 2, 4, 6)
    return small, odd, x if k in (5,) else -x


def maybe_scaled(x, scale=None, shift=None):
    if scale is None:
        scale = 2.0
    if shift is not None:
        x = x + shift
    return x * scale


def closures(x, k):
    t = 1.0

    def g(y, z=3.0):
        t = y * z  # g's own t
        return t + k

    f = lambda y: y * t  # noqa: E731  (reads t at the call, as Python does)
    t = 4.0
    return g(x) + f(x) + t


def builtins(x, k):
    q, r = divmod(k, 3)
    return round(x), round(x * 10.0, 1), round(x, -1), q, r, pow(x, 2), pow(k, 2)


@pytest.mark.parametrize("lanes", [1, 17])
def test_loops_over_tuples(backend, lanes):
    x = np.linspace(-2.0, 2.0, backend.lanes(lanes))
    check_against_oracle(over_tuples, [x, (0.5, 1.5, 2.5)], varying="x", backend=backend)


def test_sums(backend):
    x = np.linspace(-1.0, 1.0, backend.lanes(9))
    check_against_oracle(sums, [x, 3], varying="x", backend=backend)


def test_membership(backend):
    k = np.arange(backend.lanes(12)) - 2
    check_against_oracle(membership, [np.arange(len(k)) * 0.5, k], varying=("x", "k"),
                         backend=backend)


def test_none_defaults_are_decided_when_the_kernel_compiles(backend):
    x = np.arange(4.0)
    check_against_oracle(maybe_scaled, [x], varying="x", backend=backend)
    check_against_oracle(maybe_scaled, [x, 3.0, 1.0], varying="x", backend=backend)
    k = hydra.compile(maybe_scaled, varying="x", backend="numpy")
    for args in ((x,), (x, 3.0, 1.0)):  # both tests were decided: no if op is left
        ops = [ln.split(";")[0].split("=")[-1].split() for ln in
               k.dump_ir("ssa", *args).splitlines()[1:]]
        assert ["if"] not in [o[:1] for o in ops] and len(ops) > 3


def test_nested_functions_read_the_enclosing_variables(backend):
    x = np.linspace(0.0, 3.0, backend.lanes(5))
    check_against_oracle(closures, [x, 2.0], varying="x", backend=backend)


def test_builtins(backend):
    x = np.array([-2.5, -1.26, 0.5, 1.5, 2.675, 14.9])
    k = np.array([-4, -1, 0, 2, 5, 7])
    check_against_oracle(builtins, [x, k], varying=("x", "k"), backend=backend)


def to_array(x, y):
    v = np.array([x, y * 2.0, 1.0])
    w = np.array((int(y > 0.0), 3), dtype=np.float32)
    return v @ v, w


def test_np_array_of_per_lane_numbers(be, n):
    rng = np.random.default_rng(0)
    check(to_array, ("x", "y"), [rng.standard_normal(n), rng.standard_normal(n)], n, be)


def histogram2d(x, y, counts):
    atomic_add(counts, (int(x), -1 - int(y)), 1)


def test_atomic_add_with_a_tuple_index(be):
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 3, 50).astype(float), rng.integers(0, 4, 50).astype(float)
    counts = np.zeros((3, 4), np.int64)
    hydra.compile(histogram2d, varying=("x", "y"), backend=be)(x, y, counts)
    want = np.zeros((3, 4), np.int64)
    np.add.at(want, (x.astype(int), -1 - y.astype(int)), 1)
    np.testing.assert_array_equal(counts, want)
    with pytest.raises(IndexError, match="atomic_add index out of bounds for axis 1"):
        hydra.compile(histogram2d, varying=("x", "y"), backend=be)(x, y + 1.0, counts)


# --- refusals -------------------------------------------------------------------------------

def generator_outside_sum(x):
    return max(x * i for i in range(3))


def modular_pow(x):
    return pow(int(x), 3, 5)


def is_between_numbers(x):
    one = 1.0
    return x is one


def writes_enclosing(x):
    t = 0.0

    def g():
        nonlocal t
        t = x
    g()
    return t


@pytest.mark.parametrize("fn,message", [
    (generator_outside_sum, "generator expressions are only supported as the argument of "
                            "sum()"),
    (modular_pow, "pow() with a modulus is not supported"),
    (is_between_numbers, "'is' compares objects; in a kernel it only tests for None "
                         "(x is None)"),
])
def test_refusals(fn, message):
    k = hydra.compile(fn, varying="x", backend="numpy")
    with pytest.raises(hydra.CompileError) as e:
        k(np.arange(3.0))
    assert e.value.message == message


SCALE = 5.0
ROWS = [1.0, 2.0]  # a module-level list: a kernel that reads it is refused


def shadows_a_module_list(x):
    def first(ROWS):  # noqa: N803  (a parameter, not the module's list)
        return ROWS[0]
    return first((x, 1.0))


def test_a_nested_parameter_is_not_the_module_global():
    check_against_oracle(shadows_a_module_list, [np.arange(3.0)], varying="x")


def closure_over_a_partial_name(x):
    if x > 1.0:
        SCALE = 2.0  # noqa: N806  (a local shadowing the module's, on one path)
    g = lambda y: y * SCALE  # noqa: E731
    return g(x)


def test_a_closure_never_reads_a_global_for_a_local_defined_on_some_paths():
    k = hydra.compile(closure_over_a_partial_name, varying="x", backend="numpy")
    with pytest.raises(hydra.CompileError) as e:
        k(np.arange(3.0))
    assert e.value.message.startswith("variable 'SCALE' is defined on only some paths to "
                                      "this use")


def test_nonlocal_is_refused_when_compiling():
    with pytest.raises(hydra.CompileError) as e:
        hydra.compile(writes_enclosing, varying="x", backend="numpy")
    assert e.value.message == "nonlocal is not supported in hydra kernels"
    assert e.value.hint == ("a nested function cannot assign the enclosing function's "
                            "variables; return the value instead")
