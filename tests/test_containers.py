"""Containers as kernel arguments and results (issue 25): tuples, lists, dicts with str
keys, namedtuples and dataclasses, uniform and varying, nested; read as Python reads
them, read-only, returned with per-lane leaves stacked and uniform leaves once.  Each
kernel is compared with the per-example function run lane by lane (``hydra.trees``
takes a varying container's lane ``i`` as the container of its leaves' ``[i]``)."""

import dataclasses
from typing import NamedTuple

import numpy as np
import pytest

import hydra
from arrays_oracle import assert_same
from hydra import trees
from hydra.types import TreeType


@dataclasses.dataclass
class MLP:
    W1: np.ndarray
    b1: np.ndarray
    W2: np.ndarray
    b2: float
    act: str = "relu"
    bias: bool = True


class Pair(NamedTuple):
    scale: float
    offset: np.ndarray


def lane_view(a, i: int):
    leaves, treedef = trees.flatten(a)
    return trees.unflatten(treedef, [x[i] for x in leaves])


def check(fn, varying, args, n, backend, exact=False):
    """Compile and run ``fn`` and compare each leaf of its result with the per-example
    run (the result's structure too); returns hydra's result."""
    names = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    want = [fn(*[lane_view(a, i) if p in varying else a for p, a in zip(names, args)])
            for i in range(n)]
    got = hydra.compile(fn, varying=varying, backend=backend)(*args)
    leaves, treedef = trees.flatten(got)
    for w in want:
        assert trees.flatten(w)[1] == treedef, (got, w)
    for j, g in enumerate(leaves):
        assert_same(g, [trees.flatten(w)[0][j] for w in want], exact)
    return got


def mlp_forward(x, m):
    h = m.W1 @ x
    if m.bias:
        h = h + m.b1
    if m.act == "relu":
        h = np.maximum(h, 0.0)
    else:
        h = np.tanh(h)
    return m.W2 @ h + m.b2


def model(seed=0, act="relu", bias=True):
    rng = np.random.default_rng(seed)
    return MLP(rng.standard_normal((5, 3)), rng.standard_normal(5),
               rng.standard_normal((2, 5)), 0.5, act, bias)


def test_dataclass_of_weights(be):
    x = np.random.default_rng(1).standard_normal((7, 3))
    check(mlp_forward, ("x",), [x, model()], 7, be)


def test_static_fields_are_part_of_the_key():
    k = hydra.compile(mlp_forward, varying="x", backend="numpy")
    x = np.random.default_rng(1).standard_normal((4, 3))
    for act, bias in (("relu", True), ("tanh", True), ("tanh", False)):
        m = model(act=act, bias=bias)
        want = np.stack([mlp_forward(x[i], m) for i in range(4)])
        np.testing.assert_allclose(k(x, m), want, rtol=1e-12)
    assert len(k._cache) == 3
    shown = sorted(str(key[1]) for key in k._cache)
    assert all(isinstance(key[1], TreeType) for key in k._cache)
    assert shown[1] == ("MLP(W1=array[float64, (5, 3)], b1=array[float64, (5,)], "
                        "W2=array[float64, (2, 5)], b2=weak float64, act='tanh', bias=False)")


def dict_layers(x, p):
    h = x
    for i in range(len(p["Ws"])):
        h = np.tanh(p["Ws"][i] @ h + p["bs"][i])
    return p["scale"] * h.sum()


def test_dict_of_lists_with_an_unrolled_index(be):
    rng = np.random.default_rng(2)
    p = {"scale": 2.0, "Ws": [rng.standard_normal((4, 3)), rng.standard_normal((4, 4))],
         "bs": (rng.standard_normal(4), rng.standard_normal(4))}
    check(dict_layers, ("x",), [rng.standard_normal((5, 3)), p], 5, be)


def layers_loop(x, layers):
    h = x
    for W, b in layers:
        h = np.maximum(W @ h + b, 0.0)
    return h, len(layers)


def test_for_over_a_list_of_pairs_unrolled(be):
    rng = np.random.default_rng(3)
    layers = [(rng.standard_normal((4, 2)), rng.standard_normal(4)),
              (rng.standard_normal((3, 4)), rng.standard_normal(3))]
    got = check(layers_loop, ("x",), [rng.standard_normal((6, 2)), layers], 6, be)
    assert got[1] == 2 and isinstance(got[1], int)  # uniform: once


def affine(x, p):
    s, off = p
    return p.scale * x + p.offset[1] + s * off[0]


def test_namedtuple_fields_and_unpacking(backend):
    """Scalar leaves: on every backend (the CUDA simulator too)."""
    x = np.arange(5.0)
    check(affine, ("x",), [x, Pair(1.5, np.array([2.0, -1.0]))], 5, backend, exact=True)


def scalars(x, c):
    return c["a"] * x + c["n"] + c["t"][1], c["t"][0] > 1


@pytest.mark.parametrize("lanes", [1, 17])
def test_dict_of_numbers(backend, lanes):
    x = np.linspace(-1.0, 1.0, backend.lanes(lanes))
    got = check(scalars, ("x",), [x, {"t": (1, np.float32(0.25)), "n": 3, "a": -2.0}],
                len(x), backend, exact=True)
    assert got[1] is False


def varying_dict(batch, w):
    return batch["x"] @ w + batch["y"], batch["k"] * 2


def test_varying_dict_leaves_have_one_entry_per_lane(be):
    rng = np.random.default_rng(4)
    batch = {"x": rng.standard_normal((9, 3)), "y": rng.standard_normal(9),
             "k": np.arange(9)}
    check(varying_dict, ("batch",), [batch, rng.standard_normal(3)], 9, be)


def test_varying_container_lengths_are_checked():
    k = hydra.compile(varying_dict, varying="batch", backend="numpy")
    bad = {"x": np.zeros((4, 3)), "y": np.zeros(5), "k": np.arange(4)}
    with pytest.raises(ValueError, match=r"varying arguments disagree on the number of lanes: "
                                         r"'batch\['k'\]' has 4, 'batch\['x'\]' has 4, "
                                         r"'batch\['y'\]' has 5"):
        k(bad, np.zeros(3))


def test_a_varying_list_of_numbers_is_still_one_value_per_lane():
    got = hydra.compile(lambda x: x * 2, varying="x", backend="numpy")([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(got, [2.0, 4.0, 6.0])


def first_above(x, thresholds):
    for k, t in enumerate(thresholds):
        if x < t:
            return k  # a return in one unrolled copy: the copies after it do not run
    return len(thresholds)


def test_return_inside_an_unrolled_loop(backend):
    x = np.linspace(-1.0, 4.0, backend.lanes(11))
    check(first_above, ("x",), [x, (0.0, 1.0, 2.5)], len(x), backend, exact=True)


def nested(pair, scale):
    (a, b), d = pair["ab"], pair["d"]
    return {"s": a * scale + b.sum(), "d": d.x - d.offset[0]}


class Point(NamedTuple):
    x: float
    offset: np.ndarray


def test_nested_varying_container(be):
    rng = np.random.default_rng(7)
    pair = {"ab": (rng.standard_normal(6), rng.standard_normal((6, 2))),
            "d": Point(np.arange(6.0), rng.standard_normal((6, 3)))}
    check(nested, ("pair",), [pair, 2.0], 6, be)


def as_dict(x, m):
    y = m.W2 @ np.maximum(m.W1 @ x + m.b1, 0.0)
    return {"y": y, "norm": np.sqrt((y * y).sum()), "b2": m.b2, "tag": None}


def test_dict_result_stacks_per_lane_leaves(be):
    x = np.random.default_rng(5).standard_normal((4, 3))
    got = check(as_dict, ("x",), [x, model()], 4, be)
    assert list(got) == ["b2", "norm", "tag", "y"]  # sorted keys, as flatten orders them
    assert got["y"].shape == (4, 2) and got["norm"].shape == (4,)
    assert got["b2"] == 0.5 and got["tag"] is None  # uniform leaf once, static None


def rebuilt(x, m):
    return dataclasses.replace(m, b2=m.b2 + 1.0, W1=m.W1 * 2.0), MLP(m.W1, m.b1, m.W2, x)


def test_dataclass_results_and_replace(be):
    m = model()
    got = check(rebuilt, ("x",), [np.arange(3.0), m], 3, be, exact=True)
    assert isinstance(got[0], MLP) and got[0].act == "relu" and got[0].b2 == 1.5
    assert got[1].b2.shape == (3,)  # per lane


def literals(x, p):
    q = {**p, "c": x}
    pairs = [x, x + 1.0]
    if x > 1.0:
        q = {"a": p["a"] * 2.0, "b": p["b"], "c": -x}
    return q, pairs, Pair(x, pairs[0])


def test_container_literals_join_at_branches(backend):
    x = np.arange(4.0)
    got = check(literals, ("x",), [x, {"a": 1.0, "b": 2.0}], 4, backend, exact=True)
    assert isinstance(got[1], list) and isinstance(got[2], Pair)


def rebinds_in_a_loop(x, p, n):
    q = p
    for _ in range(n):
        q = {**q, "a": q["a"] * 2.0 + x}
        if q["a"] > 10.0:
            break
    return q


def test_items_a_loop_leaves_alone_stay_uniform(backend):
    """A dict rebound in a loop whose exit is per lane: the item it changes comes back
    per lane, the one it never changes stays one uniform value (not carried)."""
    x = np.arange(backend.lanes(6)) * 1.0
    got = check(rebinds_in_a_loop, ("x",), [x, {"a": 1.0, "b": 2.0}, 5], len(x), backend,
                exact=True)
    assert got["b"] == 2.0 and isinstance(got["b"], float)
    assert got["a"].shape == (len(x),)


def helper_sum(p):
    return p["a"] + p["b"]


def helper_kernel(x, p):
    return helper_sum(p) * x + helper_sum({"a": x, "b": 1.0})


def test_helpers_take_containers(backend):
    check(helper_kernel, ("x",), [np.arange(3.0), {"a": 1.0, "b": 2.0}], 3, backend,
          exact=True)


def test_uniform_array_in_a_container_is_written_in_place(be):
    def scatter(x, bufs):
        bufs["out"][hydra.lane()] = x * bufs["scale"]
    out = np.zeros(4)
    hydra.compile(scatter, varying="x", backend=be)(np.arange(4.0), {"out": out, "scale": 3.0})
    np.testing.assert_array_equal(out, [0.0, 3.0, 6.0, 9.0])


def test_errors_name_a_leaf_by_its_path():
    def scatter(x, bufs):
        bufs["out"][hydra.lane()] = x
    out = np.zeros(4)
    out.flags.writeable = False
    k = hydra.compile(scatter, varying="x", backend="numpy")
    with pytest.raises(ValueError, match=r"argument 'bufs\['out'\]' is read-only and the "
                                         r"kernel writes it"):
        k(np.arange(4.0), {"out": out})
    shared = np.zeros(4)
    with pytest.raises(ValueError, match=r"arguments 'bufs\['out'\]' and 'bufs\['x'\]' share "
                                         r"memory"):
        hydra.compile(scatter, lanes=4, backend="numpy")(1.0, {"out": shared, "x": shared})


def test_a_written_list_inside_a_varying_container_is_refused():
    def zero_first(batch):
        batch["rows"][0] = 0.0
    k = hydra.compile(zero_first, varying="batch", backend="numpy")
    with pytest.raises(TypeError, match=r"argument 'batch\['rows'\]' is a list, which the "
                                        r"kernel writes: the writes would be lost"):
        k({"rows": [[1.0, 2.0], [3.0, 4.0]]})
    rows = np.ones((2, 2))
    k({"rows": rows})
    np.testing.assert_array_equal(rows, [[0.0, 1.0], [0.0, 1.0]])


def prints_containers(x, p):
    print("lane", {"x": x, "k": [x * 2.0, None]}, p, Pair(x, p.offset))


def test_print_shows_containers_as_python_does(backend, capsys):
    """Each lane's line is Python's print of the containers holding that lane's values
    (as Python numbers for int64/float64, as a tuple's are); a dict's keys are sorted."""
    p = Pair(1.5, np.array([2.0, 3.0]))
    hydra.compile(prints_containers, varying="x", backend=backend)(np.arange(2.0), p)
    assert capsys.readouterr().out == (
        "lane {'k': [0.0, None], 'x': 0.0} Pair(scale=1.5, offset=array([2., 3.])) "
        "Pair(scale=0.0, offset=array([2., 3.]))\n"
        "lane {'k': [2.0, None], 'x': 1.0} Pair(scale=1.5, offset=array([2., 3.])) "
        "Pair(scale=1.0, offset=array([2., 3.]))\n")


# --- refusals, by their messages ---------------------------------------------------------

def sets_item(x, p):
    p["c"] = x
    return x


def sets_field(x, m):
    m.b2 = x
    return x


def appends(x, layers):
    layers.append(x)
    return x


def dynamic_index(x, layers, i):
    return layers[i] * x


def missing_key(x, p):
    return p["nope"]


@pytest.mark.parametrize("fn,arg,message", [
    (sets_item, {"a": 1.0}, "cannot assign to an item of a dict: containers are read-only in "
                            "hydra kernels"),
    (sets_field, model(), "cannot assign to an attribute of a MLP: containers are read-only "
                          "in hydra kernels"),
    (appends, [1.0], "'append' would change a list of 1: containers are read-only in hydra "
                     "kernels"),
    (missing_key, {"a": 1.0}, "KeyError: 'nope' is not a key of this dict (its keys are 'a')"),
])
def test_mutating_or_misreading_a_container_is_a_compile_error(fn, arg, message):
    k = hydra.compile(fn, varying="x", backend="numpy")
    with pytest.raises(hydra.CompileError) as e:
        k(np.arange(2.0), arg)
    assert e.value.message == message


def test_a_varying_index_into_a_container_is_refused():
    k = hydra.compile(dynamic_index, varying=("x", "i"), backend="numpy")
    with pytest.raises(hydra.CompileError) as e:
        k(np.arange(2.0), (1.0, 2.0), np.array([0, 1]))
    assert e.value.message == (
        "a tuple can only be indexed by an integer constant or the counter of a loop that "
        "hydra unrolls (range() of constants, no break, continue or return)")


def test_a_uniform_int_index_specializes_on_its_value():
    k = hydra.compile(dynamic_index, varying="x", backend="numpy")
    np.testing.assert_array_equal(k(np.arange(2.0), (1.0, 2.0), 1), [0.0, 2.0])
    np.testing.assert_array_equal(k(np.arange(2.0), (1.0, 2.0), 0), [0.0, 1.0])


def configured(x, cfg, layers):
    h = np.zeros(cfg["hidden"]) + x
    for i in range(cfg["n"]):
        h = h * layers[i]
    return h.sum()


def test_int_leaves_of_a_config_fix_shapes_and_unrolled_loops(be):
    """A shape (np.zeros(cfg["hidden"])) and a loop bound that indexes a tuple depend on
    ints inside a container: the kernel specializes on their values, as on uniform int
    arguments."""
    x = np.arange(3.0)
    layers = (2.0, 3.0, 4.0)
    for cfg in ({"hidden": 4, "n": 2}, {"hidden": 2, "n": 3}):
        check(configured, ("x",), [x, cfg, layers], 3, be, exact=True)


def test_dict_keys_must_be_strings():
    k = hydra.compile(missing_key, varying="x", backend="numpy")
    with pytest.raises(TypeError, match=r"argument 'p' is a dict with the key 1: hydra takes "
                                        r"dicts with str keys"):
        k(np.arange(2.0), {1: 2.0})


# --- trees ---------------------------------------------------------------------------------

def test_flatten_unflatten_round_trip():
    m = model()
    value = {"m": m, "pairs": [Pair(1.0, np.ones(2))], "none": None, "t": (1, (2.0,))}
    leaves, treedef = trees.flatten(value)
    assert trees.paths(treedef, "v") == [
        "v['m'].W1", "v['m'].b1", "v['m'].W2", "v['m'].b2", "v['pairs'][0].scale",
        "v['pairs'][0].offset", "v['t'][0]", "v['t'][1][0]"]
    back = trees.unflatten(treedef, leaves)
    assert back["m"] == m or back["m"].W1 is m.W1
    assert back["pairs"][0].scale == 1.0 and back["none"] is None and back["t"] == (1, (2.0,))
    assert hash(treedef) == hash(trees.flatten(value)[1])
    with pytest.raises(ValueError, match="too many leaves"):
        trees.unflatten(treedef, leaves + [0])


# --- submit and Dask -------------------------------------------------------------------------

def scale_by(x, p):
    return x * p["w"] + p["b"]


def shift(batch, s):
    return batch["x"] + batch["y"] * s


def slow_value(n, v):
    x = 1.0
    for _ in range(n):  # ~0.1 s on numpy: still running when the next launch is submitted
        x = x * 0.5 + 1.0
    return v * (hydra.lane() + 1) + (x - x)


def test_futures_inside_containers_are_dependencies():
    slow = hydra.compile(slow_value, lanes=4, backend="numpy")
    consumer = hydra.compile(shift, varying="batch", backend="numpy")
    consumer({"x": slow(1, 2.0), "y": np.ones(4)}, 3.0)  # compiled ahead
    first = slow.submit(20_000, 2.0)
    second = consumer.submit({"x": first, "y": np.ones(4)}, 3.0)
    np.testing.assert_array_equal(second.result(), 2.0 * np.arange(1.0, 5.0) + 3.0)
    assert second.launch.dep_ids == ((first.launch_id, "future"),)


def test_dask_varying_container_leaves_are_chunked():
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(6)
    batch = {"x": rng.standard_normal((10, 3)), "y": rng.standard_normal(10),
             "k": np.arange(10)}
    w = rng.standard_normal(3)
    local = hydra.compile(varying_dict, varying="batch", backend="numpy")(batch, w)
    lazy = {"x": da.from_array(batch["x"], chunks=(4, 3)), "y": da.from_array(batch["y"], 4),
            "k": da.from_array(batch["k"], 4)}
    got = hydra.compile(varying_dict, varying="batch", backend="numpy")(lazy, w)
    assert isinstance(got[0], da.Array) and got[0].chunks[0] == (4, 4, 2)
    np.testing.assert_allclose(got[0].compute(scheduler="sync"), local[0], rtol=1e-12)
    np.testing.assert_array_equal(got[1].compute(scheduler="sync"), local[1])


def _first_weight(x, p):
    return x * p["w"][0]


def test_dump_ir_types_a_containers_arrays_as_the_call_does():
    """dump-ir builds what a call compiles: a container's arrays without their shapes
    until whole-array code needs them, as the kernel's own arrays (it showed shapes)."""
    from hydra.ir.printer import print_function
    k = hydra.compile(_first_weight, varying="x", backend="numpy")
    x, p = np.arange(4.0), {"w": np.ones(3)}
    fn = k.specialize(k.signature([x, p])[1])[0]
    header = print_function(fn).splitlines()[0]
    assert "array[float64, 1d]" in header
    assert k.dump_ir("predicated", x, p).splitlines()[0] == header
