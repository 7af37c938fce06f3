"""SPEC section 10: kernels called with Dask arrays, on a LocalCluster of process workers
(started once for the module), and on the threaded and synchronous schedulers."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="the dask extra is not installed")
distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")

import dask  # noqa: E402

import hydra  # noqa: E402
from hydra import (broadcast, lane, laneall, laneany, lanemax, lanemin,  # noqa: E402
                   laneprod, lanesum, nlanes, prefixsum, shuffle, atomic_add)
from hydra.dask import DaskCall  # noqa: E402
from hydra.dask.ship import compile_count  # noqa: E402


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, host="127.0.0.1")
    c = distributed.Client(cluster, set_as_default=False)
    yield c
    c.close()
    cluster.close()


def compute(x, where):
    """``x.compute()`` on the cluster (``where`` a Client) or a local scheduler."""
    if isinstance(x, DaskCall):
        return x.compute(scheduler=where)
    return dask.compute(x, scheduler=where)[0]


@pytest.fixture(params=["distributed", "threads", "sync"])
def where(request, client):
    return client if request.param == "distributed" else request.param


def escape_time(cr, ci, limit):
    zr = 0.0
    zi = 0.0
    n = 0
    while n < limit and zr * zr + zi * zi < 4.0:
        zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
        n += 1
    return n + lane() * 0 + nlanes() - nlanes()


def shifted(x, table):
    return x * table[lane() % 3] + lane() * 1000 + nlanes()


def test_lane_local_equals_local_call_bit_for_bit(where):
    rng = np.random.default_rng(1)
    cr, ci = rng.uniform(-2, 1, 50), rng.uniform(-1.2, 1.2, 50)
    k = hydra.compile(escape_time, varying=("cr", "ci"))
    local = k(cr, ci, 200)
    out = k(da.from_array(cr, chunks=(7, 20, 3, 20)), ci, 200)  # NumPy ci chunked to match
    assert isinstance(out, da.Array) and out.chunks == ((7, 20, 3, 20),)
    assert np.array_equal(compute(out, where), local)
    k2 = hydra.compile(shifted, varying="x")
    x, table = np.arange(23, dtype=np.int32), np.array([3, 5, 7], dtype=np.int32)
    assert np.array_equal(compute(k2(da.from_array(x, chunks=5), table), where), k2(x, table))


def test_call_is_lazy_and_results_keep_the_lane_chunks():
    seen = []

    def note(block):
        seen.append(len(block))
        return block
    x = da.arange(12, chunks=4, dtype=np.float64).map_blocks(note)
    seen.clear()  # map_blocks tried note on tiny arrays for the metadata
    k = hydra.compile(lambda v: (v * 2.0, nlanes()), varying="v")
    doubled, n = k(x)
    assert seen == [] and doubled.chunks == ((4, 4, 4),) and n.shape == ()
    assert np.array_equal(doubled.compute(scheduler="sync"), np.arange(12) * 2.0)
    assert n.compute(scheduler="sync") == 12


def test_two_dimensional_varying_argument_is_rechunked_along_lanes_only():
    a = np.arange(40.0).reshape(10, 4)

    def rowsum(row):
        s = 0.0
        for j in range(len(row)):
            s += row[j]
        return s
    k = hydra.compile(rowsum, varying="row")
    out = k(da.from_array(a, chunks=(3, 2)))
    assert out.chunks == ((3, 3, 3, 1),)
    assert np.array_equal(out.compute(scheduler="sync"), k(a))


def reductions(x, flag):
    on = x % 3 != 0
    if on:
        s = lanesum(x)
        p = laneprod(x % 5 + 1)
        lo = lanemin(x)
        hi = lanemax(x)
        anyb = laneany(x > 40)
        allb = laneall(x > 0)
    else:
        s = 0
        p = 0
        lo = 0
        hi = 0
        anyb = False
        allb = False
    total = lanesum(x * flag)
    before = prefixsum(x)
    return s + p + lo + hi + int(anyb) + int(allb), before, total


def test_integer_reductions_and_prefixsum_bit_for_bit(where):
    x = np.arange(1, 46, dtype=np.int64) * 7919 % 101
    k = hydra.compile(reductions, varying="x")
    local = k(x, 3)
    mixed, before, total = k(da.from_array(x, chunks=(4, 10, 1, 30)), 3)
    assert total.shape == () and before.chunks == ((4, 10, 1, 30),)
    got = compute((mixed, before, total), where)
    assert all(np.array_equal(g, e) for g, e in zip(got, local))


def float_sums(x):
    return lanesum(x), laneprod(1.0 + x * 1e-3), prefixsum(x)


def test_float_reductions_within_the_documented_tolerance():
    x = np.random.default_rng(2).standard_normal(1000)
    k = hydra.compile(float_sums, varying="x")
    local = k(x)
    got = dask.compute(k(da.from_array(x, chunks=37)), scheduler="threads")[0]
    # summation order differs: |error| <= (chunks + log2 lanes) ulp of sum(|x|)
    relative = (1000 / 37 + 1 + np.log2(1000)) * np.finfo(float).eps
    bound = relative * np.abs(x).sum()
    assert abs(got[0] - local[0]) <= bound
    assert abs(got[1] - local[1]) <= relative * abs(local[1])
    assert np.max(np.abs(got[2] - local[2])) <= bound


def talk(x):
    print("first", lane(), "of", nlanes())
    if x % 2 == 1:
        print("odd", x)
    return x + 1


def test_prints_chunks_in_lane_order_lockstep_within_a_chunk(where, capsys):
    k = hydra.compile(talk, varying="x")
    x = np.arange(6)
    k(x)
    local = capsys.readouterr().out
    call = k(da.from_array(x, chunks=(2, 3, 1)))
    assert isinstance(call, DaskCall)
    assert capsys.readouterr().out == ""  # nothing ran yet
    result = compute(call, where)
    assert np.array_equal(result, x + 1)
    out = capsys.readouterr().out.splitlines()
    expected = ["first 0 of 6", "first 1 of 6", "odd 1",
                "first 2 of 6", "first 3 of 6", "first 4 of 6", "odd 3",
                "first 5 of 6", "odd 5"]
    assert out == expected and sorted(out) == sorted(local.splitlines())


def fill(x, out, hist):
    i = lane()
    out[i] = x * 2
    hist[i, 0] += x
    hist[i, 1] = nlanes()


def test_lane_private_writes_reach_the_caller_at_compute(where):
    x = np.arange(10, dtype=np.int64)
    out, hist = np.zeros(12, np.int64), np.ones((10, 2), np.int64)
    out0, hist0 = out.copy(), hist.copy()
    k = hydra.compile(fill, varying="x")
    call = k(da.from_array(x, chunks=4), out, hist)
    assert isinstance(call, DaskCall)
    assert np.array_equal(out, out0)  # lazily: nothing written yet
    assert compute(call, where) is None
    k(x, out0, hist0)
    assert np.array_equal(out, out0) and np.array_equal(hist, hist0)


def test_a_read_only_array_the_kernel_writes_or_adds_into_is_refused_on_the_client():
    x = da.from_array(np.arange(10, dtype=np.int64), chunks=4)
    hist = np.broadcast_to(np.ones(2, np.int64), (10, 2))
    with pytest.raises(ValueError, match="argument 'hist' is read-only and the kernel "
                       "writes it"):
        hydra.compile(fill, varying="x")(x, np.zeros(12, np.int64), hist)
    counts = np.zeros(6, np.int64)
    counts.flags.writeable = False
    with pytest.raises(ValueError, match="argument 'counts' is read-only"):
        hydra.compile(histogram, varying="x")(x, 6, counts)


def fill_rows(x, out):
    out[lane()] = np.full(3, x * 2)


def test_lane_private_row_stores_reach_the_caller_at_compute(where):
    """A sub-array store into a uniform argument at the lane's own row is a write the
    chunks send back, as a scalar store is (on worker processes it was lost)."""
    x = np.arange(10, dtype=np.int64)
    out, expected = np.zeros((10, 3), np.int64), np.zeros((10, 3), np.int64)
    call = hydra.compile(fill_rows, varying="x")(da.from_array(x, chunks=4), out)
    assert isinstance(call, DaskCall) and not out.any()
    compute(call, where)
    hydra.compile(fill_rows, varying="x")(x, expected)
    assert np.array_equal(out, expected) and expected[9, 2] == 18


def bad_index(x, a):
    return a[lane() * 2] + x


def test_errors_name_the_global_lane(where):
    k = hydra.compile(bad_index, varying="x")
    x, a = np.arange(8), np.arange(10)
    with pytest.raises(IndexError) as local:
        k(x, a)
    with pytest.raises(IndexError) as remote:
        compute(k(da.from_array(x, chunks=3), a), where)
    assert str(remote.value) == str(local.value) and remote.value.lane == 5
    assert isinstance(remote.value, hydra.HydraError)


def test_error_before_a_reduction_is_the_local_one():
    def div(x):
        y = 100 // (x - 7)
        return y + lanesum(x)
    k = hydra.compile(div, varying="x")
    x = np.arange(12)
    with pytest.raises(ZeroDivisionError) as local:
        k(x)
    with pytest.raises(ZeroDivisionError) as remote:
        k(da.from_array(x, chunks=5)).compute(scheduler="threads")
    assert str(remote.value) == str(local.value)


def test_refused_before_anything_runs():
    x = da.arange(8, chunks=4)

    def swap(v):
        return shuffle(v, nlanes() - 1 - lane())

    def in_loop(v):
        s = 0
        i = 0
        while i < v:
            s += lanesum(i)
            i += 1
        return s

    def crosswrite(v, a):
        a[0] = v

    def of_an_array(v):
        return prefixsum(np.zeros(3) + v)

    def rows_crosswrite(v, a):  # a sub-array store at other lanes' rows
        a[(lane() + 1) % nlanes()] = np.full(2, v)

    def reads_neighbour_row(v, a):  # another chunk's row, written in this call
        a[lane()] = np.full(2, v)
        return a[(lane() + 1) % nlanes()].sum()
    cases = [(swap, "shuffle across Dask chunks"),
             (in_loop, "lanesum inside a loop"),
             (of_an_array, r"prefixsum of a per-lane array across Dask chunks(.|\n)*"
                           r"hint: the lane reductions of per-lane arrays are"),
             (crosswrite, "lanes write at other lanes' indices"),
             (rows_crosswrite, "lanes write at other lanes' indices"),
             (reads_neighbour_row, "read of a may read another lane's store")]
    for fn, words in cases:
        k = hydra.compile(fn, varying="v")
        args = (x, np.zeros(3, np.int64)) if fn is crosswrite else \
            (x, np.zeros((8, 2), np.int64)) if fn in (rows_crosswrite, reads_neighbour_row) \
            else (x,)
        with pytest.raises(hydra.HydraError, match=words) as err:
            k(*args)
        assert f"{__file__}:" in str(err.value)
    with pytest.raises(TypeError, match="'a' is a Dask array but not varying"):
        hydra.compile(lambda v, a: v + a[0], varying="v")(x, x)


def test_a_chunk_task_run_twice_gives_the_same_result():
    x = np.arange(9, dtype=np.int64)
    out, hist = np.zeros(9, np.int64), np.ones((9, 2), np.int64)
    call = hydra.compile(fill, varying="x")(da.from_array(x, chunks=4), out, hist)
    graph = dict(call.chunks.__dask_graph__())
    key = call.chunks.__dask_keys__()[1]
    first = dask.get(graph, key)
    second = dask.get(graph, key)
    assert first.error is None and all(
        np.array_equal(first.rows[i], second.rows[i]) for i in first.rows)
    assert np.array_equal(second.rows[1], [8, 10, 12, 14])
    assert np.array_equal(second.rows[2], [[5, 9], [6, 9], [7, 9], [8, 9]])


def test_each_worker_compiles_a_kernel_once(client):
    before = client.run(compile_count)
    k = hydra.compile(shifted, varying="x")
    x, table = np.arange(40, dtype=np.int64), np.array([1, 2, 3])
    for _ in range(2):
        got = compute(k(da.from_array(x, chunks=4), table), client)
        assert np.array_equal(got, k(x, table))
    after = client.run(compile_count)
    assert all(after[w] - before[w] <= 1 for w in after) and sum(after.values()) > sum(
        before.values())


MAIN = textwrap.dedent('''
    import numpy as np, dask, dask.array as da, distributed, hydra
    from hydra import lane, lanesum

    SCALE = 3

    def helper(v):
        return v * SCALE

    def make(offset):
        def kern(x):
            print("lane", lane())
            return helper(x) + offset + lanesum(x)
        return kern

    if __name__ == "__main__":
        with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                      dashboard_address=None, host="127.0.0.1") as cluster:
            with distributed.Client(cluster) as client:
                k = hydra.compile(make(7), varying="x")
                x = np.arange(6)
                got = k(da.from_array(x, chunks=4)).compute()
                print("equal", np.array_equal(got, (x * 3 + 7 + 15)))
''')


def test_kernel_defined_in_main_runs_on_process_workers(tmp_path):
    script = tmp_path / "main_kernel.py"
    script.write_text(MAIN)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"lane {i}" for i in range(6)] + ["equal True"]


CELL = '''
import numpy as np
from hydra import lane, lanemax
LIMIT = np.int64(50)

def cell_kernel(x):
    y = x * 3 % LIMIT
    return y + lanemax(y) * 1000 + lane()
'''


def test_kernel_from_a_notebook_cell_runs_on_process_workers(client):
    import linecache
    name = "<ipython-input-13-cell>"  # no such file on the workers: the source travels
    linecache.cache[name] = (len(CELL), None, CELL.splitlines(True), name)
    namespace = {}
    exec(compile(CELL, name, "exec"), namespace)
    k = hydra.compile(namespace["cell_kernel"], varying="x")
    x = np.arange(30, dtype=np.int64)
    assert np.array_equal(compute(k(da.from_array(x, chunks=7)), client), k(x))


@pytest.mark.parametrize("backend", ["numpy", "cuda"])
def test_other_backends_run_chunks_too(backend):
    x = np.arange(20, dtype=np.int64)
    table = np.array([3, 5, 7], dtype=np.int64)
    k = hydra.compile(shifted, varying="x", backend=backend)
    assert np.array_equal(k(da.from_array(x, chunks=6), table).compute(scheduler="sync"),
                          k(x, table))
    k = hydra.compile(reductions, varying="x", backend=backend)
    # one task at a time: the CUDA simulator's kernels cannot run in two threads at once
    got = dask.compute(k(da.from_array(x, chunks=6), 2), scheduler="sync")[0]
    assert all(np.array_equal(g, e) for g, e in zip(got, k(x, 2)))


def test_fixed_lane_count_is_checked():
    k = hydra.compile(lambda v: v + 1, lanes=5, varying="v")
    with pytest.raises(ValueError, match="'v' has length 8, but the kernel runs 5 lanes"):
        k(da.arange(8, chunks=4))


def staged_effects(x, out):
    s = lanesum(x)
    print("s", s, "lane", lane())
    out[lane()] = x + s
    p = prefixsum(x)
    out[lane()] += p
    print("p", p)


def test_stages_with_prints_and_writes(where, capsys):
    x = np.arange(7, dtype=np.int64)
    k = hydra.compile(staged_effects, varying="x")
    expected = np.zeros(7, np.int64)
    k(x, expected)
    capsys.readouterr()
    out = np.zeros(7, np.int64)
    assert compute(k(da.from_array(x, chunks=3), out), where) is None
    assert np.array_equal(out, expected)
    chunks = [(0, 1, 2), (3, 4, 5), (6,)]
    p = [0, 0, 1, 3, 6, 10, 15]
    assert capsys.readouterr().out.splitlines() == [
        line for c in chunks for line in [f"s 21 lane {i}" for i in c] + [f"p {p[i]}" for i in c]]


def test_other_dask_objects_and_unknown_chunks_are_clear_errors():
    k = hydra.compile(lambda v: v + 1, varying="v")
    with pytest.raises(TypeError, match="'v' is a Dask Delayed"):
        k(dask.delayed(np.arange(4)))
    x = da.arange(10, chunks=5)
    with pytest.raises(ValueError, match="'v' has unknown chunk sizes"):
        k(x[x > 3])


def test_uniform_arrays_and_the_kernel_are_one_graph_key_each():
    table = np.arange(3, dtype=np.int64) + 1
    k = hydra.compile(shifted, varying="x")
    out = k(da.arange(40, chunks=4, dtype=np.int64), table)
    graph = dict(out.__dask_graph__())
    holders = [key for key, v in graph.items() if getattr(v, "value", v) is table]
    specs = [key for key, v in graph.items() if "hydra-kernel-" in str(key)]
    assert len(holders) == 1 and len(specs) == 1  # each worker fetches them once
    assert sum(1 for key in graph if "hydra-shifted-" in str(key)) == 10  # one task a chunk


def test_the_lowest_failing_lane_wins_over_many_chunks():
    k = hydra.compile(lambda v: 1000 // (v % 37 - 11), varying="v")
    x = np.arange(500)  # lanes 11, 48, 85, ... fail
    with pytest.raises(ZeroDivisionError) as local:
        k(x)
    for _ in range(3):
        with pytest.raises(ZeroDivisionError) as remote:
            k(da.from_array(x, chunks=10)).compute(scheduler="threads")
        assert str(remote.value) == str(local.value) and remote.value.lane == 11
    ok = k(da.from_array(x, chunks=10))[:10]  # the first chunk alone has no failure
    assert np.array_equal(ok.compute(scheduler="threads"), k(x[:10]))


def pick(x, k):
    return x - broadcast(x * 2, k) + broadcast(x, nlanes() - 1)


def test_broadcast_across_chunks(where):
    x = np.arange(10, dtype=np.int64) * 3
    k = hydra.compile(pick, varying="x")
    assert np.array_equal(compute(k(da.from_array(x, chunks=4), 6), where), k(x, 6))
    for bad in (10, -1):
        with pytest.raises(IndexError) as local:
            k(x, bad)
        with pytest.raises(IndexError) as remote:
            compute(k(da.from_array(x, chunks=4), bad), where)
        assert str(remote.value) == str(local.value)

    def odd_only(v):
        if v % 2 == 1:
            return broadcast(v, 4)
        return 0
    k = hydra.compile(odd_only, varying="v")
    x = np.arange(10, dtype=np.int64)
    with pytest.raises(hydra.HydraError) as local:
        k(x)
    with pytest.raises(hydra.HydraError) as remote:
        compute(k(da.from_array(x, chunks=3)), where)
    assert str(remote.value) == str(local.value) and "not active" in str(remote.value)


def histogram(x, bins, counts):
    b = x % bins
    atomic_add(counts, b, 1)
    if x > 20:
        atomic_add(counts, 0, lanesum(x) % 7)


def test_atomic_add_into_an_array_the_kernel_does_not_read(where):
    x = np.arange(40, dtype=np.int64) * 5 % 37
    k = hydra.compile(histogram, varying="x")
    expected = np.full(6, 100, np.int64)
    k(x, 6, expected)
    counts = np.full(6, 100, np.int64)
    call = k(da.from_array(x, chunks=(9, 9, 22)), 6, counts)
    assert np.all(counts == 100)
    compute(call, where)
    assert np.array_equal(counts, expected)

    def read_back(v, a):
        atomic_add(a, 0, v)
        return a[0]
    with pytest.raises(hydra.HydraError, match="atomic_add across Dask chunks"):
        hydra.compile(read_back, varying="v")(da.arange(4, chunks=2), np.zeros(2, np.int64))


def test_atomic_add_into_an_array_an_array_operation_or_the_result_reads_is_refused():
    """What reads the array comes from hydra.effects: an array operation (a.sum()) and a
    return read it too (each chunk would see only its own sums: a wrong result)."""
    def read_whole(v, a):
        atomic_add(a, 0, v)
        return a.sum() + v * 0

    def returned(v, a):
        atomic_add(a, 0, v)
        return a
    for fn in (read_whole, returned):
        k = hydra.compile(fn, varying="v")
        assert np.all(np.asarray(k(np.arange(4), np.zeros(2, np.int64)))[..., 0] == 6)
        with pytest.raises(hydra.HydraError, match="atomic_add across Dask chunks"):
            k(da.arange(4, chunks=2), np.zeros(2, np.int64))


def per_lane_array(x):
    a = np.zeros(3, np.float32)
    a[0] = x
    a[2] = lane()
    return a, x


def test_per_lane_array_results_have_unknown_sizes_until_computed():
    x = np.arange(7.0)
    k = hydra.compile(per_lane_array, varying="x")
    arrays, same = k(da.from_array(x, chunks=3))
    assert arrays.dtype == np.float32 and np.isnan(arrays.shape[1])
    got = dask.compute(arrays, same, scheduler="sync")
    assert all(np.array_equal(g, e) for g, e in zip(got, k(x)))


def test_results_of_two_calls_combine():
    k = hydra.compile(shifted, varying="x")
    table = np.array([1, 2, 3])
    a, b = np.arange(6), np.arange(6) * 10
    both = k(da.from_array(a, chunks=4), table) + k(da.from_array(b, chunks=4), table)
    assert np.array_equal(both.compute(scheduler="sync"), k(a, table) + k(b, table))


shape = object()  # a global named like the attribute below: not the kernel's business


def uses_shape(x, a):
    return x + a.shape[0] + lanesum(x)


def test_only_the_names_a_kernel_reads_travel_with_it():
    from hydra.dask.ship import IntrinsicRef, ship
    captured = dict(ship(uses_shape).captured)
    assert captured == {"lanesum": IntrinsicRef("lanesum")}


def test_a_stage_task_run_twice_on_the_same_inputs_gives_the_same_result():
    x = np.arange(7, dtype=np.int64)
    call = hydra.compile(staged_effects, varying="x")(da.from_array(x, chunks=3),
                                                      np.zeros(7, np.int64))
    graph = call.chunks.graph
    raw = {k: v for layer in graph.layers.values() for k, v in layer.items()}
    task = raw[call.chunks.keys[1]]  # the last stage of the second chunk

    def value(a):
        if isinstance(a, tuple) and a and callable(a[0]):
            return a[0](*[value(b) for b in a[1:]])
        return dask.get(dict(graph), a) if isinstance(a, (str, tuple)) and a in raw else a
    args = [value(a) for a in task[1:]]
    first, second = task[0](*args), task[0](*args)  # the same StageOut both times
    assert first.error is None and first.printed == second.printed
    assert np.array_equal(first.rows[1], second.rows[1])
    assert np.array_equal(second.rows[1], [3 + 21 + 3, 4 + 21 + 6, 5 + 21 + 10])


CAPTURED_W = np.arange(12, dtype=np.float32).reshape(4, 3) / 7


def captured_layer(x, k):
    a = np.zeros(k, np.float32)  # its shape: the uniform k, a constant on the workers too
    a[:4] = np.tanh(CAPTURED_W @ x)
    return a


def closure_layer():
    V = CAPTURED_W[::-1] * 2  # a closure cell, not a module global

    def layer(x):
        return np.tanh(V @ x)
    return layer


@pytest.mark.parametrize("fn", [captured_layer, closure_layer()], ids=["module", "closure"])
def test_captured_weights_and_shapes_from_uniform_ints_reach_the_workers(where, fn):
    x = np.linspace(-1, 1, 30, dtype=np.float32).reshape(10, 3)
    extra = (6,) if fn is captured_layer else ()
    k = hydra.compile(fn, varying="x")
    got = compute(k(da.from_array(x, chunks=4), *extra), where)
    want = np.stack([fn(row, *extra) for row in x])  # the undecorated function
    np.testing.assert_allclose(got, k(x, *extra), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def array_reductions(x):
    h = np.tanh(CAPTURED_W @ x)
    g = np.zeros(4, np.float32)
    if x[0] > 0:  # a varying if: only some lanes, some chunks none
        g = lanesum(h)
    return (lanesum(h), lanemax(h), lanemin(h), laneprod(h * 0.1 + 1), laneany(h > 0.9),
            laneall(h > -0.9), g, lanesum(np.outer(h, x)))  # the last: one product a chunk


def test_lane_reductions_of_per_lane_arrays_across_chunks(where):
    x = np.linspace(-1, 1, 30, dtype=np.float32).reshape(10, 3)
    backend = "numpy" if where == "sync" else "cpu"  # the backends of per-lane arrays
    k = hydra.compile(array_reductions, varying="x", backend=backend)
    got = compute(k(da.from_array(x, chunks=3)), where)
    local = k(x)
    h = np.tanh(x @ CAPTURED_W.T)
    np.testing.assert_allclose(got[0], h.sum(0), rtol=1e-5)  # NumPy, all lanes at once
    np.testing.assert_allclose(got[7], h.T @ x, rtol=1e-5, atol=1e-6)
    for g, want in zip(got, local):
        assert g.shape == want.shape and g.dtype == want.dtype
        if g.dtype == np.bool_ or g is got[1] or g is got[2]:
            np.testing.assert_array_equal(g, want)  # min, max, any, all: exact
        else:  # float sums and products in another order (the guide's bound)
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
