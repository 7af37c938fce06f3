"""Submitted per-lane array kernels are ordered by what they read and write (SPEC
section 9; issue 22 item 1), and the one effects analysis (``hydra.effects``) that
says so, with the memory declarations it follows (``hydra.ir.core``).

The ordering tests follow tests/test_async.py: a slow launch first (a bounded spin
before any array is touched), then a fast one that touches the same memory; without
the ordering the fast one runs meanwhile and the values show it.  The kernels run one
thread each (``threads=1`` on cpu), so two launches really overlap on two cores.  Per-lane
array kernels here run on numpy and cpu (cuda runs per-lane arrays too, between its
kernels; its tests here are the ones without array operations).
"""

import numpy as np
import pytest

import hydra
from hydra import lane
from hydra.batching import PER_LANE
from hydra.effects import effects, written_arrays
from hydra.arraylib import SPELLINGS
from hydra.frontend.arrayops import ALIASES, METHODS, ARRAY_FUNCTIONS
from hydra.intrinsics import INTRINSICS
from hydra.ir.core import (ARRAY_MEMORY, LANE_ARRAY_FNS, OPCODES, Memory, Op, OpInfo, Value,
                           intrinsic_memory)
from hydra.types import ArrayType, scalar
from hydra.views import VIEW_FNS

from conftest import BACKENDS
from test_async import deps_of

ARRAY_BACKENDS = [b for b in ("numpy", "cpu") if b in BACKENDS]
#: iterations of a spin of about a tenth of a second (a fast launch takes under a ms)
SPIN = {"numpy": 3_000, "cpu": 20_000_000}
LANES = 4
D = 3
#: captured by the kernels below (module-level arrays)
CAPTURED_W = np.linspace(0.1, 1.2, LANES * D).reshape(LANES, D)
CAPTURED_OUT = np.zeros((LANES, D))


# --- kernels ------------------------------------------------------------------------------

def layer(x, W, out, n):
    s = 1.0
    for _ in range(n):
        s = s * 0.5 + 1.0
    out[lane()] = np.tanh(W @ (x + (s - s)))


def fill(a, v, n):
    s = 1.0
    for _ in range(n):
        s = s * 0.5 + 1.0
    a[lane()] = v + (s - s)


def read_rows(src, dst, n):
    s = 1.0
    for _ in range(n):
        s = s * 0.5 + 1.0
    dst[lane()] = src[lane()] * 1.0 + (s - s)


def write_first_row(x, v, n):
    s = 1.0
    for _ in range(n):
        s = s * 0.5 + 1.0
    x[0] = v + (s - s)


def write_through_transpose(x, v, n):
    s = 1.0
    for _ in range(n):
        s = s * 0.5 + 1.0
    t = x.T
    t[1] = v + (s - s)


def captured_layer(x, out, n):
    s = 1.0
    for _ in range(n):
        s = s * 0.5 + 1.0
    out[lane()] = np.tanh(CAPTURED_W @ (x + (s - s)))


def captured_write(x, n):
    s = 1.0
    for _ in range(n):
        s = s * 0.5 + 1.0
    CAPTURED_OUT[lane()] = x * 2.0 + (s - s)


def two_weights(x, W, V, out, n):
    s = 1.0
    for _ in range(n):
        s = s * 0.5 + 1.0
    y = x + (s - s)
    out[lane()] = np.tanh(W @ y) + V @ y


def double_into(x, out, n):
    s = 1.0
    for _ in range(n):
        s = s * 0.5 + 1.0
    out[lane()] = x * 2.0 + (s - s)


def make_rows(v, n):
    s = 1.0
    for _ in range(n):
        s = s * 0.5 + 1.0
    return np.ones(D) * (v + (s - s)) + lane()


_KERNELS: dict = {}


def kern(fn, backend, varying=()):
    """Compiled, with one thread on cpu, and run once (compiling happens at submit:
    a slow compile would let the launch before it finish first)."""
    key = (fn, backend)
    if key not in _KERNELS:
        options = {"threads": 1} if backend == "cpu" else {}
        _KERNELS[key] = hydra.compile(fn, lanes=LANES, varying=varying, backend=backend,
                                      **options)
    return _KERNELS[key]


def warm(k, *args):
    k(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    return k


def arrays():
    x = np.arange(LANES * D, dtype=float).reshape(LANES, D) / 10
    W = np.linspace(-1.0, 1.0, LANES * D).reshape(LANES, D)
    return x, W, np.zeros((LANES, LANES))


@pytest.fixture(autouse=True)
def settle():
    yield
    assert hydra.wait(timeout=120), "launches still outstanding after a test"


@pytest.fixture(params=ARRAY_BACKENDS)
def be(request) -> str:
    return request.param


def layers(be):
    """The layer, a writer and a reader of rows, warmed for every shape used here."""
    x, W, out = arrays()
    lay = warm(kern(layer, be, "x"), x, W, out, 0)
    fl, rd = kern(fill, be), kern(read_rows, be)
    for a in (W, out, np.zeros((LANES, 2, D))):
        warm(fl, a, 0.0, 0)
        warm(rd, a, a.copy(), 0)
    return lay, fl, rd


# --- the declarations -------------------------------------------------------------------

def test_every_opcode_declares_what_it_reads_and_writes():
    for name, info in OPCODES.items():
        assert isinstance(info.memory, Memory), name
    with pytest.raises(TypeError):
        OpInfo("an opcode without a memory declaration")  # memory is required


def test_every_array_operation_declares_what_it_reads_and_writes():
    spelled = {**ALIASES, **SPELLINGS}  # np.ravel is a reshape, np.flip a getitem ...
    accepted = set(PER_LANE) | set(LANE_ARRAY_FNS) | {
        spelled.get(name, name) for name in ARRAY_FUNCTIONS | METHODS}
    missing = sorted(accepted - set(ARRAY_MEMORY))
    assert not missing, f"array fns without a memory declaration: {missing}"
    for fn in VIEW_FNS | {"einsum"}:
        assert ARRAY_MEMORY[fn].aliases, fn  # a store through the result writes the base
    for name, entry in INTRINSICS.items():
        m = intrinsic_memory(name)
        assert bool(m.writes) == entry.effect, name  # an effect writes an array argument
    assert intrinsic_memory("atomic_add") == Memory(reads=(0,), writes=(0,))


def test_a_number_result_reads_what_it_would_alias():
    f64 = scalar("float64")
    arr, row = Value(ArrayType(f64, 2, (2, 3)), None), Value(ArrayType(f64, 1, (3,)), None)
    view = Op("array", [arr], [row], None, {"fn": "getitem", "params": {}})
    assert (view.memory.reads, view.memory.aliases) == ((), (0,))
    number = Op("array", [row], [Value(f64, None)], None, {"fn": "einsum", "params": {}})
    assert (number.memory.reads, number.memory.aliases) == ((0,), ())
    pick = Op("select", [Value(scalar("bool"), None), arr, arr], [Value(arr.type, None)], None)
    assert pick.memory.aliases == (1, 2) and pick.written_array is None
    store = Op("array_store", [arr, row], [], None, {"fn": "setitem", "params": {}})
    assert store.written_array is arr and store.memory.reads == (1,)


# --- the analysis ---------------------------------------------------------------------------

def _effects_of(fn, args, varying=(), backend="numpy"):
    k = hydra.compile(fn, lanes=LANES, varying=varying, backend=backend)
    return effects(k.prepare(list(args))[0]), k


def pick_and_store(a, b, c, v):
    t = a[1:] if c > 0 else b[1:]
    t[0] = v


def select_and_read(x, c, out):
    t = x[0] if c > 0 else x[1]  # c varies: after linearize, a select of two views
    out[lane()] = t[2]  # (a store through t is refused: hydra.views)


def carried_store(a, b, n, v):
    t = a[1:]
    for _ in range(n):
        t = b[1:]
    t[0] = v


def store_into_copied_reshape(W, v):
    r = W.T.reshape(6)
    r[0] = v
    return r[0]


def shape_only(a, out):
    out[lane()] = a.shape[0]


def varying_number(x, out):
    out[lane()] = x


def test_effects_of_a_per_lane_array_layer():
    x, W, out = arrays()
    found, k = _effects_of(layer, (x, W, out, 0), "x")
    assert found.params == ("r", "r", "w", "")
    fn = k.prepare([x, W, out, 0])[0]
    assert effects(fn) is found  # once per specialization: kept in fn.notes
    assert [v.name for v in written_arrays(fn)] == ["out"]


def test_effects_follow_views_of_a_varying_argument():
    x = np.zeros((LANES, 2, D))
    assert _effects_of(write_first_row, (x, 1.0, 0), "x")[0].params == ("w", "", "")
    assert _effects_of(write_through_transpose, (x, 1.0, 0), "x")[0].params == ("w", "", "")


def test_effects_follow_joins_and_loop_carried_values():
    a, b = np.zeros(LANES), np.zeros(LANES)
    assert _effects_of(pick_and_store, (a, b, 1, 2.0))[0].params == ("w", "w", "", "")
    assert _effects_of(carried_store, (a, b, 3, 2.0))[0].params == ("w", "w", "", "")
    x, c, out = np.zeros((LANES, 2, D)), np.arange(LANES) - 1.5, np.zeros(LANES)
    found, k = _effects_of(select_and_read, (x, c, out), ("x", "c"))
    assert found.params == ("r", "r", "w")
    fn = k.prepare([x, c, out])[0]
    assert any(op.opcode == "select" and isinstance(op.result.type, ArrayType)
               for op in fn.walk())


def test_effects_of_a_reshape_numpy_copies_write_no_argument():
    W = np.ones((2, 3))
    assert _effects_of(store_into_copied_reshape, (W, 5.0))[0].params == ("r", "")


def test_effects_of_shapes_numbers_and_captured_arrays():
    out = np.zeros(LANES)
    assert _effects_of(shape_only, (np.ones(7), out))[0].params == ("", "w")
    assert _effects_of(varying_number, (np.ones(LANES), out), "x")[0].params == ("r", "w")
    x = np.ones((LANES, D))
    found = _effects_of(captured_layer, (x, np.zeros((LANES, LANES)), 0), "x")[0]
    assert [(op.attrs["name"], m) for op, m in found.captured] == [("CAPTURED_W", "r")]
    found = _effects_of(captured_write, (x, 0), "x")[0]
    assert [(op.attrs["name"], m) for op, m in found.captured] == [("CAPTURED_OUT", "w")]


# --- ordering of submitted per-lane array kernels -------------------------------------------

def test_layer_then_readers_of_its_arrays(be):
    lay, _, rd = layers(be)
    x, W, out = arrays()
    a = lay.submit(x, W, out, SPIN[be])
    dst = {k: np.zeros_like(v) for k, v in (("x", x), ("W", W), ("out", out))}
    reads = {k: rd.submit(v, dst[k], 0) for k, v in (("x", x), ("W", W), ("out", out))}
    reads["out"].result()
    np.testing.assert_allclose(dst["out"], np.tanh(x @ W.T))  # after the layer's write
    assert deps_of(reads["out"]) == [(a.launch_id, "RAW")]
    assert deps_of(reads["x"]) == [] and deps_of(reads["W"]) == []  # reads never wait


@pytest.mark.parametrize("which, why", [("x", "WAR"), ("W", "WAR"), ("out", "WAW")])
def test_layer_then_a_writer_of_each_array(be, which, why):
    lay, fl, _ = layers(be)
    x, W, out = arrays()
    want = np.tanh(x @ W.T)
    target = {"x": x, "W": W, "out": out}[which]
    a = lay.submit(x, W, out, SPIN[be])
    w = fl.submit(target, 9.0, 0)
    w.result()
    assert deps_of(w) == [(a.launch_id, why)]
    np.testing.assert_array_equal(target, 9.0)  # the writer came last
    if which != "out":
        np.testing.assert_allclose(out, want)  # the layer read the old values


@pytest.mark.parametrize("which, why", [("x", "RAW"), ("W", "RAW"), ("out", "WAW")])
def test_a_writer_then_the_layer(be, which, why):
    lay, fl, _ = layers(be)
    x, W, out = arrays()
    target = {"x": x, "W": W, "out": out}[which]
    w = fl.submit(target, 0.5, SPIN[be])
    a = lay.submit(x, W, out, 0)
    a.result()
    assert deps_of(a) == [(w.launch_id, why)]
    x2, W2, _ = arrays()
    x2, W2 = (np.full_like(x2, 0.5) if which == "x" else x2,
              np.full_like(W2, 0.5) if which == "W" else W2)
    np.testing.assert_allclose(out, np.tanh(x2 @ W2.T))  # after the writer


def test_readers_then_the_layer(be):
    lay, _, rd = layers(be)
    x, W, out = arrays()
    out[:] = 3.0
    dst = {k: np.zeros_like(v) for k, v in (("x", x), ("W", W), ("out", out))}
    reads = {k: rd.submit(v, dst[k], SPIN[be]) for k, v in (("x", x), ("W", W), ("out", out))}
    a = lay.submit(x, W, out, 0)
    a.result()
    assert deps_of(a) == [(reads["out"].launch_id, "WAR")]  # reads of x and W: none
    hydra.wait()
    np.testing.assert_array_equal(dst["out"], 3.0)  # the reader saw the old values
    np.testing.assert_allclose(out, np.tanh(x @ W.T))


def test_a_write_through_a_view_of_a_varying_argument(be):
    _, _, rd = layers(be)
    for kernel, place in ((write_first_row, (slice(None), 0)),
                          (write_through_transpose, (slice(None), slice(None), 1))):
        k = kern(kernel, be, "x")
        warm(k, np.zeros((LANES, 2, D)), 1.0, 0)
        x, dst = np.zeros((LANES, 2, D)), np.zeros((LANES, 2, D))
        w = k.submit(x, 7.0, SPIN[be])
        r = rd.submit(x, dst, 0)
        r.result()
        assert deps_of(r) == [(w.launch_id, "RAW")], kernel.__name__
        want = np.zeros_like(x)
        want[place] = 7.0
        np.testing.assert_array_equal(dst, want)


def test_captured_arrays(be):
    lay, fl, rd = layers(be)
    saved_w, saved_out = CAPTURED_W.copy(), CAPTURED_OUT.copy()
    x, _, out = arrays()
    try:
        cl = warm(kern(captured_layer, be, "x"), x, out, 0)
        cw = warm(kern(captured_write, be, "x"), x, 0)
        CAPTURED_OUT[:] = 0.0
        a = cl.submit(x, out, SPIN[be])
        w = fl.submit(CAPTURED_W, 9.0, 0)  # the captured array, passed to another kernel
        b = cw.submit(x, SPIN[be])
        dst = np.zeros_like(CAPTURED_OUT)
        r = rd.submit(CAPTURED_OUT, dst, 0)
        r.result()
        w.result()
        assert deps_of(w) == [(a.launch_id, "WAR")]
        assert deps_of(r) == [(b.launch_id, "RAW")]
        np.testing.assert_allclose(out, np.tanh(x @ saved_w.T))
        np.testing.assert_array_equal(dst, x * 2.0)
    finally:
        hydra.wait()
        CAPTURED_W[:], CAPTURED_OUT[:] = saved_w, saved_out


def test_one_array_passed_twice(be):
    _, fl, rd = layers(be)
    x, W, out = arrays()
    tw = warm(kern(two_weights, be, "x"), x, W, W, out, 0)
    a = tw.submit(x, W, W, out, SPIN[be])  # W read as W and as V
    w = fl.submit(W, 9.0, 0)
    w.result()
    assert deps_of(w) == [(a.launch_id, "WAR")]
    x0, W0, _ = arrays()
    np.testing.assert_allclose(out, np.tanh(x0 @ W0.T) + x0 @ W0.T)
    d = warm(kern(double_into, be, "x"), x, x.copy(), 0)
    A = x.copy()
    b = d.submit(A, A, SPIN[be])  # read as the varying x, written as out
    dst = np.zeros_like(A)
    r = rd.submit(A, dst, 0)
    r.result()
    assert deps_of(r) == [(b.launch_id, "RAW")]
    np.testing.assert_array_equal(dst, x0 * 2.0)


def test_a_future_of_per_lane_arrays_as_an_argument(be):
    lay, _, rd = layers(be)
    mk = warm(kern(make_rows, be), 1.0, 0)
    x, W, out = arrays()
    rows = mk.submit(1.0, SPIN[be])
    a = lay.submit(rows, W, out, 0)  # its x stood in for while rows runs
    dst, dst_w = np.zeros_like(out), np.zeros_like(W)
    r = rd.submit(out, dst, 0)
    rw = rd.submit(W, dst_w, 0)
    r.result()
    assert deps_of(a) == [(rows.launch_id, "future")]
    assert deps_of(r) == [(a.launch_id, "RAW")]
    assert deps_of(rw) == []  # the layer only reads W: known before rows is done
    made = np.ones((LANES, D)) + np.arange(LANES)[:, None]
    np.testing.assert_allclose(dst, np.tanh(made @ W.T))


def ignores(a, out, n):
    s = 1.0
    for _ in range(n):
        s = s * 0.5 + 1.0
    out[lane()] = s - s


def shape_of(a, out, n):
    s = 1.0
    for _ in range(n):
        s = s * 0.5 + 1.0
    out[lane()] = a.shape[0] + (s - s)


def test_a_launch_writes_back_no_byte_swapped_array_it_does_not_write(be):
    """A byte-swapped argument runs as a native copy; only a written one is copied back
    (else the copy-back of an array the kernel never touched, or only asked the shape
    of, would undo a write another launch made meanwhile)."""
    _, fl, _ = layers(be)
    for kernel in (ignores, shape_of):
        k = kern(kernel, be)
        a = np.zeros((LANES, D), dtype=">f8")
        out = np.zeros(LANES)
        warm(k, a, out, 0)
        slow = k.submit(a, out, SPIN[be])
        w = fl.submit(a, 9.0, 0)  # not ordered: the slow launch does not touch a's memory
        w.result()
        slow.result()
        assert deps_of(w) == [], kernel.__name__
        np.testing.assert_array_equal(a, 9.0)


# --- the read-only check reads the analysis --------------------------------------------------

def row_through_view(x, W):
    r = W[1]
    r[0] = x


def rows_of_captured(x):
    CAPTURED_OUT[lane()] = x * 2.0


@pytest.mark.parametrize("backend", ARRAY_BACKENDS)
def test_a_read_only_array_written_through_a_view_or_as_rows_names_the_write(backend):
    W = np.zeros((3, 4))
    W.setflags(write=False)
    k = hydra.compile(row_through_view, lanes=LANES, varying="x", backend=backend)
    line = row_through_view.__code__.co_firstlineno + 2
    with pytest.raises(ValueError, match=f":{line}:.* argument 'W' is read-only"):
        k(np.ones(LANES), W)
    np.testing.assert_array_equal(W, 0.0)
    k = hydra.compile(rows_of_captured, lanes=LANES, varying="x", backend=backend)
    line = rows_of_captured.__code__.co_firstlineno + 1
    CAPTURED_OUT.setflags(write=False)
    try:
        with pytest.raises(ValueError, match=f":{line}:.* array 'CAPTURED_OUT' is read-only"):
            k(np.ones((LANES, D)))
    finally:
        CAPTURED_OUT.setflags(write=True)
