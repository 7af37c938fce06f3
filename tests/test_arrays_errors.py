"""Per-lane arrays (SPEC section 8): every error, at the user's line, and the rule
that kernels which only index arrays do not recompile per array size."""

import numpy as np
import pytest

import hydra
from hydra.types import ArrayType

f32 = np.float32


def mismatch_matmul(x, W):
    return W @ x


def mismatch_add(x, y):
    return x + y


def test_shape_mismatch_names_both_shapes(be):
    with pytest.raises(hydra.CompileError) as e:
        hydra.compile(mismatch_matmul, varying="x", backend=be)(np.ones((3, 4)), np.ones((2, 5)))
    assert "operator @: shapes (2, 5) and (4,) do not fit" in e.value.message
    assert e.value.line == mismatch_matmul.__code__.co_firstlineno + 1
    with pytest.raises(hydra.CompileError, match=r"shapes \(4,\) and \(3,\) do not fit"):
        hydra.compile(mismatch_add, varying=("x", "y"), backend=be)(np.ones((2, 4)),
                                                                    np.ones((2, 3)))


def varying_size(x, n):
    a = np.zeros(n)
    return a + x


def test_shape_from_a_varying_value_names_the_expression(be):
    with pytest.raises(hydra.CompileError) as e:
        hydra.compile(varying_size, varying=("x", "n"), backend=be)(np.ones((3, 4)),
                                                                    np.arange(3))
    assert "the shape of 'a' depends on a value that is not known" in e.value.message
    assert e.value.line == varying_size.__code__.co_firstlineno + 1  # np.zeros(n)
    assert "np.zeros(n)" in str(e.value)


def unsupported(x):
    return np.fft.fft(x)


def unsupported_method(x):
    return x.nonzero()


def test_unsupported_operations_are_named(be):
    with pytest.raises(hydra.CompileError, match="np.fft.fft is not supported on per-lane"):
        hydra.compile(unsupported, varying="x", backend=be)(np.ones((2, 3)))
    with pytest.raises(hydra.CompileError, match="'nonzero' is not supported"):
        hydra.compile(unsupported_method, varying="x", backend=be)(np.ones((2, 3)))


def astype_half(x):
    return x.astype(np.float16)


def zeros_complex(x):
    return np.zeros(3, dtype="complex128") + x


def zeros_of_a_value(x):
    return np.zeros(3, dtype=x[0]) + x


def test_a_dtype_hydra_does_not_compute_in_is_named(be):
    with pytest.raises(hydra.CompileError) as e:
        hydra.compile(astype_half, varying="x", backend=be)(np.ones((2, 3)))
    assert e.value.message == ".astype(): hydra does not compute in float16"
    assert "float32" in e.value.hint
    assert e.value.line == astype_half.__code__.co_firstlineno + 1
    with pytest.raises(hydra.CompileError, match=r"np.zeros\(\): hydra does not compute in "
                       "complex128"):
        hydra.compile(zeros_complex, varying="x", backend=be)(np.ones((2, 3)))
    with pytest.raises(hydra.CompileError, match="must be a NumPy scalar type such as "
                       "np.float32, not a value computed in the kernel"):
        hydra.compile(zeros_of_a_value, varying="x", backend=be)(np.ones((2, 3)))


def store_wrong_shape(x):
    y = np.zeros((2, 3))
    y[0] = x
    return y


def test_storing_a_wrong_shape_names_both(be):
    with pytest.raises(hydra.CompileError, match=r"shape \(4,\) into a place of shape \(3,\)"):
        hydra.compile(store_wrong_shape, varying="x", backend=be)(np.ones((2, 4)))


def gather(E, t):
    return E[t].sum()


def test_a_varying_index_out_of_bounds_names_the_lane(be):
    E = np.ones((4, 3))
    with pytest.raises(IndexError) as e:
        hydra.compile(gather, varying="t", backend=be)(E, np.array([0, 1, 7, 9]))
    assert "index 7 is out of bounds for axis 0 with size 4" in str(e.value)
    assert "lane 2" in str(e.value)


def guarded_gather(E, t):
    s = 0.0
    if t < 4:
        s = E[t].sum()
    return s


def test_inactive_lanes_never_raise(be):
    got = hydra.compile(guarded_gather, varying="t", backend=be)(np.ones((4, 3)),
                                                                np.array([0, 9, 3]))
    np.testing.assert_array_equal(got, [3.0, 0.0, 3.0])


def matmul_on_cuda(x, W):
    return W @ x


def test_cuda_runs_array_operations_it_once_refused():
    from hydra.backends import available
    if not available("cuda"):
        pytest.skip("the cuda backend is not available here")
    x, W = np.arange(6.0).reshape(2, 3), np.arange(9.0).reshape(3, 3)
    got = hydra.compile(matmul_on_cuda, varying="x", backend="cuda")(x, W)
    np.testing.assert_array_equal(got, x @ W.T)


def index_only(a, i):
    return a[i] * 2.0


def test_kernels_that_only_index_arrays_do_not_recompile_per_size():
    k = hydra.compile(index_only, varying="i", backend="numpy")
    for size in (5, 6, 7):
        k(np.arange(float(size)), np.array([0, 1]))
    assert len(k._cache) == 1
    (types,) = k._cache
    assert isinstance(types[0], ArrayType) and types[0].shape is None


def whole_array(a, i):
    return a.sum() + i


def test_kernels_with_array_operations_specialize_on_shapes():
    k = hydra.compile(whole_array, varying="i", backend="numpy")
    for size in (5, 6):
        assert k(np.ones(size), np.array([0, 1])).tolist() == [size, size + 1]
    assert sorted(t[0].shape for t in k._cache) == [(5,), (6,)]


def test_dump_ir_signatures_may_give_shapes():
    from hydra.__main__ import parse_sig
    x, w = parse_sig("float32[3], float64[2, 3]")
    assert x == ArrayType(hydra.types.scalar("float32"), 1, (3,))
    assert w.shape == (2, 3) and str(w) == "array[float64, (2, 3)]"
    k = hydra.compile(mismatch_matmul, varying="x", backend="numpy", lanes=4)
    ir = k.dump_ir("ssa", np.ones((4, 3), f32), np.ones((2, 3), f32))
    assert "%x: v array[float32, (3,)]" in ir and "%W: u array[float32, (2, 3)]" in ir


def sized_by_k(x, k):
    a = np.zeros(k, dtype=np.float32)
    return a + x[:k]


def test_shapes_may_depend_on_uniform_ints_the_kernel_specializes_on(be):
    x = np.arange(12, dtype=f32).reshape(3, 4)
    k = hydra.compile(sized_by_k, varying="x", backend=be)
    for size in (2, 3, 2):
        np.testing.assert_array_equal(k(x, size), x[:, :size])
    assert len(k._cache) == 2
    with pytest.raises(hydra.CompileError, match="a shape never depends on a varying value"):
        hydra.compile(sized_by_k, varying=("x", "k"), backend=be)(x, np.array([1, 2, 3]))
