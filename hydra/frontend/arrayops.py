"""Whole-array expressions for the builder (SPEC section 8): per-lane arrays.

Every NumPy operation on whole arrays becomes one ``array`` op whose ``fn`` names the
operation and whose ``params`` hold its static arguments (axis, keepdims, an index with
slices, a shape); its result type, shape included, is what NumPy itself gives on
placeholder arrays of the operands' shapes (``hydra.batching.result_type``), so
broadcasting, NEP 50 promotion and shape errors are NumPy's.  Stores of sub-arrays are
``array_store`` ops.  Shapes come from argument shapes and constants: a kernel first
compiles without argument shapes (kernels that only index arrays then never recompile
per array size); the first whole-array operation raises ``NeedShapes`` and the kernel
recompiles, specializing on shapes from then on.
"""

from __future__ import annotations

import contextvars
import functools
import inspect

import numpy as np

from ..batching import ELEMENTWISE, PER_LANE, REDUCTIONS, result_type
from ..errors import CompileError, Loc
from ..ir.core import Value
from ..registry import ALIASES, record
from ..types import WEAK_INT, ArrayType, ScalarType, scalar
from .arraycalls import FUNCTIONS as MORE_FUNCTIONS
from .arraycalls import METHODS as MORE_METHODS
from .common import Meta, NeedShapes
from .unroll import shape_reason

#: where a user reads which array operations kernels take (the hint of a refused one)
GUIDE_ARRAY_OPS = ("docs/guide.md, chapter 12 'Per-lane arrays: per-example NumPy code, "
                   "batched', lists the array operations kernels support ('Operations')")
#: set while a kernel compiles with array shapes in its types (after a NeedShapes)
SHAPED = contextvars.ContextVar("hydra_shaped", default=False)
#: uniform int parameters a kernel specializes on (name -> value): shapes depend on them
SHAPE_VALUES = contextvars.ContextVar("hydra_shape_values", default=None)



class ListArg(tuple):
    """A list argument of a call (``[a, b]``), which NumPy mostly takes as a tuple."""


class ArrayMethod:
    """``a.sum`` before the call: the array and the method's name."""

    def __init__(self, array: Value, name: str) -> None:
        self.array = array
        self.name = name
        self.__name__ = f"ndarray.{name}"


#: numpy functions that take whole arrays even when no argument is an array here
ARRAY_FUNCTIONS = frozenset({
    "where", "matmul", "dot", "outer", "concatenate", "stack", "zeros_like", "ones_like",
    "empty_like", "full_like", "arange", "clip", "transpose", "reshape", *REDUCTIONS,
    "einsum", "tensordot", "pad",
    "amax", "amin", "argmax", "argmin", *MORE_FUNCTIONS, "np.linalg.norm", "around"})
METHODS = frozenset({*REDUCTIONS, "copy", "reshape", "astype", "dot", "transpose", "clip",
                     *MORE_METHODS})
SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
            "pow": "**", "matmul": "@", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
            "eq": "==", "ne": "!=", "bitand": "&", "bitor": "|", "bitxor": "^"}


def is_array(v) -> bool:
    return isinstance(v, Value) and isinstance(v.type, ArrayType)


class ArrayMixin:
    """Whole-array expressions; mixed into ``Builder``."""

    def array_op(self, fn: str, operands: list, loc: Loc, **params) -> Value:
        """One ``array`` op: typed by NumPy's rules on placeholders; weak Python scalars
        take the type they meet (NEP 50) before the op, as NumPy does."""
        label = f"operator {SYMBOLS[fn]}" if fn in SYMBOLS else f"np.{fn}"
        ops = []
        for v in operands:
            if not isinstance(v, Value) or not isinstance(v.type, (ScalarType, ArrayType)):
                raise CompileError(f"{label} of {self.describe(v)} is not supported", loc)
            self._check_shaped(v, label, loc)
            ops.append(v)
        types = [v.type for v in ops]
        try:
            if fn in ELEMENTWISE or fn == "full_like":
                compute = np.result_type(*[_weak_placeholder(t) for t in types])
                ops = [self.coerce(v, scalar(compute), loc)
                       if isinstance(v.type, ScalarType) and v.type.weak else v for v in ops]
                types = [v.type for v in ops]
            out = result_type(fn, types, params)
        except (ValueError, IndexError, TypeError) as e:
            shapes = " and ".join(str(t.shape) if isinstance(t, ArrayType) else "()"
                                  for t in types)
            raise CompileError(f"{label}: shapes {shapes} do not fit: {e}", loc) from None
        result = self.emit("array", ops, out, loc, {"fn": fn, "params": params})
        if fn in ("getitem", "reshape", "transpose") and ops[0].id in self.readonly_ids:
            self.readonly_ids.add(result.id)  # a view of a read-only view
        return result

    def _check_shaped(self, v, label: str, loc: Loc) -> None:
        """NeedShapes where ``v`` is an array whose shape its type does not hold: naming
        the uniform parameters that would give it (``np.zeros(k)``: specialize on k)."""
        if not is_array(v) or v.type.shape is not None:
            return
        name = f"'{v.name}'" if v.name else "this array"
        if v.id in self.unknown_shapes:
            made_at, params = self.unknown_shapes[v.id]
            raise NeedShapes(params=params, loc=made_at, message=
                f"{label}: the shape of {name} depends on a value that is "
                f"not known when the kernel compiles (here: " + (shape_reason(params) or
                "a varying value, or a uniform one that is not a constant") + ")",
                hint="a per-lane array's shape must be the same on every lane and come "
                     "from argument shapes and constants (a.shape[0], 16)")
        raise NeedShapes(
            f"{label}: the shape of {name} is not known when the kernel compiles", loc,
            hint="a per-lane array's shape must come from argument shapes and constants, "
                 "never from a varying value (dump-ir --sig: give shapes, float32[3, 4])")

    def is_array_ref(self, v: Value) -> bool:
        """An argument or captured array (shared memory, bound by reference), as opposed
        to a per-lane array value that a select may copy."""
        return v.id in self.array_refs or v.id in self.param_names_by_id \
            or v.type.shape is None

    # --- operators ----------------------------------------------------------------------

    def array_arith(self, name: str, a, b, loc: Loc) -> Value:
        if name in ("min", "max"):
            raise CompileError(f"{name}() of arrays is not supported", loc,
                               hint=f"np.{name}imum(a, b) is elementwise; a.{name}() reduces")
        return self.array_op(name, [a, b], loc)

    def array_attribute(self, array: Value, attr: str, loc: Loc):
        """``a.T``, ``a.shape``, ``a.ndim``, ``a.size`` (constants where the shape is
        known), the methods (``a.sum``)."""
        shape = array.type.shape
        if attr == "T":
            return self.array_op("transpose", [array], loc)
        if shape is not None and attr == "shape":
            return tuple(self.const(d, loc) for d in shape)
        if shape is not None and attr == "size":
            return self.const(int(np.prod(shape, dtype=np.int64)), loc)
        if attr in METHODS:
            return Meta(ArrayMethod(array, attr))
        dims = tuple(self.emit("array_dim", [array], WEAK_INT, loc, {"axis": k})
                     for k in range(array.type.ndim))
        if attr == "shape":
            return dims
        if attr == "ndim":
            return self.const(array.type.ndim, loc)
        if attr == "size":
            if not dims:  # a 0-d array holds one element
                return self.const(1, loc)
            return functools.reduce(lambda x, y: self.emit("mul", [x, y], WEAK_INT, loc), dims)
        raise CompileError(f"array attribute '{attr}' is not supported (shape, ndim and size are)",
                           loc)

    def call_array_method(self, m: ArrayMethod, args, kwargs, loc: Loc):
        name = m.name
        if name == "reshape":
            self._layout_keywords(".reshape()", kwargs, {"order": "C"}, loc)
            shape = args[0] if len(args) == 1 and isinstance(args[0], tuple) else tuple(args)
            return self.array_reshape(m.array, shape, loc)
        if name == "astype":
            copy = self._layout_keywords(".astype()", kwargs, {"copy": True}, loc)
            if len(args) != 1:
                raise CompileError(".astype() takes the dtype only here", loc)
            dtype = self._dtype(args[0], ".astype()", loc)
            if not copy and dtype == m.array.type.dtype.name:
                return m.array  # NumPy's astype(copy=False) is the array itself then
            return self.array_op("astype", [m.array], loc, dtype=dtype)
        if name == "copy":
            self._layout_keywords(".copy()", kwargs, {"order": "C"}, loc)
            if args:
                raise CompileError(".copy() takes no positional arguments here", loc)
            return self.array_op("copy", [m.array], loc)
        if name == "transpose":
            axes = args[0] if len(args) == 1 and isinstance(args[0], tuple) else tuple(args)
            return self.array_transpose(m.array, axes, loc)
        if name in MORE_METHODS:
            return self.call_numpy_more(name, [m.array, *args], kwargs, loc, method=True)
        return self.call_numpy_array(name, [m.array, *args], kwargs, loc)

    def _layout_keywords(self, what: str, kwargs: dict, known: dict, loc: Loc):
        """The one keyword of ``known`` that a method takes here, as a constant (its
        value, or the default); a CompileError for any other keyword or value.  An order
        or a copy flag hydra ignored would change what a write through the result
        reaches."""
        unknown = sorted(set(kwargs) - set(known))
        if unknown:
            raise CompileError(f"{what}: keyword arguments {unknown} are not supported", loc)
        (key, default), = known.items()
        if key not in kwargs:
            return default
        value = kwargs[key]
        value = value.obj if isinstance(value, Meta) else \
            self.constant_value(value) if isinstance(value, Value) else value
        if key == "copy" and isinstance(value, (bool, np.bool_, int)):
            return bool(value)
        if value != default:
            raise CompileError(f"{what}: only {key}={default!r} is supported here (got "
                               f"{value!r})", loc)
        return default

    def array_transpose(self, array: Value, axes: tuple, loc: Loc) -> Value:
        """``a.T``, ``a.transpose()``, ``np.transpose(a)``; axes only where they reverse
        the axes (the default), which is all hydra's transpose does."""
        if axes and (len(axes) == 1 and isinstance(axes[0], Meta) and axes[0].obj is None):
            axes = ()
        if axes:
            given = tuple(self._static_int(a, "an axis of transpose", loc) for a in axes)
            nd = array.type.ndim
            if tuple(a % nd if nd else a for a in given) != tuple(range(nd - 1, -1, -1)):
                raise CompileError(f"transpose with axes {given} is not supported (only the "
                                   f"reversal of all axes, as .T)", loc)
        return self.array_op("transpose", [array], loc)

    def _dtype(self, arg, what: str, loc: Loc) -> str:
        return self.dtype_named(arg.obj if isinstance(arg, Meta) else arg, what, loc).name

    def _static_int(self, v, what: str, loc: Loc) -> int:
        if isinstance(v, int):
            return v
        c = self.constant_value(v) if isinstance(v, Value) else None
        if v is None or isinstance(v, Meta) and v.obj is None:
            return None
        if c is None:
            behind = self._params_behind(v)
            counter = shape_reason(behind)
            raise NeedShapes(f"{what} must be a constant here, but it depends on {counter}"
                             if counter else f"{what} must be a constant here (a shape never "
                             f"depends on a varying value)", loc, params=behind)
        return int(c)

    def _params_behind(self, v) -> tuple:
        """The parameters a value is computed from in the region being built (``k - 1``:
        k), which the kernel may specialize on where they are uniform ints, and the
        counters of the loops it comes from (``i + 1``), which it may unroll."""
        if not isinstance(v, Value):
            return ()
        defs = {r.id: op for op in self.region.ops for r in op.results}
        names, todo, seen = [], [v], set()
        while todo:
            x = todo.pop()
            if x.id in seen:
                continue
            seen.add(x.id)
            if x.id in self.param_names_by_id:  # a container's leaf: by its path
                name = self.param_names_by_id[x.id]
                names.append(self.param_paths.get(name, name))
            elif x.id in self.loop_counters:
                names += [self.loop_counters[x.id], *self.loop_counters[x.id].behind]
            elif x.id in defs:
                todo.extend(defs[x.id].operands)
        return tuple(names)

    def array_reshape(self, array: Value, shape, loc: Loc) -> Value:
        dims = tuple(self._static_int(d, "the new shape", loc) for d in shape)
        return self.array_op("reshape", [array], loc, shape=dims)

    def _axis(self, v, loc: Loc):
        if v is None or isinstance(v, Meta) and v.obj is None:
            return None
        if isinstance(v, ListArg):  # NumPy raises TypeError for axis=[0, 1]
            axes = tuple(self._static_int(a, "axis", loc) for a in v)
            raise CompileError("axis= must be an integer or a tuple of integers (NumPy "
                               "raises TypeError for a list)", loc, hint=f"axis={axes}")
        if isinstance(v, tuple):
            return tuple(self._static_int(a, "axis", loc) for a in v)
        return self._static_int(v, "axis", loc)

    # --- numpy functions ----------------------------------------------------------------

    def call_numpy_array(self, fname: str, args, kwargs, loc: Loc, module: str = "numpy"):
        if module != "numpy":
            fname = f"{module.replace('numpy', 'np', 1)}.{fname}"  # np.linalg.norm
        fname = ALIASES.get(fname, fname)
        more = self.call_numpy_more(fname, args, kwargs, loc)  # hydra.arraylib's
        if more is not NotImplemented:
            return more
        if fname in REDUCTIONS:
            unknown = set(kwargs) - {"axis", "keepdims"}
            if unknown or len(args) > 2:
                raise CompileError(f"np.{fname}(): only axis= and keepdims= are supported", loc)
            axis = self._axis(kwargs.get("axis", args[1] if len(args) > 1 else None), loc)
            keep = bool(self.constant_value(kwargs["keepdims"])) if "keepdims" in kwargs \
                else False
            return self.array_op(fname, [args[0]], loc, axis=axis, keepdims=keep)
        if fname in ("concatenate", "stack"):
            if not args or not isinstance(args[0], tuple):
                raise CompileError(f"np.{fname}() takes a tuple or list of arrays", loc)
            axis = self._axis(kwargs.get("axis", args[1] if len(args) > 1 else 0), loc)
            return self.array_op(fname, list(args[0]), loc, axis=axis)
        if fname in ("zeros_like", "ones_like", "empty_like", "full_like"):
            dtype = kwargs.get("dtype")
            dt = None if dtype is None else self._dtype(dtype, f"np.{fname}()", loc)
            return self.array_op(fname, list(args), loc, dtype=dt)
        if fname == "arange":
            vals = [self._static_int(a, "np.arange()'s bounds", loc) for a in args]
            start, stop, step = (0, vals[0], 1) if len(vals) == 1 else (*vals, 1)[:3]
            dtype = kwargs.get("dtype")
            dt = "int64" if dtype is None else self._dtype(dtype, "np.arange()", loc)
            return self.array_op("arange", [], loc, start=start, stop=stop, step=step, dtype=dt)
        if fname == "einsum":
            if not args or not isinstance(args[0], Meta) or not isinstance(args[0].obj, str):
                raise CompileError("np.einsum() takes a constant subscripts string first", loc)
            return self.array_op("einsum", list(args[1:]), loc, subscripts=args[0].obj)
        if fname == "tensordot":
            axes = kwargs.get("axes", args[2] if len(args) > 2 else 2)
            axes = tuple(self._axis(x, loc) for x in axes) if isinstance(axes, tuple) \
                else self._static_int(axes, "np.tensordot()'s axes", loc)
            return self.array_op("tensordot", list(args[:2]), loc, axes=axes)
        if fname == "reshape":
            self._layout_keywords("np.reshape()", kwargs, {"order": "C"}, loc)
            return self.array_reshape(args[0], args[1] if isinstance(args[1], tuple)
                                      else (args[1],), loc)
        if fname == "transpose":
            if kwargs.keys() - {"axes"}:
                raise CompileError(f"np.transpose(): keyword arguments "
                                   f"{sorted(kwargs.keys() - {'axes'})} are not supported", loc)
            axes = kwargs.get("axes", args[1] if len(args) > 1 else None)
            axes = axes if isinstance(axes, tuple) else () if axes is None else (axes,)
            return self.array_transpose(args[0], axes, loc)
        if fname == "where" and len(args) != 3:
            raise CompileError("np.where() takes a condition and two values here: "
                               "np.where(c) gives the indices where c holds, whose number "
                               "depends on the data", loc, hint="np.where(c, a, b)")
        if fname in PER_LANE and fname not in ("getitem", "copy", "astype"):
            if kwargs:
                raise CompileError(f"np.{fname}(): keyword arguments {sorted(kwargs)} are not "
                                   f"supported", loc)
            return self.array_op(fname, list(args), loc)
        shown = fname if fname.startswith("np.") else f"np.{fname}"
        raise CompileError(f"{shown} is not supported on per-lane arrays", loc,
                           hint=GUIDE_ARRAY_OPS)

    def call_array_layer(self, fn, args, kwargs, loc: Loc) -> Value:
        """A ``hydra.nn`` layer with a batching rule of its own (conv2d, max_pool2d):
        array arguments are operands, the others static parameters."""
        name, arrays, statics = fn.__hydra_array_op__
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
        except TypeError as e:
            raise CompileError(f"{name}(): {e}", loc) from None
        bound.apply_defaults()
        operands = [v for v in (bound.arguments[p] for p in arrays)
                    if v is not None and not (isinstance(v, Meta) and v.obj is None)]
        params = {p: self._static_int(bound.arguments[p], f"{name}()'s {p}", loc)
                  for p in statics}  # None where not given
        return self.array_op(name, operands, loc, **params)

    def wants_array_call(self, fname: str, args, kwargs) -> bool:
        """Is this call of a NumPy function one on whole arrays (else a scalar one)?
        (``np.zeros`` and its kin are ``call_local_array``'s, decided before.)"""
        has_array = any(is_array(a) for a in list(args) + list(kwargs.values())) or any(
            isinstance(a, tuple) and any(is_array(x) for x in a) for a in args)
        return fname in ARRAY_FUNCTIONS or has_array

    def call_lane_reduction(self, name: str, args, loc: Loc) -> Value:
        """A cross-lane intrinsic of an array, elementwise: lanesum(a) is a uniform array
        (the sum over the active lanes), shuffle(a, k) a per-lane one; lanesum(np.outer(d,
        x)) is one GEMM over the lanes (lanesum_outer)."""
        a = args[0]
        if a.type.shape is None:
            raise NeedShapes(f"{name}() of an array needs its shape", loc)
        producer = self.defining_op(a)
        if name == "lanesum" and producer is not None and producer.opcode == "array" \
                and producer.attrs["fn"] == "outer":
            return self.emit("array", list(producer.operands), a.type, loc,
                             {"fn": "lanesum_outer", "params": {}})
        rest = [self.coerce(k, scalar("int64"), loc) for k in args[1:]]
        return self.emit("array", [a, *rest], record("array", name).type_rule([a.type]), loc,
                         {"fn": name, "params": {}})


def _weak_placeholder(t):
    if isinstance(t, ArrayType):
        return np.empty((0,), t.dtype.dtype)
    if t.weak:
        return {"b": True, "i": 1, "f": 1.0}[t.kind]
    return t.dtype.type(1)


__all__ = ["ArrayMixin", "NeedShapes", "SHAPED"]
