"""The API of hydra.grad (SPEC section 11): JAX's return conventions (argnums, wrt,
has_aux, value_and_grad), stop_gradient, tuples as arguments, the three calling forms
(as a kernel, inside a kernel, in plain Python) and every error by its message."""

import dataclasses
import math

import numpy as np
import pytest

import hydra
from hydra import CompileError
from hydra.registry import NO_RULE_YET, record

BACKENDS = ["numpy", "cpu"]


def loss(w, b, x):
    return (math.tanh(w * x + b) - 0.25) ** 2


def _expected(w, b, x):
    t = math.tanh(w * x + b)
    d = 2 * (t - 0.25) * (1 - t * t)
    return d * x, d


def test_return_conventions_in_plain_python():
    dw, db = _expected(0.3, 0.1, 2.0)
    assert hydra.grad(loss)(0.3, 0.1, 2.0) == pytest.approx(dw)
    assert hydra.grad(loss, argnums=1)(0.3, 0.1, 2.0) == pytest.approx(db)
    assert hydra.grad(loss, argnums=(1, 0))(0.3, 0.1, 2.0) == pytest.approx((db, dw))
    assert hydra.grad(loss, argnums=(0,))(0.3, 0.1, 2.0) == pytest.approx((dw,))
    assert hydra.grad(loss, wrt="b")(0.3, 0.1, 2.0) == pytest.approx(db)
    assert hydra.grad(loss, wrt=("w", "b"))(0.3, 0.1, 2.0) == pytest.approx((dw, db))
    value, g = hydra.value_and_grad(loss, argnums=(0, 1))(0.3, 0.1, x=2.0)
    assert value == pytest.approx(loss(0.3, 0.1, 2.0), rel=1e-15)
    assert g == pytest.approx((dw, db))
    assert isinstance(value, float) and isinstance(g[0], float)


def with_aux(w, x):
    y = w * x
    return y * y, (y, x + 1.0)


def test_has_aux():
    g, aux = hydra.grad(with_aux, has_aux=True)(3.0, 2.0)
    assert g == 2 * 6.0 * 2.0 and aux == (6.0, 3.0)
    (value, aux), g = hydra.value_and_grad(with_aux, has_aux=True)(3.0, 2.0)
    assert value == 36.0 and aux == (6.0, 3.0) and g == 24.0


def stopped(x):
    return x * hydra.stop_gradient(x * x) + hydra.stop_gradient(x)


def test_stop_gradient():
    assert hydra.stop_gradient(2.5) == 2.5
    assert hydra.grad(stopped)(3.0) == 9.0


def on_tuple(p, x):
    a, b = p
    return a * x + b * b


def test_a_tuple_argument_gets_a_tuple_gradient():
    assert hydra.grad(on_tuple)((2.0, 3.0), 5.0) == (5.0, 6.0)
    assert hydra.grad(on_tuple, argnums=(0, 1))((2.0, 3.0), 5.0) == ((5.0, 6.0), 2.0)


def unused(x, y):
    return x * 2.0


def test_a_parameter_the_loss_does_not_use_gets_zero():
    assert hydra.grad(unused, argnums=1)(1.0, 2.0) == 0.0


def lanes_used(x):
    return x * hydra.lane() + float(hydra.nlanes())


def test_lane_and_nlanes_in_plain_python_are_0_and_1():
    assert hydra.value_and_grad(lanes_used)(2.0) == (1.0, 0.0)


dloss = hydra.grad(loss, argnums=(0, 1))


def per_example(w, b, x):
    dw, db = dloss(w, b, x)
    clip = max(1.0, math.sqrt(dw * dw + db * db))  # per-example clipping (DP-SGD)
    return hydra.lanesum(dw / clip), hydra.lanesum(db / clip)


def inline_grad(w, x):
    return hydra.grad(loss, wrt="w")(w, 0.0, x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inside_a_kernel_and_as_a_kernel(backend):
    x = np.linspace(-1.0, 1.0, 5)
    k = hydra.compile(per_example, varying="x", backend=backend)
    sw, sb = k(0.3, 0.1, x)
    ref = [_expected(0.3, 0.1, v) for v in x]
    clip = [max(1.0, math.hypot(a, b)) for a, b in ref]
    assert sw == pytest.approx(sum(a / c for (a, _), c in zip(ref, clip)))
    assert sb == pytest.approx(sum(b / c for (_, b), c in zip(ref, clip)))
    g = hydra.compile(hydra.grad(loss, argnums=(0, 1)), varying="x", backend=backend)
    dw, db = g(0.3, 0.1, x)
    np.testing.assert_allclose(dw, [a for a, _ in ref], rtol=1e-12)
    np.testing.assert_allclose(db, [b for _, b in ref], rtol=1e-12)
    i = hydra.compile(inline_grad, varying="x", backend=backend)
    np.testing.assert_allclose(i(0.3, x), [_expected(0.3, 0.0, v)[0] for v in x],
                               rtol=1e-12)


# --- errors ----------------------------------------------------------------------------

def returns_int(x):
    return int(x)


def returns_pair(x):
    return x, x


def counts(x, n):
    return x * n


def uses_lanesum(x):
    return hydra.lanesum(x) * x


out = np.zeros(4)


def stores(x):
    out[0] = x
    return x


def stores_through_a_view(x):
    h = np.zeros((2, 2))
    row = h[0]
    row[1] = x
    return float(h.sum())


def array_op(x):
    v = np.ones(3) * x
    return float(np.prod(v))


def matrix_norm(x):
    return float(np.linalg.norm(np.array([[1.0, 2.0], [0.5, -1.0]]) * x, 2))


d_matrix_norm = hydra.grad(matrix_norm)


def cubic(x, y):
    return x ** 3 * y + math.sin(x * y)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_gradient_of_a_gradient_without_loops(backend):
    d2 = hydra.compile(hydra.grad(hydra.grad(cubic)), varying=("x", "y"), backend=backend)
    x, y = np.array([0.7, -0.2]), np.array([1.3, 2.0])
    np.testing.assert_allclose(d2(x, y), 6 * x * y - y * y * np.sin(x * y), rtol=1e-12)
    dxy = hydra.grad(hydra.grad(cubic), argnums=1)(0.7, 1.3)
    assert dxy == pytest.approx(3 * 0.49 + math.cos(0.91) - 0.91 * math.sin(0.91))


def test_errors(monkeypatch):
    with pytest.raises(TypeError, match=r"^hydra.grad: returns_int must return one float "
                                        r"scalar per lane \(float32 or float64\), not int64$"):
        hydra.grad(returns_int)(1.0)
    with pytest.raises(TypeError, match=r"not a tuple \(has_aux=True takes \(value, aux\)\)"):
        hydra.grad(returns_pair)(1.0)
    with pytest.raises(TypeError, match=r"^hydra.grad: parameter 'n' is an int64: integers "
                                        r"and bools carry no gradient$"):
        hydra.grad(counts, argnums=1)(1.0, 2)
    with pytest.raises(TypeError, match=r"^hydra.grad: give argnums or wrt, not both$"):
        hydra.grad(counts, argnums=0, wrt="x")
    with pytest.raises(TypeError, match=r"wrt names \['z'\] are not parameters"):
        hydra.grad(counts, wrt="z")
    with pytest.raises(CompileError, match=r"^.*hydra.grad: a gradient of a gradient "
                                           r"through a loop is not supported yet"):
        hydra.grad(hydra.grad(looped))(1.5, 3)
    with pytest.raises(CompileError, match=r"lanesum\(\) is not differentiable: cross-lane") \
            as e:
        hydra.grad(uses_lanesum)(1.0)
    assert e.value.loc.line == uses_lanesum.__code__.co_firstlineno + 1
    with pytest.raises(CompileError, match="a store into an argument or a captured array is "
                                           "not differentiable"):
        hydra.grad(stores)(1.0)
    with pytest.raises(CompileError, match=r"a store through a view \(a slice, a reshape, "
                                           r"a transpose\) of an array is not differentiable"):
        hydra.grad(stores_through_a_view)(1.0)
    assert hydra.grad(array_op)(2.0) == pytest.approx(12.0)
    # every operation has a rule or a reason today: an operation without is refused so
    monkeypatch.setattr(record("array", "prod"), "adjoint", NO_RULE_YET)
    with pytest.raises(CompileError, match=r"^.*hydra.grad: the array operation prod has no "
                                           r"adjoint rule yet, so it cannot be differentiated"):
        hydra.grad(array_op)(1.0)
    assert d_matrix_norm(2.0) == pytest.approx(np.linalg.norm([[1, 2], [0.5, -1]], 2))
    with pytest.raises(CompileError, match=r"^.*hydra.grad: a gradient of a gradient through "
                                           r"np.linalg.norm of ord 2, -2 or 'nuc' is not "
                                           r"supported \(the derivative of the SVD is not"):
        hydra.grad(d_matrix_norm)(1.0)


def branchy(x, y):
    if x > 0.0:
        return math.sin(x) * y
    return x * y * y


def looped(x, n):
    s = x
    for _ in range(n):
        s = s * x
    return s


def test_cuda_scalar_gradients_and_the_loop_tape():
    from hydra.backends import available
    if not available("cuda"):
        pytest.skip("no cuda backend (nor its simulator) here")
    k = hydra.compile(hydra.grad(branchy, argnums=(0, 1)), varying=("x", "y"),
                      backend="cuda")
    x, y = np.array([0.5, -1.0, 2.0]), np.array([1.5, 2.0, -0.5])
    dx, dy = k(x, y)
    np.testing.assert_allclose(dx, np.where(x > 0, np.cos(x) * y, y * y), rtol=1e-12)
    np.testing.assert_allclose(dy, np.where(x > 0, np.sin(x), 2 * x * y), rtol=1e-12)
    # a loop's tape: in device memory (tests/test_cuda_grad.py has more)
    got = hydra.compile(hydra.grad(looped), varying=("x", "n"), backend="cuda")(
        np.array([1.0, 2.0]), np.array([2, 3]))
    np.testing.assert_allclose(got, [3.0, 4 * 2.0 ** 3], rtol=1e-12)


def quadratic_form(x, w):
    s = 0.0
    for i in range(len(x)):
        s += x[i] * w[i] * x[i]
    return s


def test_plain_python_gives_an_array_argument_its_own_shape():
    x, w = np.array([2.0, 3.0]), np.array([1.0, -2.0])
    dx, dw = hydra.grad(quadratic_form, argnums=(0, 1))(x, w)
    np.testing.assert_array_equal(dx, [4.0, -12.0])
    np.testing.assert_array_equal(dw, [4.0, 9.0])
    assert dx.shape == x.shape and dw.shape == w.shape


d_looped = hydra.value_and_grad(looped)


def uses_d_looped(x, n):
    value, d = d_looped(x, n)
    return value + d


def test_gradient_kernels_on_dask_arrays():
    da = pytest.importorskip("dask.array")
    x, n = np.linspace(0.0, 1.0, 8), np.arange(8) % 4
    for fn in (hydra.grad(looped), uses_d_looped, hydra.grad(looped, checkpoint=2)):
        k = hydra.compile(fn, varying=("x", "n"), backend="cpu")
        out = k(da.from_array(x, chunks=3), da.from_array(n, chunks=3)).compute()
        np.testing.assert_allclose(out, k(x, n), rtol=1e-12)


@dataclasses.dataclass
class Layer:
    W: np.ndarray
    b: np.ndarray
    act: str = "tanh"  # static: part of the structure, not differentiated


def layer_loss(p, x):
    h = p.W @ x + p.b
    h = np.tanh(h) if p.act == "tanh" else h
    return (h * h).sum()


def _fd(f, p, x, name, index, h=1e-6):
    """Central finite difference of f(p, x) in p's array ``name`` at ``index``."""
    def moved(d):
        q = dataclasses.replace(p, **{name: getattr(p, name).copy()})
        getattr(q, name)[index] += d
        return f(q, x)
    return (moved(h) - moved(-h)) / (2 * h)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_container_argument_gets_a_gradient_of_its_own_structure(backend):
    """A dataclass of weights (a static str field included) and a dict: the gradient is
    the same container with each array's gradient, per lane as a kernel, one example's
    in plain Python; against central finite differences of the function."""
    r = np.random.default_rng(3)
    p = Layer(r.standard_normal((3, 4)) * 0.3, r.standard_normal(3) * 0.1)
    x = r.standard_normal((5, 4))
    per_lane = hydra.compile(hydra.grad(layer_loss), varying=("x",), backend=backend)(p, x)
    assert isinstance(per_lane, Layer) and per_lane.act == "tanh"
    assert per_lane.W.shape == (5, 3, 4) and per_lane.b.shape == (5, 3)
    one = hydra.grad(layer_loss)(p, x[2])
    assert isinstance(one, Layer) and one.W.shape == (3, 4)
    for name, index in (("W", (1, 2)), ("W", (0, 3)), ("b", (2,))):
        want = _fd(layer_loss, p, x[2], name, index)
        assert getattr(per_lane, name)[2][index] == pytest.approx(want, rel=1e-5)
        assert getattr(one, name)[index] == pytest.approx(want, rel=1e-5)
    as_dict = hydra.grad(lambda q, x: layer_loss(Layer(q["W"], q["b"]), x))
    got = as_dict({"W": p.W, "b": p.b}, x[2])
    assert sorted(got) == ["W", "b"]
    np.testing.assert_allclose(got["W"], one.W, rtol=1e-12)


def test_dump_ir_grad_stage_builds_with_shapes_where_arrays_need_them():
    """``dump-ir --stage grad`` builds the gradient as a call does: ``np.take`` with a
    constant tuple needs array shapes, which the plain build of the gradient lacked
    (NeedShapes), while the kernel itself compiled."""
    def picked(x):
        v = np.ones(4) * x
        return np.take(v, (0, 2)).sum()
    k = hydra.compile(picked, varying="x", backend="numpy")
    text = k.dump_ir("grad", np.arange(3.0))
    assert "yield" in text and "take" in text
    got = hydra.compile(hydra.grad(picked), varying="x", backend="numpy")(np.arange(3.0))
    assert np.array_equal(got, [2.0, 2.0, 2.0])
    assert "yield" in hydra.compile(hydra.grad(picked), varying="x").dump_ir(
        "grad", np.arange(3.0))
