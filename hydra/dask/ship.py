"""A kernel on its way to a Dask worker: shipped as source, compiled once per process.

A process-based worker cannot be handed a function defined in ``__main__``, in a
notebook cell or as a closure by reference, and hydra compiles from source anyway; so
the client ships a ``Shipped`` function: its source lines (registered in the worker's
``linecache`` under the original file name, so errors name the user's file and line),
its name and first line, and the values it reads from outside (closure cells and
globals: numbers and arrays by value, modules by name, helper functions as ``Shipped``
themselves, hydra's intrinsics by name).  No code object is pickled.

``KernelSpec`` adds the kernel's options, varying names, backend and argument types;
its content hash is the key of a per-process cache (``compiled``), so a worker
compiles each kernel once however many tasks it runs (the backend's disk cache
applies too when the kernel asks for ``cache=True``).

The worker compiles the kernel for a *chunk* of lanes: ``offset_lanes`` rewrites the
predicated IR so that ``lane()`` is ``lane0 + `` the chunk-local lane and ``nlanes()``
the global count, both taken from two extra uniform parameters.  That one rewrite
serves every backend (numpy, cpu, cuda) without touching their code generators.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import importlib
import linecache
import textwrap
import threading
import types
from dataclasses import dataclass

from ..backends import get_backend
from ..errors import HydraError
from ..frontend import build_specialized
from ..frontend.source import parse_function
from ..intrinsics import INTRINSICS
from ..ir.core import Function, Op, Value
from ..launch import CHECK_IR
from ..passes import Sites, run_pipeline
from ..types import INT64
from .stages import Program


@dataclass(frozen=True)
class ModuleRef:
    name: str


@dataclass(frozen=True)
class IntrinsicRef:
    name: str


@dataclass(frozen=True)
class Shipped:
    """A Python function as source plus the outside values it reads."""

    name: str
    filename: str
    lines: tuple[str, ...]  # the file's lines; outside the definition only blank lines
    firstlineno: int  # of the ``def`` (decorators dropped) or of the lambda
    lambda_pos: tuple[int, int] | None  # (line, column) of a lambda, else None
    captured: tuple[tuple[str, object], ...]
    key: str


@dataclass(frozen=True)
class GradShipped:
    """A ``hydra.grad`` function: its function shipped, and how it differentiates."""

    function: "Shipped | GradShipped"
    argnums: int | tuple[int, ...]
    has_aux: bool
    with_value: bool
    checkpoint: int | None = None

    @property
    def key(self) -> str:
        text = repr((self.function.key, self.argnums, self.has_aux, self.with_value,
                     self.checkpoint))
        return hashlib.sha256(text.encode()).hexdigest()


def ship(pyfunc, _seen: dict | None = None) -> Shipped:
    """The ``Shipped`` form of ``pyfunc`` (a plain function, lambda or closure; a
    ``hydra.grad`` function as a ``GradShipped``)."""
    seen = {} if _seen is None else _seen
    if id(pyfunc) in seen:
        return seen[id(pyfunc)]
    grad = getattr(pyfunc, "__hydra_grad__", None)
    if grad is not None:
        seen[id(pyfunc)] = GradShipped(ship(grad.__wrapped__, seen),
                                       grad.indices[0] if grad.single else grad.indices,
                                       grad.has_aux, grad.with_value, grad.checkpoint)
        return seen[id(pyfunc)]
    parsed = parse_function(pyfunc)
    filename = parsed.filename
    all_lines = linecache.getlines(filename)
    if isinstance(parsed.node, ast.Lambda):
        lines = tuple(all_lines)
        first, pos = parsed.node.lineno, (parsed.node.lineno, parsed.node.col_offset)
    else:
        start = parsed.line_offset + min(
            [parsed.node.lineno] + [d.lineno for d in parsed.node.decorator_list])
        end = parsed.line_offset + parsed.node.end_lineno
        lines = tuple(["\n"] * (start - 1) + list(all_lines[start - 1:end]))
        first, pos = parsed.line_offset + parsed.node.lineno, None
    captured = []
    for name in sorted(_free_names(parsed.node, parsed.pyfunc.__code__)):
        try:
            value = parsed.resolve_free(name)
        except KeyError:
            continue
        if getattr(builtins, name, None) is value:
            continue  # print, range, abs...: the worker has them
        captured.append((name, _transportable(value, seen)))
    tokens = [(name, _token(value)) for name, value in captured]
    digest = hashlib.sha256(repr((pyfunc.__name__, filename, lines, first, pos, tokens)).encode())
    shipped = Shipped(pyfunc.__name__, filename, lines, first, pos, tuple(captured),
                      digest.hexdigest())
    seen[id(pyfunc)] = shipped
    return shipped


def _free_names(node: ast.AST, code: types.CodeType) -> set[str]:
    """The names the function reads from outside: plain names (not attributes, so that
    ``a.shape`` does not ship a global called ``shape``) that are not its locals."""
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    return (names - set(code.co_varnames) - set(code.co_cellvars)) | set(code.co_freevars)


def _transportable(value, seen: dict):
    if isinstance(value, types.ModuleType):
        return ModuleRef(value.__name__)
    if getattr(value, "__hydra_intrinsic__", None) in INTRINSICS:
        return IntrinsicRef(value.__hydra_intrinsic__)
    if hasattr(value, "__hydra_kernel__") and not isinstance(value, types.FunctionType):
        value = value.__hydra_kernel__  # a Kernel called from a kernel: its function
    if getattr(value, "__hydra_grad__", None) is not None:
        return ship(value, seen)  # a gradient called as a helper
    if isinstance(value, types.FunctionType):
        try:
            return ship(value, seen)
        except HydraError:
            return value  # no source (e.g. a library's helper): by reference, as pickle does
    return value


def _token(value) -> str:
    if isinstance(value, (Shipped, GradShipped)):
        return value.key
    from dask.base import tokenize
    return tokenize(value)


# --- on the worker ------------------------------------------------------------------------

def rebuild(shipped: Shipped, _made: dict | None = None):
    """The function ``shipped`` describes, made in this process from its source."""
    made = {} if _made is None else _made
    if shipped.key in made:
        return made[shipped.key]
    if isinstance(shipped, GradShipped):
        from ..grad import GradFunction
        made[shipped.key] = GradFunction(rebuild(shipped.function, made), shipped.argnums,
                                         None, shipped.has_aux, shipped.with_value,
                                         shipped.checkpoint)
        return made[shipped.key]
    # errors and hydra's own source reader find the user's lines under the user's name
    # (where this process has the file as it was, e.g. the client itself, it stays)
    have = linecache.getlines(shipped.filename)
    if [ln for ln, mine in zip(have, shipped.lines) if mine != "\n"] != [
            ln for ln in shipped.lines if ln != "\n"]:
        linecache.cache[shipped.filename] = (sum(map(len, shipped.lines)), None,
                                             list(shipped.lines), shipped.filename)
    namespace = {"__builtins__": builtins, "__name__": f"hydra_shipped_{shipped.key[:12]}"}
    for name, value in shipped.captured:
        namespace[name] = _restore(value, made)
    if shipped.lambda_pos is not None:
        tree = ast.parse("".join(shipped.lines))
        node = next(n for n in ast.walk(tree) if isinstance(n, ast.Lambda)
                    and (n.lineno, n.col_offset) == shipped.lambda_pos)
        expr = ast.Expression(node)
        ast.fix_missing_locations(expr)
        fn = eval(compile(expr, shipped.filename, "eval"), namespace)
    else:
        block = "".join(shipped.lines[shipped.firstlineno - 1:])
        tree = ast.parse(textwrap.dedent(block))
        tree.body[0].decorator_list = []  # hydra.compile(...) would wrap it again
        ast.increment_lineno(tree, shipped.firstlineno - 1)
        exec(compile(tree, shipped.filename, "exec"), namespace)
        fn = namespace[shipped.name]
    made[shipped.key] = fn
    return fn


def _restore(value, made: dict):
    if isinstance(value, ModuleRef):
        return importlib.import_module(value.name)
    if isinstance(value, IntrinsicRef):
        from .. import intrinsics
        return getattr(intrinsics, value.name)
    if isinstance(value, (Shipped, GradShipped)):
        return rebuild(value, made)
    return value


@dataclass(frozen=True)
class KernelSpec:
    """Everything a worker needs to compile a kernel for one argument signature."""

    function: Shipped
    varying: tuple[str, ...]
    backend: str
    options: tuple[tuple[str, object], ...]
    types: tuple  # hydra Types of the arguments, as the client's call saw them
    staged: bool = False  # cut into stages at cross-lane ops (``stages.Program``)
    #: the uniform ints (name, value) that per-lane array shapes depend on: constants
    shape_values: tuple[tuple[str, int], ...] = ()
    #: inside ``hydra.profile``: the chunks count lanes per line (``passes.instrument``)
    profiled: bool = False

    @property
    def key(self) -> str:
        text = repr((self.function.key, self.varying, self.backend, self.options, self.types,
                     self.staged, self.shape_values, self.profiled))
        return hashlib.sha256(text.encode()).hexdigest()

    def __dask_tokenize__(self):
        return self.key


@dataclass
class Compiled:
    """A kernel compiled in this process for chunks of lanes."""

    fn: Function  # predicated IR with the two extra parameters of ``offset_lanes``
    runner: object  # the backend's ``runner(args, lanes)`` (lane-local kernels)
    program: object  # the ``stages.Program`` (staged kernels)


_cache: dict[str, Compiled] = {}
_lock = threading.Lock()


def compiled(spec: KernelSpec) -> Compiled:
    """The compiled kernel of ``spec``, made at most once in this process."""
    key = spec.key
    done = _cache.get(key)
    if done is not None:
        return done
    with _lock:  # the threads of one worker wait for the first one's compile
        if key not in _cache:
            _cache[key] = _compile(spec)
        return _cache[key]


def compile_count() -> int:
    """How many kernels this process compiled for chunks (``client.run`` reads it: the
    tests check once per process); nothing leaves the cache."""
    return len(_cache)


def chunk_ir(pyfunc, types, varying, known: dict | None = None, pinned: dict | None = None,
             linearized: bool = True, profile=None) -> tuple[Function, dict]:
    """The predicated IR of a call in chunks, as the client plans it and each worker
    builds it again: with the shapes of arguments and captured arrays
    (``build_specialized``), sums kept at the top level (``notes["chunked"]``:
    ``hydra.grad.lanesums``, no lanesum inside a loop); and the uniform ints (name, value)
    that shapes depend on (from ``known``, or ``pinned`` as the client found them)."""
    fn, _, pinned = build_specialized(pyfunc, list(types), known, varying, shaped=True,
                                      pinned=pinned)
    fn.notes["chunked"] = True
    return run_pipeline(fn, set(varying), check=CHECK_IR, linearized=linearized,
                        profile=profile), pinned


def _compile(spec: KernelSpec) -> Compiled:
    pyfunc = rebuild(spec.function)
    # the options were checked when the caller made its kernel
    backend, options = get_backend(spec.backend), dict(spec.options)
    sites = Sites() if spec.profiled and not spec.staged else None  # (hydra.profile)

    def build(linearized: bool = True) -> Function:
        """The IR the client planned with (the same shapes and constants)."""
        return offset_lanes(chunk_ir(pyfunc, spec.types, spec.varying,
                                     pinned=dict(spec.shape_values), linearized=linearized,
                                     profile=sites)[0])
    fn = build()
    if spec.staged:
        return Compiled(fn, None, Program(fn, backend, options))
    structured = (lambda: build(linearized=False)) if backend.protocol.structured else None
    return Compiled(fn, backend.compile(fn, options, structured), None)


def offset_lanes(fn: Function) -> Function:
    """``fn`` for a chunk of lanes: ``lane()`` becomes ``lane0 + lane()`` and ``nlanes()``
    the global count, from two uniform int64 parameters added at the end."""
    lane0 = Value(INT64, fn.loc, "lane0", varying=False)
    total = Value(INT64, fn.loc, "nlanes", varying=False)
    fn.params = [*fn.params, lane0, total]
    fn.param_names = [*fn.param_names, "__hydra_lane0", "__hydra_nlanes"]
    replace: dict[int, Value] = {}
    for region in [fn.body] + [r for op in fn.walk() for r in op.regions]:
        ops: list[Op] = []
        for op in region.ops:
            name = op.attrs.get("name") if op.opcode == "intrinsic" else None
            if name not in ("lane", "nlanes"):
                ops.append(op)
                continue
            result = op.result
            base = lane0 if name == "lane" else total
            if result.type != INT64:  # a weak int that met narrower data
                cast = Value(result.type, op.loc, varying=False)
                ops.append(Op("cast", [base], [cast], op.loc))
                base = cast
            if name == "nlanes":
                replace[result.id] = base
                continue
            local = Value(result.type, op.loc, varying=True)
            op.results = [local]
            ops += [op, Op("add", [local, base], [result], op.loc)]
        region.ops = ops
    if replace:
        for op in fn.walk():
            op.operands = [replace.get(v.id, v) for v in op.operands]
    return fn
