"""The public API: ``hydra.compile``, ``Kernel``, ``hydra.spmd``.

``compile`` reads and checks the function at once (unsupported syntax raises
there).  A call checks its arguments (count, lengths of varying arguments, types),
specializes on their types (cached, as Numba does), runs the pipeline and hands
the predicated IR to the backend.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import threading
import time
import weakref
from types import MappingProxyType

import numpy as np

from . import dataflow, events, grad
from .arguments import (device_dtype_shape, flatten_arguments, int_arguments, is_device_array,
                        is_readonly_device_array, lane_leaves,
                        leaf_names, leaves_of, typed_argument, unshaped)
from .arrays import copy_back, native_arguments
from .backends import OPTION_NAMES, PROTOCOLS, default_backend, get_backend, stage_backend
from .effects import effects, written_arrays
from .errors import KernelValueError
from .frontend import build_specialized, check_subset, parse_function
from .frontend.binding import binder, parameter_names
from .frontend.early import check_early
from .launch import CHECK_IR, PreparedCall, result
from .ir.core import Function
from .ir.printer import print_function
from .passes import Sites, run_pipeline
from .races import warn_races
from .views import check_layouts
from .progress import progress as _progress
from .progress import stage
from .types import ArrayType, ScalarType, Type

STAGES = ("ast", "ssa", "grad", "predicated", *dict.fromkeys(
    s for p in PROTOCOLS.values() for s in p.stages))


class Kernel:
    """A compiled SPMD function.  Call it with the function's arguments to run its lanes."""

    #: what the last run moved between host and device and launched (the cuda backend:
    #: launches, host_round_trips, uploads); empty on the other backends
    last_run_stats: dict = MappingProxyType({})
    #: counts lanes per region (``hydra.profile``): the twin ``instrumented()`` makes
    counting = False

    def __init__(self, pyfunc, lanes: int | None = None, varying=(), backend: str | None = None,
                 **options) -> None:
        if lanes is not None and (isinstance(lanes, bool)
                                  or not isinstance(lanes, (int, np.integer)) or lanes < 1):
            raise ValueError(f"lanes must be an integer >= 1, not {lanes!r}")
        self.parsed = parse_function(pyfunc)
        check_subset(self.parsed)
        check_early(self.parsed)
        # a gradient (hydra.grad) builds its own IR from its function's
        self.pyfunc = getattr(pyfunc, "__hydra_grad__", None) or self.parsed.pyfunc
        self.__hydra_kernel__ = self.pyfunc
        functools.update_wrapper(self, self.pyfunc)
        self.lanes = None if lanes is None else int(lanes)
        self.param_names = parameter_names(self.parsed.node)
        #: the call's arguments, one per parameter: positional, keyword and default, as
        #: Python binds them
        self.bind = binder(self.parsed.pyfunc)
        self.varying = (varying,) if isinstance(varying, str) else tuple(varying)
        unknown = [v for v in self.varying if v not in self.param_names]
        if unknown:
            raise ValueError(f"varying names {unknown} are not parameters of "
                             f"{self.pyfunc.__name__}{tuple(self.param_names)}")
        self.backend_name = backend or default_backend()
        self.backend = get_backend(self.backend_name)
        self.backend.protocol.check_options(options)
        self.options = options
        self._cache: dict[tuple, tuple[Function, object]] = {}
        # the kernel specializes on array shapes once it needs them, and on the uniform
        # ints (by name) that shapes depend on (``_compile``); the last call's ints
        self._shaped, self._shape_params, self._shape_values = False, {}, {}
        self._lock = threading.RLock()  # compiles (see ``specialize``)

    def __repr__(self) -> str:
        return (f"<hydra.Kernel {self.pyfunc.__name__} lanes={self.lanes} "
                f"varying={self.varying} backend={self.backend_name!r}>")

    # --- arguments --------------------------------------------------------------------

    def lanes_for(self, args) -> int:
        lengths = {}
        for name, a in zip(self.param_names, args):
            if name in self.varying:
                for path, x in lane_leaves(name, a):
                    shape = device_dtype_shape(x)[1] if is_device_array(x) else \
                        tuple(x.shape) if hasattr(x, "shape") else np.shape(x)
                    if not shape:
                        raise ValueError(f"varying argument '{path}' must be an array with "
                                         f"one entry per lane, got a scalar")
                    lengths[path] = shape[0]
        if self.lanes is not None:
            for name, n in lengths.items():
                if n != self.lanes:
                    raise ValueError(f"varying argument '{name}' has length {n}, but the "
                                     f"kernel runs {self.lanes} lanes")
            return self.lanes
        if not lengths:
            raise ValueError(f"{self.pyfunc.__name__}: give lanes= (no varying argument "
                             f"tells how many lanes to run)")
        if len(set(lengths.values())) > 1:
            shown = ", ".join(f"'{k}' has {v}" for k, v in lengths.items())
            raise ValueError(f"varying arguments disagree on the number of lanes: {shown}")
        return next(iter(lengths.values()))

    def signature(self, args) -> tuple[list, list[Type]]:
        if len(args) != len(self.param_names):
            raise TypeError(f"{self.pyfunc.__name__}() takes {len(self.param_names)} "
                            f"argument(s) ({', '.join(self.param_names)}), {len(args)} given")
        values, types = [], []
        for name, a in zip(self.param_names, args):
            v, t = typed_argument(self, name, a, name in self.varying)
            values.append(v)
            types.append(t)
        return values, types

    def _refuse_written_lists(self, fn: Function, args) -> None:
        """A varying argument that is not an array (a list) reaches the kernel as a copy:
        writes into it would be lost, so a kernel that writes one is refused."""
        if all(type(a) is np.ndarray for name, a in zip(self.param_names, args)
               if name in self.varying):
            return  # (every call asks: the common case at once)
        written = {v.id for v in written_arrays(fn)}
        params = dict(zip(fn.param_names, fn.params))
        params.update((path, params[ident]) for ident, path in
                      fn.notes.get("param_paths", {}).items())  # a container's leaves
        for top, arg in zip(self.param_names, args):
            for name, a in lane_leaves(top, arg) if top in self.varying else ():
                if name in params and params[name].id in written \
                        and not isinstance(a, np.ndarray) and not is_device_array(a):
                    raise TypeError(f"argument '{name}' is a {type(a).__name__}, which the "
                                    f"kernel writes: the writes would be lost; pass a NumPy "
                                    f"array (np.asarray({name})) and read the results from it")

    def check_aliasing(self, fn: Function, values, types) -> None:
        """Refuse two uniform array arguments that share memory where the kernel writes
        one of them (a local call's check, and a Dask call's on the client)."""
        stored = {v.id for v in written_arrays(fn)}
        arrays = [(p, v) for p, v, t in zip(fn.params, values, types)
                  if isinstance(t, ArrayType) and not p.varying]
        for i, (p, a) in enumerate(arrays):
            for q, b in arrays[i + 1:]:
                if is_device_array(a) or is_device_array(b):
                    continue  # GPU memory: numpy cannot tell; the cuda backend copies nothing
                if (p.id in stored or q.id in stored) and np.shares_memory(a, b):
                    shown = fn.notes.get("param_paths", {})  # p['W'], not p_W
                    raise ValueError(f"arguments '{shown.get(p.name, p.name)}' and "
                                     f"'{shown.get(q.name, q.name)}' share memory and the "
                                     f"kernel writes one of them; pass separate arrays")

    # --- compiling --------------------------------------------------------------------

    def specialize(self, types: list[Type], shape_values: dict | None = None
                   ) -> tuple[Function, object]:
        """The predicated IR and backend runner for these argument types (cached).
        ``shape_values``: the call's uniform int arguments by name, which a per-lane
        array's shape may depend on (default: the last call's).  Safe to call from
        several threads at once, with different shapes: the key is computed from this
        call's values, and compiles (which may make the kernel specialize on shapes
        from then on) hold the kernel's lock."""
        values = shape_values if shape_values is not None else self._shape_values
        key = self._key(types, values)[0]
        found = self._cache.get(key)
        if found is not None:
            return found
        with self._lock:
            return self._compile(list(types), values)

    def _key(self, types: list[Type], values: dict) -> tuple[tuple, list, dict]:
        """(cache key, the types the IR is built from, pinned shape values)."""
        pinned = {name: values[name] for name in self._shape_params if name in values}
        if not self._shaped:
            # array shapes join the key only once a kernel needs them (whole-array
            # operations, SPEC section 8): kernels that only index arrays compile once
            types = [unshaped(t) for t in types]
        return tuple(types) + tuple(sorted(pinned.items())), types, pinned

    def _compile(self, full: list[Type], values: dict) -> tuple[Function, object]:
        """``specialize``'s miss, holding ``self._lock``.  Once whole-array code needs
        array shapes (``build_specialized`` builds again with them), this kernel
        specializes on shapes from then on, and on the values of the uniform ints that
        shapes depend on."""
        key, types, pinned = self._key(full, values)
        if key not in self._cache:
            with _progress(f"compiling {self.pyfunc.__name__}"
                           f"({', '.join(map(str, types))}) for {self.backend_name}"):
                stage("building the typed SSA")
                fn, self._shaped, pinned = build_specialized(
                    self.pyfunc, full, values, self.varying, self._shaped, pinned)
                self._shape_params = {**self._shape_params, **dict.fromkeys(pinned)}
                key, types, _ = self._key(full, values)
                self._cache[key] = self._finish(fn, types, pinned)
        return self._cache[key]

    def _finish(self, fn: Function, types: list[Type], pinned: dict) -> tuple[Function, object]:
        """A specialization from its typed SSA: the passes, then the backend's code."""
        stage("running the passes")
        sites = Sites() if self.counting else None  # the profiler's twin (instrumented)
        fn = run_pipeline(fn, set(self.varying), check=CHECK_IR, profile=sites)
        if self.lanes != 1 and not self.counting:  # one lane races with no one
            warn_races(fn)
        stage(f"generating {self.backend_name} code")
        structured = self._structured(types, self._shaped, pinned, profile=sites)
        return fn, self.backend.compile(fn, self.options, structured)

    def _structured(self, types: list[Type], shaped: bool, pinned: dict, backend=None,
                    profile: Sites | None = None):
        """A builder of the unlinearized IR (as the IR at hand was built: ``shaped``,
        ``pinned``), for backends whose hardware diverges (their protocol says they take
        it); None for the others."""
        if not (backend or self.backend).protocol.structured:
            return None

        def structured() -> Function:
            ir = build_specialized(self.pyfunc, list(types), varying=self.varying,
                                   shaped=shaped, pinned=pinned)[0]
            return run_pipeline(ir, set(self.varying), check=CHECK_IR, linearized=False,
                                profile=profile)
        return structured

    def __call__(self, *args, **kwargs):
        args = self.bind(*args, **kwargs)
        if any(type(x).__module__.startswith("dask.") for x in leaves_of(self.param_names, args)):
            from .dask import call  # SPEC section 10: lanes as Dask tasks, lazily
            return call(self, args)
        return dataflow.call(self, args)

    def submit(self, *args, **kwargs) -> "dataflow.Future":
        """Start a launch and return its ``hydra.Future`` at once (see ``hydra.dataflow``)."""
        return dataflow.submit(self, self.bind(*args, **kwargs))

    def prepare(self, args) -> PreparedCall:
        """Everything a launch needs before it runs: checked arguments, the compiled code
        (``args``: bound, one per parameter)."""
        if events.RECORDING and not self.counting:  # inside ``hydra.profile()``
            prepared = self.instrumented().prepare(args)
            events.note_sites(self, prepared.fn)
            return prepared
        values, types = self.signature(args)
        lanes = self.lanes_for(args)
        # uniform ints a per-lane array's shape may depend on (see specialize); this
        # call's, passed on (another thread may be preparing a call with others)
        shape_values = int_arguments(self.param_names, values, types)
        self._shape_values = shape_values  # the default of a later ``specialize(types)``
        fn, runner = self.specialize(types, shape_values)
        self._refuse_written_lists(fn, args)
        # the leaves' names as the user writes them, where a check may need them
        shown = leaf_names(self.param_names, types) \
            if fn.notes.get("python_int_params") else fn.param_names
        values, types = flatten_arguments(values, types)
        _check_python_ints(fn, values, shown)
        _check_writeable(fn, values)
        check_layouts(fn, values)
        self.check_aliasing(fn, values, types)
        return PreparedCall(fn, runner, values, types, lanes)

    def run_prepared(self, prepared: PreparedCall):
        """Run a call ``prepare`` made ready; its value."""
        fn, runner, values, _, lanes = prepared
        # byte-swapped arrays: copy in, and out where written
        values, swapped = native_arguments(values, effects(fn).params)
        start = time.perf_counter() if events.RECORDING else None
        try:
            leaves = runner(values, lanes)
        finally:
            copy_back(swapped)
            # the cuda backend's count of transfers and launches (devarrays.Stats)
            self.last_run_stats = getattr(runner, "last_run_stats", None) or {}
            if start is not None:
                events.record("kernel", self.pyfunc.__name__, start, backend=self.backend_name,
                              lanes=lanes)
        return result(fn, leaves, lanes)

    # --- tools ------------------------------------------------------------------------

    def instrumented(self) -> "Kernel":
        """This kernel's twin that counts lanes per line (``hydra.profile``): its own
        specializations, so the kernel itself pays nothing."""
        with self._lock:
            twin = self.__dict__.get("_counting_twin")
            if twin is None:
                twin = object.__new__(type(self))
                twin.__dict__.update(self.__dict__)
                twin.__dict__.update(counting=True, _cache={}, _lock=threading.RLock())
                self._counting_twin = twin
            return twin

    def profile(self, *args, **kwargs):
        """Run the kernel once with lane counters and timers: a ``hydra.Profile`` (its
        ``result`` is the call's value).  See docs/guide.md "Why is my kernel slow?"."""
        from .profiler import profile
        with profile() as p:
            p.result = self(*args, **kwargs)
        return p

    def dump_ir(self, stage: str = "predicated", *example_args, types=None,
                after: str | None = None) -> str:
        """The IR text at ``stage`` for these example arguments (or ``types=``)."""
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; the stages are {', '.join(STAGES)}")
        if stage == "ast":
            return ast.dump(self.parsed.node, indent=2) + "\n"
        fn, types, shaped, pinned = self._built(stage, example_args, types, after)
        if stage in ("ssa", "predicated", "grad"):
            return print_function(fn)
        backend = get_backend(stage_backend(self.backend_name, stage))
        return backend.dump(fn, stage, self.options,
                            self._structured(types, shaped, pinned, backend))

    def ir(self, stage: str = "predicated", *example_args, types=None,
           after: str | None = None) -> Function:
        """The IR ``dump_ir`` prints at ``stage`` ("ssa", "predicated" or "grad"), as a
        ``Function`` (``%hydra_ir`` draws its control flow)."""
        if stage not in ("ssa", "predicated", "grad"):
            raise ValueError(f"stage {stage!r} is not IR; the IR stages are ssa, "
                             f"predicated and grad")
        return self._built(stage, example_args, types, after)[0]

    def _built(self, stage: str, example_args, types, after):
        """(the IR after the passes ``stage`` and ``after`` ask for, types, shaped,
        pinned), built as a call with these types builds it: without array shapes
        unless whole-array code needs them; stage grad: hydra.value_and_grad of the
        function (SPEC §11)."""
        values = None
        if types is None:
            values, types = self.signature(self.bind(*example_args))
        known = dict(zip(self.param_names, values)) if values is not None else {}
        pyfunc = _gradient_for_dump(self, types) if stage == "grad" else self.pyfunc
        fn, shaped, pinned = build_specialized(pyfunc, list(types), known, self.varying)
        if stage == "grad" or stage == "ssa" and after is None:
            after = "uniformity"
        return run_pipeline(fn, set(self.varying), stop_after=after), types, shaped, pinned


def _gradient_for_dump(kernel: Kernel, types: list[Type]):
    """The kernel's gradient function (a ``hydra.grad`` kernel's own, else
    ``hydra.value_and_grad`` of the function by every float scalar parameter)."""
    if isinstance(kernel.pyfunc, grad.GradFunction):
        return kernel.pyfunc
    floats = tuple(i for i, t in enumerate(types)
                   if isinstance(t, ScalarType) and t.kind == "f")
    if not floats:
        raise ValueError(f"stage 'grad': {kernel.pyfunc.__name__} has no float parameter "
                         f"to differentiate")
    return grad.value_and_grad(kernel.pyfunc, argnums=floats)


grad.KERNEL = Kernel  # (hydra.grad sits below the api: a gradient called in plain Python)


def _check_writeable(fn: Function, values: list) -> None:
    """Every array the kernel may write (a parameter, varying or not, or a captured
    array) must be writeable: a read-only memmap, a broadcast view or a buffer over
    ``bytes`` would be written through (or crash) in native code.  Checked before
    anything runs, so nothing is half done."""
    shown = fn.notes.get("param_paths", {})  # a container's leaves: p['W'], not p_W
    given = {p.id: (f"argument '{shown.get(p.name, p.name)}'", a)
             for p, a in zip(fn.params, values)}
    for v in written_arrays(fn):
        if v.id in given:
            what, a = given[v.id]
        else:
            op = next(op for op in fn.walk() if op.opcode == "global_array" and op.result is v)
            what, a = f"the captured array '{op.attrs['name']}'", op.attrs["array"]
        if isinstance(a, np.ndarray) and not a.flags.writeable \
                or is_readonly_device_array(a):
            at = effects(fn).write_at(v)
            raise KernelValueError(f"{what} is read-only and the kernel writes it (a "
                                   f"read-only memmap, np.broadcast_to view or array over "
                                   f"bytes cannot be written); pass a writeable array, e.g. "
                                   f"a copy", None, at)


def _check_python_ints(fn: Function, values: list, shown: list[str]) -> None:
    """A Python int argument must fit every NumPy type it meets in the kernel (NumPy 2
    raises OverflowError otherwise): checked here, before anything runs."""
    for name, user_name, a in zip(fn.param_names, shown, values):
        for tname, loc in fn.notes.get("python_int_params", {}).get(name, {}).items():
            info = np.iinfo(tname)
            if not info.min <= int(a) <= info.max:
                raise OverflowError(f"argument '{user_name}' = {int(a)} does not fit in "
                                    f"{tname}, the type it meets at {loc} (NumPy 2 "
                                    f"raises OverflowError there too)")


def compile(fn=None, *, lanes: int | None = None, varying=(), backend: str | None = None,
            **options):
    """Compile ``fn`` to run ``lanes`` lanes in lockstep; without ``fn``, a decorator."""
    if fn is None:
        return lambda f: Kernel(f, lanes=lanes, varying=varying, backend=backend, **options)
    if isinstance(fn, int) and not callable(fn):
        raise TypeError("hydra.compile(fn, lanes=N): the function comes first; "
                        "use hydra.compile(lanes=N) as a decorator")
    return Kernel(fn, lanes=lanes, varying=varying, backend=backend, **options)


_spmd_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def spmd(lanes: int, fn, *args, varying=(), backend: str | None = None, **options):
    """Run ``fn`` on ``lanes`` lanes once (compiling it, cached per function and options).

    Keyword arguments are options (``varying=``, ``backend=``, ``threads=``, ...), never
    the kernel's: pass the kernel's arguments by position, or leave them to their
    defaults; for keyword arguments call ``hydra.compile(fn, lanes=N)(..., name=value)``."""
    key = (lanes, tuple(varying) if not isinstance(varying, str) else (varying,), backend,
           tuple(sorted(options.items())))
    unknown = set(options) - set(OPTION_NAMES)
    params: set = set()
    if unknown:
        with contextlib.suppress(TypeError, ValueError):  # no signature: Kernel says why
            params = set(inspect.signature(fn).parameters)
    if unknown & params:
        name = sorted(unknown & params)[0]
        raise TypeError(f"hydra.spmd takes its keyword arguments as options, and '{name}' "
                        f"is a parameter of {getattr(fn, '__name__', 'the kernel')}, not an "
                        f"option: pass it by position (hydra.spmd(N, fn, ...)) or call "
                        f"hydra.compile(fn, lanes=N)(..., {name}=...)")
    per_fn = _spmd_cache.setdefault(fn, {}) if inspect.isfunction(fn) else {}
    if key not in per_fn:
        per_fn[key] = Kernel(fn, lanes=lanes, varying=varying, backend=backend, **options)
    return per_fn[key](*args)
