"""Issue 11, item 11: what can be known at ``hydra.compile`` is reported there (recursion,
strings outside print, module-level lists, negative literal sizes), and the messages of
array reductions, containers and array swaps say what to write instead."""

import inspect
import types

import numpy as np
import pytest

import hydra
from hydra import lane


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, ln in enumerate(lines) if text in ln)


def ping(n):
    return 0 if n <= 0 else pong(n - 1)


def pong(n):
    return ping(n) + 1


def through_helpers(x):
    return ping(x)


def test_recursion_through_helpers_fails_at_compile():
    with pytest.raises(hydra.CompileError) as e:
        hydra.compile(through_helpers, varying="x")
    assert e.value.message == "recursive call to ping is not supported"
    assert e.value.hint == "rewrite the recursion as a loop"
    assert e.value.line == line_of(pong, "return ping(n)")


def returns_text(x):
    return "big" if x > 0 else x


def adds_text(x):
    if x > 0:
        return x + "a"
    return 0


def formats_text(x):
    label = f"x={x}"
    print(label)
    return x


@pytest.mark.parametrize("fn, text", [(returns_text, '"big"'), (adds_text, '"a"'),
                                      (formats_text, 'f"x={x}"')])
def test_a_string_outside_print_fails_at_compile(fn, text):
    with pytest.raises(hydra.CompileError) as e:
        hydra.compile(fn, varying="x")
    assert e.value.message == "strings are only supported as arguments of print()"
    assert (e.value.line, e.value.col) == (line_of(fn, text),
                                           inspect.getsource(fn).splitlines()[
                                               line_of(fn, text) - line_of(fn, "def ")].index(
                                               text))


def strings_where_they_belong(x):
    """A docstring."""
    y: "float64" = x * 2.0  # noqa: F821  (a dtype name as an annotation)
    z = np.zeros(2, "float32")
    assert x >= 0, "x must be positive"
    print("x is", x, f"({x:.1f})", sep=" ", end="\n")
    return y + z[0]


def test_strings_in_print_assert_docstring_and_dtypes_are_fine(backend, capsys):
    k = hydra.compile(strings_where_they_belong, varying="x", backend=backend)
    np.testing.assert_array_equal(k(np.array([1.0, 2.0])), [2.0, 4.0])
    assert capsys.readouterr().out == "x is 1.0 (1.0)\nx is 2.0 (2.0)\n"


TABLE = [1.0, 2.0, 3.0]
WEIGHTS = {0: 1.0}


def reads_table(x):
    return TABLE[1] * x


def reads_weights_in_helper(x):
    return weigh(x)


def weigh(x):
    return x * WEIGHTS[0]


def test_a_module_level_list_fails_at_compile_and_suggests_an_array():
    with pytest.raises(hydra.CompileError) as e:
        hydra.compile(reads_table, varying="x")
    assert e.value.message == "'TABLE' is a list; kernels cannot use lists, dicts or sets"
    assert e.value.hint == ("make it a NumPy array at module level (TABLE = np.array(TABLE), "
                            "captured when the kernel compiles), or a tuple")
    assert e.value.line == line_of(reads_table, "TABLE[1]")
    with pytest.raises(hydra.CompileError) as e:
        hydra.compile(reads_weights_in_helper, varying="x")
    assert e.value.message == "'WEIGHTS' is a dict; kernels cannot use lists, dicts or sets"
    assert e.value.line == line_of(weigh, "WEIGHTS[")


config = types.ModuleType("config")
config.SCALES = [2.0, 3.0]


def reads_module_list(x):
    return config.SCALES[0] * x


def test_a_list_reached_through_a_module_says_to_use_an_array(backend):
    k = hydra.compile(reads_module_list, varying="x", backend=backend)
    with pytest.raises(hydra.CompileError) as e:
        k(np.arange(3.0))
    assert e.value.message == "list cannot be indexed in a kernel"
    assert e.value.hint == ("make it a NumPy array at module level (name = np.array([...]), "
                            "captured when the kernel compiles), or a tuple")


def negative_zeros(out):
    z = np.zeros(-4)
    out[lane()] = z.size


def test_a_negative_literal_size_fails_at_compile():
    with pytest.raises(hydra.CompileError) as e:
        hydra.compile(negative_zeros, lanes=2)
    assert e.value.message == "np.zeros(): negative dimension -4"
    assert e.value.line == line_of(negative_zeros, "np.zeros(-4)")


def row_max(row):
    return np.max(row)


def row_sum(row):
    return np.sum(row)


def builtin_min(row):
    return min(row)


def test_numpy_reductions_of_arrays_compute_per_lane(backend):
    """np.max(row) and np.sum(row) are per-lane array operations (SPEC section 8) on
    every backend."""
    rows = np.arange(12.0).reshape(4, 3)
    for fn, want in ((row_max, rows.max(axis=1)), (row_sum, rows.sum(axis=1))):
        k = hydra.compile(fn, varying="row", backend=backend)
        np.testing.assert_array_equal(k(rows), want)


@pytest.mark.parametrize("fn, name, hint", [
    (builtin_min, "min", "write a loop: m = a[0]; for j in range(1, len(a)): m = min(m, a[j]); "
                         "min(x, y) takes numbers, and lanemin(x) reduces x across the lanes"),
])
def test_reductions_of_arrays_say_they_are_not_supported_and_what_to_write(
        backend, fn, name, hint):
    k = hydra.compile(fn, varying="row", backend=backend)
    with pytest.raises(hydra.CompileError) as e:
        k(np.ones((4, 3)))
    assert e.value.message == (
        f"{name}() of an array is not supported: kernels compute with numbers, and operations "
        f"on whole arrays (reductions such as np.{name}(a)) are not supported yet")
    assert e.value.hint == hint


def double_buffer(a, b, steps):
    h = a
    hn = b
    for _ in range(steps):
        hn[lane()] = h[lane()] + 1.0
        h, hn = hn, h
    return h[lane()]


def test_swapping_two_arrays_says_precisely_that_it_is_not_supported(backend):
    k = hydra.compile(double_buffer, lanes=4, backend=backend)
    with pytest.raises(hydra.CompileError) as e:
        k(np.zeros(4), np.zeros(4), 3)
    assert e.value.message == (
        "'h' is the array h on one path and the array hn on another: a name must refer to "
        "one array, because hydra binds array names to arrays when it compiles (swapping "
        "arrays, as in 'h, hn = hn, h' in a loop, is not supported yet)")
    assert e.value.hint.startswith("keep both buffers in one array with a leading axis of 2")
