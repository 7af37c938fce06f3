"""Every error of SPEC section 6, by its type and message: compile errors at
``hydra.compile`` time with file, line, column and caret; call errors; run-time errors
naming the lane."""

import inspect

import numpy as np
import pytest

import hydra
from hydra import lane


def line_of(fn, text: str) -> int:
    """The file line number of the first line of ``fn`` that contains ``text``."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, ln in enumerate(lines) if text in ln)


# --- compile time ----------------------------------------------------------------------

def uses_try(x):
    try:
        return x
    except ValueError:
        return 0


def uses_set(x):
    y = {x, x}
    return y


def uses_with(x):
    with open("f"):
        pass
    return x


def uses_string(x):
    s = "text"
    return s


@pytest.mark.parametrize("fn,text,what", [
    (uses_try, "try:", "try/except"),
    (uses_set, "{x, x}", "sets"),
    (uses_with, "with open", "with"),
])
def test_unsupported_syntax_fails_at_compile_time(fn, text, what):
    with pytest.raises(hydra.CompileError) as info:
        hydra.compile(fn, varying="x", backend="numpy")  # no call: compile alone raises
    e = info.value
    line = line_of(fn, text)
    src = inspect.getsourcelines(fn)[0][line - line_of(fn, "def ")]
    col = src.index(text.split()[0][0]) if text != "{x, x}" else src.index("{")
    assert what in e.message and "not supported" in e.message
    assert e.file == __file__ and e.line == line and e.col == col
    rendered = str(e).splitlines()
    assert rendered[0].startswith(f"{__file__}:{line}:{col + 1}: ")
    assert rendered[1].strip() == src.strip()
    assert rendered[2] == "    " + " " * col + "^"


def test_strings_outside_print_are_compile_errors():
    with pytest.raises(hydra.CompileError) as e:
        hydra.compile(uses_string, varying="x", backend="numpy")
    assert e.value.message == "strings are only supported as arguments of print()"
    assert e.value.line == line_of(uses_string, '"text"')


def conflict(x):
    if x > 0:
        y = 1
    else:
        y = (1, 2)
    return y


def some_paths(x):
    if x > 0:
        y = 1
    return y


def test_type_conflict_names_the_variable_and_both_lines():
    k = hydra.compile(conflict, varying="x", backend="numpy")
    with pytest.raises(hydra.CompileError) as info:
        k(np.arange(3))
    msg = info.value.message
    assert "'y'" in msg and "tuple" in msg
    assert f"line {line_of(conflict, 'y = 1')}" in msg
    assert info.value.line == line_of(conflict, "y = (1, 2)")


def test_name_defined_on_some_paths():
    k = hydra.compile(some_paths, varying="x", backend="numpy")
    with pytest.raises(hydra.CompileError) as info:
        k(np.arange(3))
    msg = info.value.message
    assert "'y'" in msg and "only some paths" in msg
    assert f"line {line_of(some_paths, 'y = 1')}" in msg
    assert info.value.line == line_of(some_paths, "return y")


def recursive(x):
    if x <= 0:
        return 0
    return recursive(x - 1) + 1


def test_recursion_is_a_compile_error():
    with pytest.raises(hydra.CompileError) as info:
        hydra.compile(recursive, varying="x", backend="numpy")
    assert info.value.message == "recursive call to recursive is not supported"
    assert info.value.line == line_of(recursive, "return recursive")


# --- calls -----------------------------------------------------------------------------

def add(a, b):
    return a + b


def test_wrong_argument_count(backend):
    k = hydra.compile(add, varying="a", backend=backend)
    with pytest.raises(TypeError, match=r"add\(\) missing 1 required positional argument: 'b'"):
        k(np.arange(3))
    with pytest.raises(TypeError, match=r"add\(\) takes 2 positional arguments but 3 were "
                                        r"given"):
        k(np.arange(3), 1, 2)


def test_varying_argument_of_the_wrong_length(backend):
    k = hydra.compile(add, lanes=4, varying=("a", "b"), backend=backend)
    with pytest.raises(ValueError, match="'b' has length 3"):
        k(np.arange(4), np.arange(3))
    k = hydra.compile(add, varying=("a", "b"), backend=backend)
    with pytest.raises(ValueError, match="'a' has 4, 'b' has 5"):
        k(np.arange(4), np.arange(5))
    with pytest.raises(ValueError, match="'a'"):
        k(3, np.arange(5))


@pytest.mark.parametrize("bad,shown", [({1, 2}, "set"), (object(), "object"),
                                       ({1: 2.0}, "dict with the key 1"),
                                       (np.array(["a"]), "<U1"), (1j, "complex")])
def test_unsupported_argument_type(backend, bad, shown):
    k = hydra.compile(add, varying="a", backend=backend)
    with pytest.raises(TypeError, match=f"argument 'b'.*{shown}"):
        k(np.arange(3), bad)


# --- run time --------------------------------------------------------------------------

def load(a, i):
    return a[i]


def store(out, i):
    out[i] = 1.0


def test_out_of_bounds_names_lane_and_index(backend):
    k = hydra.compile(load, varying="i", backend=backend)
    with pytest.raises(IndexError, match=r"index 5 is out of bounds.*size 3 \(lane 1\)") as info:
        k(np.arange(3.0), np.array([0, 5, 7]))
    assert isinstance(info.value, hydra.HydraError)
    assert info.value.lane == 1
    with pytest.raises(IndexError, match=r"index -4 .*\(lane 2\)"):
        k(np.arange(3.0), np.array([0, -3, -4]))
    np.testing.assert_array_equal(k(np.arange(3.0), np.array([-1, -3, 2])), [2.0, 0.0, 2.0])


def test_failing_store_leaves_the_callers_array_alone(backend):
    out = np.zeros(4)
    k = hydra.compile(store, varying="i", backend=backend)
    with pytest.raises(IndexError, match=r"index 9 .*\(lane 2\)"):
        k(out, np.array([0, 1, 9]))
    np.testing.assert_array_equal(out, np.zeros(4))


def guarded_divide(x, y):
    r = 0
    if y != 0:
        r = x // y + x % y
    return r


def test_integer_division_by_zero_names_the_lane(backend):
    k = hydra.compile(lambda x, y: x // y, varying=("x", "y"), backend=backend)
    with pytest.raises(ZeroDivisionError, match=r"division by zero \(lane 2\)"):
        k(np.arange(4), np.array([1, 2, 0, 0]))
    k = hydra.compile(lambda x, y: x % y, varying=("x", "y"), backend=backend)
    with pytest.raises(ZeroDivisionError, match=r"modulo by zero \(lane 0\)"):
        k(np.arange(4), np.array([0, 2, 0, 1]))
    # inactive lanes never trap
    k = hydra.compile(guarded_divide, varying=("x", "y"), backend=backend)
    np.testing.assert_array_equal(k(np.array([7, -7, 5]), np.array([2, 0, -3])), [4, 0, -3])


def test_float_division_follows_ieee(backend):
    k = hydra.compile(lambda x, y: (x / y, x // y, x % y), varying=("x", "y"), backend=backend)
    q, fq, r = k(np.array([1.0, -1.0, 0.0, 3.0]), np.array([0.0, 0.0, 0.0, -0.0]))
    np.testing.assert_array_equal(q, [np.inf, -np.inf, np.nan, -np.inf])
    assert np.isnan(r).all() and np.isnan(fq[2])


def checked(x):
    assert x < 3, "x too big"
    assert x > -1
    return x


def test_failing_assert_names_the_lane(backend):
    k = hydra.compile(checked, varying="x", backend=backend)
    with pytest.raises(AssertionError, match=r"x too big \(lane 3\)") as info:
        k(np.array([0, 1, 2, 5, 9]))
    assert isinstance(info.value, hydra.HydraError)
    assert str(info.value).startswith(f"{__file__}:{line_of(checked, 'x too big')}:")
    with pytest.raises(AssertionError, match=r"\(lane 1\)"):
        k(np.array([0, -1]))
    np.testing.assert_array_equal(k(np.array([0, 2])), [0, 2])


def test_lanes_must_be_positive():
    with pytest.raises(ValueError, match="lanes"):
        hydra.compile(add, lanes=0)
    with pytest.raises(ValueError, match="give lanes="):
        hydra.compile(lambda: lane(), backend="numpy")()


def stepped(x, s):
    t = 0
    for i in range(0, 10, s):
        t += i
    return t


def constant_step_zero(x):
    t = 0
    for i in range(0, 10, 0):
        t += i
    return t


def test_range_step_zero_names_the_lane(backend):
    with pytest.raises(hydra.CompileError, match="must not be zero"):
        hydra.compile(constant_step_zero, varying="x", backend=backend)(np.arange(3))
    k = hydra.compile(stepped, varying=("x", "s"), backend=backend)
    with pytest.raises(ValueError, match=r"must not be zero \(lane 1\)"):
        k(np.arange(3), np.array([1, 0, 2]))


def mixed_and_value(x):
    y = (x & 1) and x < 3
    return y


def test_and_or_value_of_two_types_is_a_clear_compile_error():
    k = hydra.compile(mixed_and_value, varying="x", backend="numpy")
    with pytest.raises(hydra.CompileError, match="gives a bool or an int64") as info:
        k(np.arange(3))
    assert info.value.line == line_of(mixed_and_value, "y = ")
    assert "bool(a) and bool(b)" in info.value.hint


def literal_too_big_for_uint32(x):
    return x + (-1)


def literal_too_big_for_int32(x):
    return x * 3000000000


@pytest.mark.parametrize("fn,dtype,shown", [
    (literal_too_big_for_uint32, np.uint32, "the integer -1 does not fit in uint32"),
    (literal_too_big_for_int32, np.int32, "the integer 3000000000 does not fit in int32"),
])
def test_python_int_out_of_range_of_the_numpy_type(fn, dtype, shown):
    # NumPy 2 (NEP 50) raises OverflowError for these; hydra refuses them at compile time
    with pytest.raises(OverflowError):
        fn(dtype(3))
    k = hydra.compile(fn, varying="x", backend="numpy")
    with pytest.raises(hydra.CompileError, match=shown) as info:
        k(np.arange(3, dtype=dtype))
    assert info.value.line == line_of(fn, "return")
