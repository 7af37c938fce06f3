"""Fused elementwise chains on the cpu backend (hydra/executor/fuse.py): bit-exact
with the numpy backend and with the undecorated function run example by example, at
1, 3, 17 and 64 lanes; one native step per chain."""

import re

import numpy as np
import pytest
from arrays_oracle import per_example

import hydra
from hydra import lanemax, lanemin, laneprod, lanesum
from hydra.backends.machinecode import background
from hydra.executor import fuse
from hydra.errors import CompileError

f32 = np.float32


def bits(x):
    """The bits of ``x``, every NaN as one NaN: IEEE leaves the sign and payload of a
    NaN result open (x86 passes on one operand's, and LLVM may swap the operands of a
    commutative op), NumPy's own SIMD and scalar loops differ there too."""
    x = np.array(x)
    if x.dtype.kind == "f":
        x[np.isnan(x)] = np.nan
    return x.dtype, x.shape, x.tobytes()


def run_all(fn, varying, args, n):
    """The cpu and numpy backends' results and the per-example ones, which must all be
    the same bits."""
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    with np.errstate(all="ignore"):
        want = per_example(fn, varying, copies, n)
    cpu = hydra.compile(fn, varying=varying, backend="cpu")(*args)
    ref = hydra.compile(fn, varying=varying, backend="numpy")(*args)
    cpu, ref = (r if isinstance(r, tuple) else (r,) for r in (cpu, ref))
    want = [w if isinstance(w, tuple) else (w,) for w in want]
    for j, (c, r) in enumerate(zip(cpu, ref)):
        assert bits(c) == bits(r), f"result {j}: cpu and numpy backends differ"
        stacked = np.stack([np.asarray(w[j]) for w in want])
        if np.shape(c) != stacked.shape:
            c = np.broadcast_to(c, stacked.shape)
        assert bits(c) == bits(stacked), f"result {j}: differs from the per-example run"
    return cpu


def fused_steps(fn, varying, args):
    """The cpu backend's dump: the fused-step lines and the host-step lines."""
    text = hydra.compile(fn, varying=varying, backend="cpu").dump_ir("llvm", *args)
    lines = text.splitlines()
    return ([ln for ln in lines if ln.startswith("; fused step")],
            [ln for ln in lines if ln.startswith("; host step")])


def specials(r, shape, dtype=f32):
    """Random values with NaNs, infinities, signed zeros and ties sprinkled in."""
    x = r.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    pick = r.integers(0, flat.size, size=(5, max(1, flat.size // 16)))
    flat[pick[0]] = np.nan
    flat[pick[1]] = np.inf
    flat[pick[2]] = -np.inf
    flat[pick[3]] = 0.0
    flat[pick[4]] = -0.0
    return x


def chain_one(x, a, b, t):
    y = np.maximum(x * a + b, 0.0)
    z = np.where(y > t, y - 1.0, -y)
    return z, (y < 0.5) | np.isnan(x), np.minimum(z, x) / 3.0


def test_chain_bit_exact(n):
    r = np.random.default_rng(n)
    args = [specials(r, (n, 4, 6)), specials(r, 6), f32(0.25), r.standard_normal(n).astype(f32)]
    run_all(chain_one, ("x", "t"), args, n)


def test_chain_is_one_step():
    r = np.random.default_rng(0)
    args = [specials(r, (5, 4, 6)), specials(r, 6), f32(0.25), r.standard_normal(5).astype(f32)]
    fused, host = fused_steps(chain_one, ("x", "t"), args)
    assert len(fused) == 1, fused
    assert "12 ops, 3 written" in fused[0], fused[0]
    assert not [h for h in host if "array" in h], host


def ints_one(a, b, c, f):
    s = a + b                      # int8 + int16 -> int16, wrapping
    m = a * a                      # int8 wraps
    u = -c + c * 3                 # uint8 wraps
    g = s * f                      # int16 * float32 -> float32
    h = a.astype(np.float64) - f   # float64
    k = (s > f) & ~(c == 7) ^ (m < 0)
    return s, m, u, g, h, k, np.abs(a), ~a, (c > 5).astype(np.int32) + a


def test_mixed_dtypes_bit_exact(n):
    r = np.random.default_rng(n + 1)
    a = r.integers(-128, 128, (n, 3, 5)).astype(np.int8)
    a.reshape(-1)[::7] = -128
    args = [a, r.integers(-30000, 30000, 5).astype(np.int16),
            r.integers(0, 256, (n, 3, 5)).astype(np.uint8), specials(r, (n, 1, 5))]
    run_all(ints_one, ("a", "c", "f"), args, n)


def strided_one(x, y, W, v):
    return x.T * 2.0 + y, np.maximum(x[::2] - W.T[0], v[::-1]), x[:, 1:] != W[1:, 1]


def test_strided_and_transposed_inputs(n):
    r = np.random.default_rng(n + 2)
    big = specials(r, (n, 9, 12))
    x = big[:, 1::2, 2:9]                       # [n, 4, 7]: a varying argument view
    y = specials(r, (n, 4, 14))[:, :, ::2].transpose(0, 2, 1)  # [n, 7, 4], transposed
    W = specials(r, (7, 4))[:, ::-1]            # uniform, negative strides
    v = specials(r, (n, 7))
    run_all(strided_one, ("x", "y", "v"), [x, y, W, v], n)


def branches_one(x, k):
    if x.sum() > 0:
        y = x * 2.0 + 1.0
    else:
        y = np.maximum(x, 0.5) - 3.0
    while y.max() < k:
        y = np.abs(y) * 1.5 + 0.5
    return y, y > 1.0


def test_chains_under_varying_if_and_while(n):
    r = np.random.default_rng(n + 3)
    x = r.standard_normal((n, 6)).astype(f32)
    k = r.uniform(1.0, 40.0, n).astype(f32)
    run_all(branches_one, ("x", "k"), [x, k], n)
    kern = hydra.compile(branches_one, varying=("x", "k"), backend="cpu")
    kern(x, k)
    plan = kern.specialize(kern.signature([x, k])[1])[1].__self__
    # the loop body's chain is fused inside the host-run loop region too
    regions = [r for op in plan.fn.walk() for r in op.regions]
    assert any(isinstance(s, fuse.Fused) for r in regions for s in plan.planner.steps(r.ops[:-1]))


def shared_one(x, W):
    h = x * 2.0 + 1.0
    z = W @ h
    return np.maximum(h, z) - h


def test_intermediate_read_by_a_product_is_materialized(n):
    r = np.random.default_rng(n + 4)
    args = [r.standard_normal((n, 4)).astype(f32), r.standard_normal((4, 4)).astype(f32)]
    cpu = hydra.compile(shared_one, varying=("x",), backend="cpu")(*args)
    ref = hydra.compile(shared_one, varying=("x",), backend="numpy")(*args)
    assert bits(cpu) == bits(ref)
    fused, _ = fused_steps(shared_one, ("x",), args)
    # h (read by the matmul) is written by the first chain; the second chain reads it
    assert len(fused) == 2 and "2 ops, 1 written" in fused[0], fused


def transcendental_one(x):
    return np.exp(x * 0.5) + 1.0


def test_transcendental_functions_stay_out_of_chains():
    """NumPy's SIMD exp and libm's differ in the last bit: exp is a host step, the ops
    around it are fused."""
    x = np.linspace(-3, 3, 40, dtype=f32).reshape(5, 8)
    run_all(transcendental_one, ("x",), [x], 5)
    fused, _ = fused_steps(transcendental_one, ("x",), [x])
    assert len(fused) == 2 and not any("exp" in f for f in fused), fused


def test_errors_unchanged():
    def bad_shapes(x, y):
        return x * 2.0 + y
    x = np.ones((3, 4), f32)
    y = np.ones((3, 5), f32)
    msgs = []
    for be in ("cpu", "numpy"):
        with pytest.raises(CompileError) as e:
            hydra.compile(bad_shapes, varying=("x", "y"), backend=be)(x, y)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] and "(4,)" in msgs[0] and "(5,)" in msgs[0]

    def bad_index(x, i):
        y = x * 2.0 + 1.0
        return y[i] + y
    errs = []
    for be in ("cpu", "numpy"):
        with pytest.raises(IndexError) as e:
            hydra.compile(bad_index, varying=("x", "i"), backend=be)(
                np.ones((3, 4), f32), np.array([0, 9, 1]))
        errs.append(str(e.value))
    assert errs[0] == errs[1] and "lane 1" in errs[0]


def stack_one(x):
    p = x[0]
    cols = np.stack((p[0:3, 0:3], p[1:4, 1:4], p[2:5, 0:3], p[0:3, 2:5]))
    return cols, np.stack((p[0], p[1] * 2.0), axis=1), np.stack((p.T, p), axis=-1)


def test_stack_of_strided_views(n):
    """np.stack of per-lane views is one generated copy (opsteps), same bits."""
    r = np.random.default_rng(n + 5)
    run_all(stack_one, ("x",), [specials(r, (n, 2, 5, 5))], n)


def lane_one(x, c):
    g = x * 2.0 - 1.0
    s = lanesum(g)
    if c > 0:
        s = s + lanemax(g) - laneprod(g * 0.5)
    return s, lanemin(g), lanesum(np.outer(g[0] + 1.0, g[1] * 2.0)), lanesum(np.outer(g[0], g[2]))


def test_lane_reductions_of_arrays_bit_exact(n):
    """lanesum and kin of arrays (and lanesum of an outer product: one GEMM) on the
    precomputed path (every lane active) and the
    host rule's (some lanes inactive): the numpy backend's bits."""
    r = np.random.default_rng(n + 6)
    x = r.standard_normal((n, 3, 4)).astype(f32)
    for c in (np.ones(n, np.int64), r.integers(-1, 2, n)):
        cpu = hydra.compile(lane_one, varying=("x", "c"), backend="cpu")(x, c)
        ref = hydra.compile(lane_one, varying=("x", "c"), backend="numpy")(x, c)
        assert all(bits(a) == bits(b) for a, b in zip(cpu, ref))


def test_precomputed_views_keep_their_errors():
    """A uniform index out of bounds (opsteps' precomputed view) raises the host
    rule's error; where no lane is active it reads index 0 instead, as before."""
    def f(x, i, c):
        y = x * 2.0
        if c > 0:
            y = y + x[i]
        return y
    x = np.arange(12, dtype=f32).reshape(3, 4)
    errs = []
    for be in ("cpu", "numpy"):
        with pytest.raises(IndexError) as e:
            hydra.compile(f, varying=("x", "c"), backend=be)(x, 7, np.array([0, 1, 1]))
        errs.append(str(e.value))
    assert errs[0] == errs[1] and "index 7 is out of bounds" in errs[0]
    c = np.zeros(3, np.int64)
    got = hydra.compile(f, varying=("x", "c"), backend="cpu")(x, 7, c)
    assert bits(got) == bits(hydra.compile(f, varying=("x", "c"), backend="numpy")(x, 7, c))


def test_fused_loop_is_vectorized():
    """The contiguous case compiles to packed SIMD instructions (the asm of the loop)."""
    def f(x, b):
        return np.maximum(x * 2.0 + b, 0.0)
    x = np.ones((64, 8, 64), f32)
    b = np.ones(64, f32)
    kern = hydra.compile(f, varying=("x",), backend="cpu")
    kern(x, b)
    background.wait()  # the loop is built after the first call returns
    plan = kern.specialize(kern.signature([x, b])[1])[1].__self__
    (step,) = [s for s in plan.steps if isinstance(s, fuse.Fused)]
    kernels = list(step._special.values())  # specialized on the arguments' layout
    assert kernels
    asm = "".join(k.inspect_asm() for k in kernels)
    assert re.search(r"\tv?(mul|add|max)ps\s", asm), "no packed float instructions"


def unary_one(x, y):
    a = np.sqrt(x) + np.floor(x) * np.ceil(y) - np.trunc(x * 3.0)
    b = np.reciprocal(np.square(y)) + np.fabs(np.negative(x))
    c = np.logical_xor(np.isinf(x), np.logical_and(np.isfinite(y), np.logical_not(x > y)))
    return a, b, np.logical_or(c, y == 0.0), np.minimum(np.absolute(a), b)


def test_math_and_logic_bit_exact(n):
    """sqrt (NaN of negatives included), rounding, reciprocal, logic: the same bits."""
    r = np.random.default_rng(n + 7)
    run_all(unary_one, ("x",), [specials(r, (n, 5, 3)) * 4, specials(r, (5, 3), np.float64)], n)
