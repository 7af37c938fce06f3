"""The client side of a kernel call with Dask arrays: checks, the task graph, results.

``call(kernel, args)`` runs nothing.  It types the call from the arrays' metadata,
builds the predicated IR (no backend compile on the client), refuses what cannot run
in chunks (with a ``HydraError`` naming the operation and its line), and returns:

- Dask arrays (varying results, chunked like the lanes) and 0-d Dask arrays (uniform
  results), as a local call would return NumPy arrays and scalars, when the kernel
  only computes;
- a ``DaskCall`` when the kernel prints, writes a uniform array or returns nothing:
  its ``.compute()`` returns what a local call returns, after writing the prints to
  ``sys.stdout`` (chunks in lane order) and the lane-private rows of written arrays
  back into the caller's arrays, on the client (``.chunks`` is its Dask collection).

Either way a lane's error reaches the caller as the lowest failing lane's: chunk tasks
hand errors back as values, and the results pass through a chain of small gate tasks
in lane order (or, for a ``DaskCall``, the client picks the first failing chunk).
"""

from __future__ import annotations

import sys
import weakref
from operator import attrgetter, getitem

import numpy as np

from ..effects import effects
from .. import events, trees
from ..arguments import flatten_arguments, int_arguments, lane_leaves
from ..ir.core import Function
from ..launch import result
from . import stages
from .ship import KernelSpec, chunk_ir, ship
from .stages import first_error, refuse
from .worker import ChunkOut, Layout, run_chunk, run_stage
from ..profiler import merge_chunks

_ir_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def is_dask_array(a) -> bool:
    """Is ``a`` a ``dask.array.Array`` (checked without importing dask)?"""
    return type(a).__module__.startswith("dask.array") and hasattr(a, "chunks")


def call(kernel, args: tuple):
    """``kernel(*args)`` with Dask arrays among the arguments: lazily."""
    import dask.array as da
    from dask.base import tokenize

    names = kernel.param_names
    for name, a in _leaves(names, args):
        if type(a).__module__.startswith("dask.") and not is_dask_array(a):
            raise TypeError(f"argument '{name}' is a Dask {type(a).__name__}; kernels take "
                            f"dask.array.Array as varying arguments")
        if is_dask_array(a) and name.split("[")[0].split(".")[0] not in kernel.varying:
            raise TypeError(f"argument '{name}' is a Dask array but not varying: uniform "
                            f"arguments are shipped whole (pass a NumPy array), or list "
                            f"'{name}' in varying=")
        if is_dask_array(a) and any(np.isnan(c) for c in a.chunks[0]):
            raise ValueError(f"argument '{name}' has unknown chunk sizes; call "
                             f".compute_chunk_sizes() on it first")
    # the types come from the arrays' metadata: nothing is computed
    meta = [_meta(a) for a in args]
    values, types = kernel.signature(meta)
    lanes = kernel.lanes_for(args)
    first = next(a for n, a in _leaves(names, args) if is_dask_array(a))
    lane_chunks = first.chunks[0]
    fn, shape_values = _ir(kernel, types, values)
    flat_values, flat_types = flatten_arguments(list(values), list(types))
    kernel.check_aliasing(fn, flat_values, flat_types)
    written, added = _check_writes(fn), _only_added(fn)
    for i in written + added:
        if not flat_values[i].flags.writeable:
            raise ValueError(f"argument '{fn.params[i].name}' is read-only and the kernel "
                             f"writes it")
    plan = stages.plan(fn, lanes, {fn.params[i].id for i in added})  # or refuses
    profiled = events.RECORDING and not plan.cross  # (hydra.profile: lane-local kernels)
    spec = KernelSpec(ship(kernel.pyfunc), kernel.varying, kernel.backend_name,
                      tuple(sorted(kernel.options.items())), tuple(types), bool(plan.cross),
                      shape_values, profiled)
    spec_key = "hydra-kernel-" + spec.key[:32]
    deps, sources, layers = [], [], {spec_key: spec}
    for name, a, v, t in zip(names, args, values, types):
        if name in kernel.varying:  # a container's leaves each chunked along the lanes
            for _, x in lane_leaves(name, a):
                arr = x if is_dask_array(x) else da.from_array(np.asarray(x), chunks=-1)
                arr = arr.rechunk({0: lane_chunks, **{i: -1 for i in range(1, arr.ndim)}})
                deps.append(arr)
                sources.append(("chunk", len(deps) - 1))
        elif isinstance(v, np.ndarray):
            key = f"hydra-array-{tokenize(v)}"  # one key: each worker fetches it once
            layers[key] = v
            sources.append(("key", key))
        else:
            sources += [("lit", x) for x in flatten_arguments([v], [t])[0]]
    token = tokenize(spec.key, lane_chunks, [d.name for d in deps],
                     [s for s in sources if s[0] != "chunk"])
    starts = np.concatenate([[0], np.cumsum(lane_chunks)]).astype(int).tolist()
    chunk_keys = build(plan, spec_key, sources, tuple(written), tuple(added), deps,
                       starts, lanes, token, fn.name, layers)
    graph = _graph(f"hydra-call-{fn.name}-{token}", layers, deps)
    if written or added or plan.prints or fn.notes["result_tree"] == trees.NONE or profiled:
        call = DaskCall(graph, chunk_keys, fn, lanes, starts,
                        {i: flat_values[i] for i in written},
                        {i: flat_values[i] for i in added})
        call.kernel = kernel  # a profiled call's chunks merge into the open profiles
        return call
    return _arrays(graph, chunk_keys, fn, lane_chunks, token)


def _leaves(names, args):
    """(name, value) of every argument's leaves (a container's, with their paths)."""
    for name, a in zip(names, args):
        if trees.is_container(a):
            leaves, treedef = trees.flatten(a, name)
            yield from zip(trees.paths(treedef, name), leaves)
        else:
            yield name, a


def _meta(a):
    """``a`` with its Dask arrays (in containers too) replaced by empty NumPy arrays of
    their dtype and trailing shape: the call is typed from metadata alone."""
    def one(x):
        return np.empty((0, *x.shape[1:]), x.dtype) if is_dask_array(x) else x
    if trees.is_container(a):
        leaves, treedef = trees.flatten(a)
        return trees.unflatten(treedef, [one(x) for x in leaves])
    return one(a)


def _ir(kernel, types, values) -> tuple[Function, tuple]:
    """The predicated IR of this call (no backend compile: ``ship.chunk_ir``), built as a
    local call builds it, and the uniform ints (name, value) that shapes depend on: the
    workers build the same IR from them.  Cached per kernel, types and the values of
    those ints (as a local call's specializations: another value of an int no shape
    depends on builds nothing)."""
    cache = _ir_cache.setdefault(kernel, {"names": {}, "built": {}})
    types = tuple(types)
    ints = int_arguments(kernel.param_names, values, types)

    def key() -> tuple:
        return types, tuple((n, ints.get(n)) for n in sorted(cache["names"].get(types, ())))
    if key() not in cache["built"]:
        fn, pinned = chunk_ir(kernel.pyfunc, types, kernel.varying, known=ints)
        cache["names"][types] = cache["names"].get(types, frozenset()) | set(pinned)
        cache["built"][key()] = fn, tuple(sorted(pinned.items()))
    return cache["built"][key()]


def _check_writes(fn: Function) -> list[int]:
    """Flat indices of the uniform array parameters the kernel writes (each chunk writes
    its own rows); other writes are refused."""
    index = {p.id: i for i, p in enumerate(fn.params)}
    written = []
    for op in fn.walk():
        array = op.written_array  # a store or a sub-array store (atomic_add: _only_added)
        if array is None or op.opcode == "intrinsic":
            continue
        name = array.name or "an array"
        if array.id not in index:
            if not array.varying:
                refuse(op.loc, f"the kernel writes the captured array {name}: each Dask "
                       f"worker has its own copy, so the write would be lost",
                       "pass the array as an argument")
            continue  # a per-lane local array
        if array.varying:
            refuse(op.loc, f"the kernel writes its varying argument '{name}' in place: Dask "
                   f"chunks are read-only inputs", "return the values instead")
        if index[array.id] not in written:
            written.append(index[array.id])
    return written


def _only_added(fn: Function) -> list[int]:
    """Flat indices of the uniform array parameters that the kernel only ``atomic_add``s
    into (nothing else reads or writes them, ``hydra.effects``: not a load, a store, an
    array operation such as ``acc.sum()`` or a return): each chunk adds into zeros, the
    sums are added at compute."""
    accesses = effects(fn).accesses
    return [i for i, p in enumerate(fn.params) if not p.varying and accesses.get(p.id)
            and all(op.opcode == "intrinsic" and op.attrs["name"] == "atomic_add"
                    and op.operands[0] is p for _, op in accesses[p.id])]


def build(stage_plan: stages.StagePlan, spec_key: str, sources: list, written: tuple,
          added: tuple, deps: list,
          starts: list[int], lanes: int, token: str, fname: str, layers: dict) -> list:
    """Add the chunk tasks (and, for staged kernels, the combine and scan tasks) to
    ``layers``; the keys of the tasks that hand back each chunk's ``ChunkOut``."""
    n = len(starts) - 1
    keyed = [s for s in sources if s[0] != "lit"]
    layout = Layout(tuple((("dep", keyed.index(s)) if s[0] != "lit" else s) for s in sources),
                    written, added)

    def inputs(c: int) -> list:
        return [(deps[s[1]].name, c, *([0] * (deps[s[1]].ndim - 1))) if s[0] == "chunk"
                else s[1] for s in keyed]

    name = f"hydra-{fname}-{token}"
    if not stage_plan.cross:
        for c in range(n):
            layers[(name, c)] = (run_chunk, spec_key, layout, starts[c], starts[c + 1], lanes,
                                 *inputs(c))
        return [(name, c) for c in range(n)]
    previous = [None] * n
    carried = [None] * n
    for k in range(len(stage_plan.cross) + 1):
        stage = f"{name}-stage{k}"
        for c in range(n):
            layers[(stage, c)] = (run_stage, spec_key, k, layout, starts[c], starts[c + 1],
                                  lanes, previous[c], carried[c], *inputs(c))
        previous = [(stage, c) for c in range(n)]
        if k == len(stage_plan.cross):
            return previous
        cross = stage_plan.cross[k]
        part = f"{name}-partial{k}"
        for c in range(n):
            layers[(part, c)] = (attrgetter("partial"), (stage, c))
        level = [(part, c) for c in range(n)]
        depth = 0
        while len(level) > 1 and cross.name != "prefixsum":
            comb = f"{name}-combine{k}-{depth}"
            groups = [level[i:i + stages.SPLIT_EVERY]
                      for i in range(0, len(level), stages.SPLIT_EVERY)]
            for g, group in enumerate(groups):
                layers[(comb, g)] = (stages.combine, cross.name, list(group))
            level = [(comb, g) for g in range(len(groups))]
            depth += 1
        total = f"{name}-global{k}"
        if cross.name != "prefixsum":
            layers[total] = (stages.aggregate, cross, level[0])
            carried = [total] * n
        else:
            layers[total] = (stages.scan_offsets, level)
            carried = [(getitem, total, c) for c in range(n)]
    raise AssertionError("unreachable")


def _graph(name: str, layers: dict, deps: list):
    """One layer, named by everything the call depends on (two calls must never share a
    layer name: merged graphs keep one layer per name)."""
    from dask.highlevelgraph import HighLevelGraph
    return HighLevelGraph.from_collections(name, layers, dependencies=deps)


def _leaf(out: ChunkOut, i: int, gate=None):
    return out.leaves[i]


def _gate(*errors) -> None:
    """Raise the first of ``errors`` (they are in lane order), if any."""
    error = _first(*errors)
    if error is not None:
        raise error


def _first(*errors):
    return next((e for e in errors if e is not None), None)


def _gates(chunk_keys: list, token: str, layers: dict) -> list:
    """Per chunk, a task that raises the first error of the chunks up to it: the error of
    the lowest failing lane, whatever order the tasks ran in.  The chunks before each one
    are the O(log n) nodes of a tree over the chunks' errors (a prefix scan), so that no
    chain of n tasks delays the first chunk's result."""
    errors = [(f"hydra-error-{token}", c) for c in range(len(chunk_keys))]
    for key, chunk in zip(errors, chunk_keys):
        layers[key] = (attrgetter("error"), chunk)

    def node(lo: int, hi: int):
        if hi - lo == 1:
            return errors[lo]
        key = (f"hydra-errors-{token}", lo, hi)
        if key not in layers:
            mid = (lo + hi) // 2
            layers[key] = (_first, node(lo, mid), node(mid, hi))
        return key

    def before(lo: int, hi: int, c: int) -> list:
        if hi <= c:
            return [node(lo, hi)]
        if lo >= c or hi - lo == 1:
            return []
        mid = (lo + hi) // 2
        return before(lo, mid, c) + before(mid, hi, c)

    n, gate = len(chunk_keys), f"hydra-gate-{token}"
    for c in range(n):
        layers[(gate, c)] = (_gate, *before(0, n, c), errors[c])
    layers[(gate, "all")] = (_gate, node(0, n))
    return [(gate, c) for c in [*range(n), "all"]]


def _arrays(graph, chunk_keys, fn, lane_chunks, token):
    """Dask arrays (and 0-d arrays) of the result leaves, in the result's tuple shape."""
    import dask.array as da
    from dask.highlevelgraph import HighLevelGraph
    layers: dict = {}
    gates = _gates(chunk_keys, token, layers)
    graph = HighLevelGraph({**graph.layers, f"hydra-gate-{token}": layers},
                           {**graph.dependencies, f"hydra-gate-{token}": set(graph.layers)})
    arrays = []
    for i, v in enumerate(fn.body.terminator.operands):
        name = f"hydra-result-{i}-{token}"
        if v.varying:
            layer = {(name, c, *[0] * _ndim(v.type)): (_leaf, k, i, gates[c])
                     for c, k in enumerate(chunk_keys)}
            # a per-lane array's shape is known when it runs: unknown sizes until then
            chunks = (lane_chunks, *[(np.nan,)] * _ndim(v.type))
        else:  # the same on every chunk (or, after a reduction, the global value):
            # one block, of the uniform per-lane array's shape where it is one
            shape = getattr(v.type, "shape", None) or (np.nan,) * _ndim(v.type)
            layer = {(name, *[0] * _ndim(v.type)): (_leaf, chunk_keys[0], i, gates[-1])}
            chunks = tuple((n,) for n in shape)
        g = HighLevelGraph({**graph.layers, name: layer},
                           {**graph.dependencies, name: set(graph.layers)})
        arrays.append(da.Array(g, name, chunks, dtype=stages.dtype_of(v.type)))
    return trees.unflatten(fn.notes["result_tree"], arrays)


def _ndim(t) -> int:
    return getattr(t, "ndim", 0)


class DaskCall:
    """A lazy kernel call whose ``.compute()`` also reaches the caller: prints go to
    ``sys.stdout`` and lane-private writes into the caller's arrays, then the result is
    what a local call returns.

    Not a Dask collection itself, on purpose: ``dask.compute`` finalizes collections on
    the cluster, where the caller's stdout and arrays are not.  ``.chunks`` is the
    collection of the chunks' raw outputs, for ``dask.persist`` and friends."""

    def __init__(self, graph, chunk_keys, fn, lanes, starts, targets: dict,
                 added: dict) -> None:
        self.chunks = _ChunkOuts(graph, list(chunk_keys))
        self._fn, self._lanes, self._starts, self._targets = fn, lanes, starts, targets
        self._added = added

    def compute(self, **kwargs):
        """Run the call on the active Dask scheduler (``scheduler=`` as for any Dask
        collection); returns what a local call does."""
        import dask
        (outs,) = dask.compute(self.chunks, **kwargs)  # ChunkOuts, in lane order
        if any(out.profile for out in outs):
            merge_chunks(self.kernel, self._fn, [out.profile for out in outs if out.profile])
        error = first_error(out.error for out in outs)
        for out in outs:  # chunks in lane order, each in lockstep order
            if out.printed:
                sys.stdout.write(out.printed)
            if error is not None and out.error is error:
                raise error
        for i, target in self._targets.items():
            for start, out in zip(self._starts, outs):
                target[start:start + len(out.rows[i])] = out.rows[i]
        for i, target in self._added.items():
            for out in outs:  # chunks in lane order
                target += out.added[i]
        leaves = [np.concatenate([o.leaves[j] for o in outs]) if v.varying else
                  outs[0].leaves[j] for j, v in enumerate(self._fn.body.terminator.operands)]
        return result(self._fn, leaves, self._lanes)

    def __repr__(self) -> str:
        return f"<hydra.DaskCall {self._fn.name}: {len(self.chunks.keys)} chunks, lazy>"


class _ChunkOuts:
    """The Dask collection of a call's per-chunk outputs (``ChunkOut``s in lane order)."""

    def __init__(self, graph, keys: list) -> None:
        self.graph, self.keys = graph, keys

    def __dask_graph__(self):
        return self.graph

    def __dask_keys__(self):
        return list(self.keys)

    def __dask_layers__(self):
        return tuple(self.graph.layers)

    def __dask_tokenize__(self):
        return tuple(self.keys)

    def __dask_postcompute__(self):
        return list, ()

    def __dask_postpersist__(self):
        return (lambda dsk, *a, rename=None: _ChunkOuts(dsk, self.keys)), ()

    @staticmethod
    def __dask_optimize__(dsk, keys, **kwargs):
        return dsk

    @staticmethod
    def __dask_scheduler__(dsk, keys, **kwargs):
        import dask.threaded
        return dask.threaded.get(dsk, keys, **kwargs)


__all__ = ["call", "is_dask_array", "DaskCall"]
