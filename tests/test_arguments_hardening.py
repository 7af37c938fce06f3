"""Arguments and constructs that used to reach NumPy's or numba's own errors (issue 11,
item 10): byte-swapped and masked arrays, bad ``threads=``, a 0-d array's size,
``atomic_add`` on a per-lane array, a per-lane array of negative size."""

import inspect

import numpy as np
import pytest

import hydra
from hydra import atomic_add, lane


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, ln in enumerate(lines) if text in ln)


def scale_and_mark(a, out):
    out[lane()] = a[lane()] * 2.0
    a[lane()] = -1.0


def test_a_big_endian_shared_array_is_read_and_written_in_place(backend):
    a = np.arange(6.0).astype(">f8")
    out = np.zeros(6)
    hydra.compile(scale_and_mark, lanes=6, backend=backend)(a, out)
    np.testing.assert_array_equal(out, np.arange(6.0) * 2)
    assert a.dtype.str == ">f8"  # still the caller's array, written in place
    np.testing.assert_array_equal(a, -np.ones(6))


def row_sum(row, scale):
    s = 0
    for j in range(len(row)):
        s += row[j]
        row[j] = j * scale
    return s


def test_big_endian_varying_arrays_are_copied_in_and_out(backend):
    rows = np.arange(12, dtype=">i4").reshape(4, 3)
    got = hydra.compile(row_sum, varying=("row",), backend=backend)(rows, np.int32(7))
    np.testing.assert_array_equal(got, [3, 12, 21, 30])
    np.testing.assert_array_equal(rows, np.tile([0, 7, 14], (4, 1)))
    assert rows.dtype.str == ">i4"


def test_a_big_endian_read_only_array_is_read(backend):
    a = np.arange(4.0).astype(">f4")
    a.setflags(write=False)
    out = np.zeros(4)
    k = hydra.compile(copy_plus_one, lanes=4, backend=backend)
    k(a, out)
    np.testing.assert_array_equal(out, np.arange(4.0) + 1)


def copy_plus_one(a, out):
    out[lane()] = a[lane()] + 1


def test_a_masked_array_argument_is_a_type_error_naming_it(backend):
    k = hydra.compile(copy_plus_one, lanes=3, backend=backend)
    masked = np.ma.masked_array([1.0, 2.0, 3.0], mask=[0, 1, 0])
    with pytest.raises(TypeError) as e:
        k(masked, np.zeros(3))
    assert str(e.value) == (
        "argument 'a' is a numpy.ma.MaskedArray, which kernels do not support (they would "
        "ignore its mask): pass a.filled(value) to replace the masked entries, or a.data "
        "to use the values under the mask")
    with pytest.raises(TypeError, match="argument 'v' is a numpy.ma.MaskedArray"):
        hydra.compile(lambda v: v + 1, varying="v", backend=backend)(masked)


CAPTURED_BIG = np.arange(4.0).astype(">f8")
CAPTURED_MASKED = np.ma.masked_array([1.0, 2.0], mask=[1, 0])


def reads_big(out):
    out[lane()] = CAPTURED_BIG[lane()]


def reads_masked(out):
    out[lane()] = CAPTURED_MASKED[lane()]


def test_captured_big_endian_and_masked_arrays_are_compile_errors(backend):
    with pytest.raises(hydra.CompileError) as e:
        hydra.compile(reads_big, lanes=2, backend=backend)(np.zeros(2))
    assert e.value.message == "the captured array 'CAPTURED_BIG' has non-native byte order (>f8)"
    assert e.value.hint == ("capture a native copy: CAPTURED_BIG = "
                            "CAPTURED_BIG.astype(CAPTURED_BIG.dtype.newbyteorder('='))")
    assert e.value.line == line_of(reads_big, "CAPTURED_BIG[")
    with pytest.raises(hydra.CompileError) as e:
        hydra.compile(reads_masked, lanes=2, backend=backend)(np.zeros(2))
    assert e.value.message == ("the captured array 'CAPTURED_MASKED' is a numpy.ma.MaskedArray "
                               "(kernels do not see masks)")


@pytest.mark.parametrize("threads, error", [
    ("abc", TypeError), (0, ValueError), (-1, ValueError), (1.5, TypeError),
    (True, TypeError)])
def test_threads_must_be_a_positive_int_or_none(backend, threads, error):
    with pytest.raises(error) as e:
        hydra.compile(copy_plus_one, lanes=3, backend=backend, threads=threads)
    assert str(e.value) == f"threads must be a positive int or None (all cores), not {threads!r}"
    for ok in (None, 1, np.int64(2)):
        hydra.compile(copy_plus_one, lanes=3, backend=backend, threads=ok)


def sizes(a, out):
    out[lane()] = a.size * 10 + len(a.shape)


def test_a_0d_array_has_size_1_and_shape_empty(backend):
    out = np.zeros(3, np.int64)
    hydra.compile(sizes, lanes=3, backend=backend)(np.array(5.0), out)
    np.testing.assert_array_equal(out, [10, 10, 10])
    hydra.compile(sizes, lanes=3, backend=backend)(np.zeros((2, 3)), out)
    np.testing.assert_array_equal(out, [62, 62, 62])


def adds_to_own_row(row):
    atomic_add(row, 0, 1.0)


def test_atomic_add_on_a_per_lane_array_is_a_compile_error(backend):
    with pytest.raises(hydra.CompileError) as e:
        hydra.compile(adds_to_own_row, varying="row", backend=backend)(np.zeros((4, 2)))
    assert e.value.message == ("atomic_add needs a shared (uniform) array: this one is "
                               "per-lane, so no other lane can see its updates")
    assert e.value.line == line_of(adds_to_own_row, "atomic_add(row")


def negative_local(out, k):
    z = np.zeros(k)
    out[lane()] = z.size


def negative_constant(out):
    z = np.ones(-3)
    out[lane()] = z.size


def test_a_negative_per_lane_array_size_names_the_line(backend):
    k = hydra.compile(negative_local, lanes=4, backend=backend)
    with pytest.raises(ValueError) as e:
        k(np.zeros(4), -2)
    assert isinstance(e.value, hydra.HydraError)
    assert e.value.loc.line == line_of(negative_local, "np.zeros(k)")
    assert str(e.value).splitlines()[0].endswith(
        ": negative dimension -2 for a per-lane array (its size must be >= 0)")
    k(out := np.ones(4), 0)
    np.testing.assert_array_equal(out, np.zeros(4))


def test_a_negative_constant_size_is_a_compile_error(backend):
    with pytest.raises(hydra.CompileError) as e:
        hydra.compile(negative_constant, lanes=4, backend=backend)(np.zeros(4))
    assert e.value.message == "np.ones(): negative dimension -3"
    assert e.value.line == line_of(negative_constant, "np.ones(-3)")
