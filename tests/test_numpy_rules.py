"""NumPy 2's rules at the edges (issue 11, items 4-7): NumPy scalars are strong,
signed/unsigned comparisons are exact, Python ints that do not fit raise
OverflowError, and a few smaller corners (uint64 indices, float -> unsigned casts,
``~`` of a bool), on every backend."""

import inspect

import numpy as np
import pytest
from conftest import check_against_oracle

import hydra
from hydra import lane

# --- item 5: NumPy scalars are strong (NEP 50) ------------------------------------------

SCALE = np.float64(1 + 2**-30)   # a module-level NumPy scalar: strong, like the argument


def scaled_by_argument(x, a):
    return a * x


def scaled_by_module_constant(x):
    return SCALE * x


def test_numpy_scalar_argument_is_strong(backend):
    x = np.ones(backend.lanes(17), np.float32)
    got = hydra.compile(scaled_by_argument, varying="x", backend=backend)(x, SCALE)
    assert got.dtype == np.float64 and got[0] == 1 + 2**-30
    check_against_oracle(scaled_by_argument, [x, np.float64(0.1)], varying="x",
                         backend=backend)
    check_against_oracle(scaled_by_argument, [x, np.int64(3)], varying="x", backend=backend)


def test_numpy_scalar_module_constant_is_strong(backend):
    x = np.ones(backend.lanes(17), np.float32)
    got = hydra.compile(scaled_by_module_constant, varying="x", backend=backend)(x)
    assert got.dtype == np.float64 and got[0] == 1 + 2**-30


def test_python_float_stays_weak(backend):
    x = np.ones(backend.lanes(3), np.float32)
    got = hydra.compile(scaled_by_argument, varying="x", backend=backend)(x, 1 + 2**-30)
    assert got.dtype == np.float32 and got[0] == 1.0


# --- item 4: signed vs unsigned 64-bit comparisons are exact ------------------------------

EDGE_U = np.array([0, 1, 2**63 - 1, 2**63, 2**64 - 1, 5, 7, 2**63 + 1], np.uint64)
EDGE_S = np.array([0, -1, 2**63 - 1, 2**63 - 1, -1, 6, -2**63, 2**62], np.int64)


def compare_all(u, s):
    return u == s, u != s, u < s, u <= s, u > s, u >= s, s < u, s >= u


def test_uint64_against_int64_compares_exactly(backend):
    u, s = np.tile(EDGE_U, 3), np.tile(EDGE_S, 3)
    got = hydra.compile(compare_all, varying=("u", "s"), backend=backend)(u, s)
    assert not got[0][3]  # 2**63 == 2**63 - 1 through float64
    check_against_oracle(compare_all, [u, s], varying=("u", "s"), backend=backend)
    # uniform on one side, and a narrower signed type on the other
    check_against_oracle(compare_all, [u, np.int64(2**63 - 1)], varying="u", backend=backend)
    check_against_oracle(compare_all, [np.uint64(2**63), s.astype(np.int32)], varying="s",
                         backend=backend)


def compare_with_python_ints(u, c):
    return u == -1, u > -1, u < 2**63 + 2, c < u, u == c


def test_uint64_against_python_ints_is_per_lane(backend):
    # u == -1 is False on every lane, but it is a varying value: an array of N lanes
    u = np.tile(EDGE_U, 2)
    got = hydra.compile(compare_with_python_ints, varying="u", backend=backend)(u, -3)
    assert isinstance(got[0], np.ndarray) and got[0].shape == (16,) and not got[0].any()
    check_against_oracle(compare_with_python_ints, [u, -3], varying="u", backend=backend)
    check_against_oracle(compare_with_python_ints, [u, 2**62], varying="u", backend=backend)


def compare_int32_with_python_int(x, c):
    return x < c, x == c, c >= x


def test_narrow_int_against_a_big_python_int_compares_by_value(backend):
    x = np.array([1, -5, 2**31 - 1], np.int32)
    check_against_oracle(compare_int32_with_python_int, [x, 2**40], varying="x",
                         backend=backend)
    check_against_oracle(compare_int32_with_python_int, [x, -2**40], varying="x",
                         backend=backend)


def compare_with_huge_constants(x):
    return x < 2**63, x == 2**64 - 1, 2**63 + 1 > x, x != -2**63


@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.uint64, np.int32, np.int64])
def test_any_integer_against_constants_beyond_int64(backend, dtype):
    x = np.array([0, 5, 255, np.iinfo(dtype).max, np.iinfo(dtype).min], dtype)
    check_against_oracle(compare_with_huge_constants, [x], varying="x", backend=backend)


# --- item 6: Python ints that do not fit raise OverflowError, as early as known -----------

def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, ln in enumerate(lines) if text in ln)


def times_folded_constant(x):
    return x * (500 + 500)


def stores_a_big_constant(out):
    out[lane()] = 300


def plus_argument(x, c):
    return x + c


def plus_computed(x, c):
    d = c + 1
    return x + d


def plus_lane_times(x, k):
    return x + lane() * k


def test_constant_that_does_not_fit_fails_at_compile_time(backend):
    with pytest.raises(OverflowError):
        times_folded_constant(np.int8(3))  # what NumPy 2 does
    k = hydra.compile(times_folded_constant, varying="x", backend=backend)
    with pytest.raises(OverflowError, match="the integer 1000 does not fit in int8") as info:
        k(np.ones(3, np.int8))
    assert isinstance(info.value, hydra.CompileError)
    assert info.value.line == line_of(times_folded_constant, "return")
    k = hydra.compile(stores_a_big_constant, lanes=3, backend=backend)
    with pytest.raises(OverflowError, match="the Python int 300 does not fit in int8, the "
                                            "type it meets here") as info:
        k(np.zeros(3, np.int8))
    assert info.value.line == line_of(stores_a_big_constant, "out[")


def test_python_int_argument_that_does_not_fit_fails_at_the_call(backend):
    x = np.arange(3, dtype=np.int32)
    with pytest.raises(OverflowError):
        plus_argument(x[0], 2**40)
    k = hydra.compile(plus_argument, varying="x", backend=backend)
    line = line_of(plus_argument, "return")
    with pytest.raises(OverflowError, match=rf"argument 'c' = 1099511627776 does not fit in "
                                            rf"int32, the type it meets at .*:{line} "):
        k(x, 2**40)
    check_against_oracle(plus_argument, [x, 2**31 - 3], varying="x", backend=backend)
    check_against_oracle(plus_argument, [x.astype(np.uint8), 255], varying="x",
                         backend=backend)
    with pytest.raises(OverflowError, match="argument 'c' = -1 does not fit in uint8"):
        k(x.astype(np.uint8), -1)


def test_computed_python_int_that_does_not_fit_fails_naming_line_and_lane(backend):
    x = np.arange(3, dtype=np.int32)
    k = hydra.compile(plus_computed, varying="x", backend=backend)
    line = line_of(plus_computed, "return")
    with pytest.raises(OverflowError, match=rf":{line}: Python integer out of bounds for "
                                            rf"int32 .*\(lane 0\)") as info:
        k(x, 2**31 - 1)
    assert isinstance(info.value, hydra.HydraError) and info.value.lane == 0
    check_against_oracle(plus_computed, [x, 2**31 - 2], varying="x", backend=backend)
    # varying: lane() * 50 leaves int8 at lane 3 (150 > 127)
    k = hydra.compile(plus_lane_times, varying="x", backend=backend)
    with pytest.raises(OverflowError, match=r"out of bounds for int8 .*\(lane 3\)"):
        k(np.zeros(8, np.int8), 50)
    check_against_oracle(plus_lane_times, [np.zeros(8, np.int8), 18], varying="x",
                         backend=backend)


# --- item 7: smaller corners --------------------------------------------------------------

def load(a, i):
    return a[i]


def test_uint64_index_of_2_63_or_more_is_an_index_error(backend):
    a = np.arange(5.0)
    k = hydra.compile(load, varying="i", backend=backend)
    line = line_of(load, "return")
    with pytest.raises(IndexError, match=rf":{line}: index out of bounds for axis 0: a uint64 "
                                         rf"index of 2\*\*63 or more \(lane 1\)"):
        k(a, np.array([1, 2**64 - 1, 3], np.uint64))
    with pytest.raises(IndexError, match=r"\(lane 0\)"):
        hydra.compile(load, lanes=2, backend=backend)(a, np.uint64(2**63))
    np.testing.assert_array_equal(k(a, np.array([4, 0], np.uint64)), [4.0, 0.0])


FLOATS = np.array([np.nan, -1.0, 1e20, 2.0**63, 2.0**64, -1e20, np.inf, -np.inf, 3.7,
                   2.0**32, 2.0**32 + 5, -2.0**31 - 1, 2.0**31, 4e9, 2.0**63 + 4096, -0.5])


def to_uint64(x):
    return np.uint64(x)


def to_uint32(x):
    return np.uint32(x)


H64, H32 = 2**63, 2**31
#: per source type: what NumPy gives on x86-64 for FLOATS, spelled out as
#: host.float_to_unsigned (in float32, 2**32 + 5, -2**31 - 1 and 2**63 + 4096
#: round to 2**32, -2**31 and 2**63)
WANT = {
    (np.uint64, np.float64): [H64, 2**64 - 1, 0, H64, 0, H64, 0, H64, 3, 2**32, 2**32 + 5,
                              2**64 - 2**31 - 1, 2**31, 4000000000, 2**63 + 4096, 0],
    (np.uint64, np.float32): [H64, 2**64 - 1, 0, H64, 0, H64, 0, H64, 3, 2**32, 2**32,
                              2**64 - 2**31, 2**31, 4000000000, 2**63, 0],
    (np.uint32, np.float64): [H32, 2**32 - 1, 0, 0, 0, H32, 0, H32, 3, 0, 0, H32, H32,
                              4000000000, 0, 0],
    (np.uint32, np.float32): [H32, 2**32 - 1, 0, 0, 0, H32, 0, H32, 3, 0, 0, H32, H32,
                              4000000000, 0, 0],
}


@pytest.mark.parametrize("fn,dtype", [(to_uint64, np.uint64), (to_uint32, np.uint32)])
@pytest.mark.parametrize("src", [np.float64, np.float32])
def test_float_to_unsigned_of_nan_and_out_of_range_values(backend, fn, dtype, src):
    want = WANT[dtype, src]
    x = FLOATS.astype(src)
    got = hydra.compile(fn, varying="x", backend=backend)(x)
    np.testing.assert_array_equal(got, np.array(want, dtype), strict=True)
    uniform = hydra.compile(fn, lanes=1, backend=backend)
    assert [int(uniform(v)) for v in x[:8]] == want[:8]


def inverted(b, x):
    return ~b, ~(x > 1.0)


def test_invert_of_a_bool_is_logical_not(backend):
    b = np.array([True, False, True])
    got = hydra.compile(inverted, varying=("b", "x"), backend=backend)(b, np.arange(3.0))
    np.testing.assert_array_equal(got[0], [False, True, False], strict=True)
    np.testing.assert_array_equal(got[1], [True, True, False], strict=True)
    check_against_oracle(inverted, [b, np.arange(3.0)], varying=("b", "x"), backend=backend)


def writes_its_row(a):
    a[0] = 1.0
    return a[1]


def reads_its_row(a):
    return a[0] + a[1]


def test_a_list_the_kernel_writes_is_a_type_error(backend):
    rows = [[0.0, 5.0], [0.0, 6.0]]
    with pytest.raises(TypeError, match=r"argument 'a' is a list, which the kernel writes: "
                                        r"the writes would be lost; pass a NumPy array "
                                        r"\(np.asarray\(a\)\)"):
        hydra.compile(writes_its_row, varying="a", backend=backend)(rows)
    assert rows == [[0.0, 5.0], [0.0, 6.0]]
    got = hydra.compile(reads_its_row, varying="a", backend=backend)(rows)
    np.testing.assert_array_equal(got, [5.0, 6.0])
    array = np.array(rows)
    hydra.compile(writes_its_row, varying="a", backend=backend)(array)
    np.testing.assert_array_equal(array[:, 0], [1.0, 1.0])


def full_of(x):
    a = np.full(2, 300, dtype=np.int8)
    return x + a[0]


def test_a_fill_value_that_does_not_fit_fails_at_compile_time():
    with pytest.raises(OverflowError):
        np.full(2, 300, dtype=np.int8)
    k = hydra.compile(full_of, varying="x", backend="numpy")
    with pytest.raises(OverflowError, match="the Python int 300 does not fit in int8") as info:
        k(np.zeros(2, np.int8))
    assert info.value.line == line_of(full_of, "np.full")


def plus_tuple_item(x, pair):
    return x + pair[1]


def test_a_tuple_item_that_does_not_fit_is_named_as_written():
    k = hydra.compile(plus_tuple_item, varying="x", backend="numpy")
    with pytest.raises(OverflowError, match=r"argument 'pair\[1\]' = 300 does not fit in int8"):
        k(np.zeros(2, np.int8), (1.0, 300))
    np.testing.assert_array_equal(k(np.zeros(2, np.int8), (1.0, 3)), [3, 3])
