"""Calls for the builder: the builtins, ``math``/``numpy`` functions on scalars, casts,
per-lane arrays, ``print``, lane intrinsics (through ``hydra.intrinsics``) and inlined
calls of other Python functions (recursion is a ``CompileError``).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import types as pytypes

import numpy as np

from .. import intrinsics, nn, trees
from ..errors import CompileError, CompileTypeError, Loc
from ..ir.core import LANE_ARRAY_FNS, Value
from ..registry import MATH_FUNCTIONS, NUMPY_MATH_NAMES, math_operand_type
from ..types import (BOOL, FLOAT64, INT64, WEAK_BOOL, WEAK_FLOAT, WEAK_INT, ArrayType,
                     ScalarType, scalar)
from .arrayops import ArrayMethod, ListArg, NeedShapes, is_array
from .binding import Default, binder, parameter_names
from .common import Meta
from .containers import ContainerMethod, Struct, is_node, items_of
from .idioms import LocalFunction
from .exprs import NUMPY_SCALAR_TYPES
from .source import parse_function
from .subset import check_subset
from .ufuncs import scalar_relu, scalar_ufunc

_NUMPY_ALIASES = {**NUMPY_MATH_NAMES, "absolute": "abs"}
_MATH_TO_INT = ("floor", "ceil", "trunc")  # math.floor returns an int in Python


def array_reduction_error(fname: str, loc: Loc) -> CompileError:
    """``np.max(row)``, ``np.sum(a)``, ``np.sqrt(a)``: functions of whole arrays."""
    if fname in ("max", "min", "amax", "amin"):
        f = fname.lstrip("a")
        loop = f"m = a[0]; for j in range(1, len(a)): m = {f}(m, a[j])"
        also = f"; {f}(x, y) takes numbers, and lane{f}(x) reduces x across the lanes"
    else:
        loop = "s = 0.0; for j in range(len(a)): s += a[j]" if fname in ("sum", "mean") \
            else "a loop over the elements: for j in range(len(a)): ... a[j] ..."
        also = ""
    return CompileError(f"{fname}() of an array is not supported: kernels compute with "
                        f"numbers, and operations on whole arrays (reductions such as "
                        f"np.{fname}(a)) are not supported yet", loc,
                        hint=f"write a loop: {loop}{also}")


_NOT_SPECIAL = object()


class CallMixin:
    """Call translation; mixed into ``Builder``."""

    def expr_call(self, node: ast.Call):
        loc = self.loc(node)
        callee = self.expr(node.func)
        if not isinstance(callee, Meta):
            raise CompileError(f"{self.describe(callee)} is not callable", loc)
        fn = callee.obj
        if fn is print:
            return self.call_print(node, loc)
        if isinstance(fn, ArrayMethod):
            args = [self.list_or_expr(a) for a in node.args]
            kwargs = {k.arg: self.list_or_expr(k.value) for k in node.keywords}
            return self.call_array_method(fn, args, kwargs, loc)
        if any(k.arg is None for k in node.keywords):
            raise CompileError("**kwargs in calls are not supported", loc)
        if fn is sum and node.args and isinstance(node.args[0], ast.GeneratorExp):
            start = self.expr(node.args[1]) if len(node.args) > 1 else self.const(0, loc)
            return self.sum_generator(node.args[0], start, loc)
        # a list argument of a NumPy call is a tuple there (np.stack([a, b]), axis=[0, 1],
        # np.pad(a, [(1, 2)])); of any other call a list (a container: hydra.trees)
        numpy_call = isinstance(fn, np.ufunc) or getattr(fn, "__hydra_array_op__", None) \
            is not None or (getattr(fn, "__module__", None) or "").startswith("numpy")
        read = self.list_or_expr if numpy_call else self.expr
        args = [read(a) for a in node.args]
        kwargs = {k.arg: read(k.value) for k in node.keywords}
        if getattr(fn, "__hydra_makes_grad__", False):  # hydra.grad(f) in a kernel
            return Meta(fn(*[self.compile_time(a, loc) for a in args],
                           **{k: self.compile_time(v, loc) for k, v in kwargs.items()}))
        if fn is nn.relu and len(args) == 1 and not kwargs and isinstance(args[0], Value):
            return self.call_relu(args[0], loc)
        if getattr(fn, "__hydra_stop_gradient__", False):
            return self.call_stop_gradient(args, kwargs, loc)
        if getattr(fn, "__hydra_grad__", None) is not None:
            return self.call_grad(fn.__hydra_grad__, args, kwargs, loc)
        name = getattr(fn, "__hydra_intrinsic__", None)
        if name is not None:
            return self.call_intrinsic(name, args, kwargs, loc)
        special = self.call_python(fn, args, kwargs, loc)
        if special is not _NOT_SPECIAL:
            return special
        fn = getattr(fn, "__hydra_kernel__", fn)  # a kernel called: its function
        if fn in (abs, min, max, int, float, bool, len, range, round):
            return self.call_builtin(fn, args, kwargs, loc)
        module = getattr(fn, "__module__", None) or ""
        fname = getattr(fn, "__name__", "")
        if fn in NUMPY_SCALAR_TYPES:
            return self.call_cast(scalar(fn), args, kwargs, loc)
        if module == "math" or isinstance(fn, np.ufunc) or module.startswith("numpy"):
            return self.call_math(fn, fname, args, kwargs, loc)
        if getattr(fn, "__hydra_array_op__", None) is not None:
            return self.call_array_layer(fn, args, kwargs, loc)
        if isinstance(fn, pytypes.FunctionType):
            return self.call_inline(fn, args, kwargs, loc)
        raise CompileError(f"calling {self.describe(callee)} is not supported in a kernel", loc)

    def call_python(self, fn, args, kwargs, loc: Loc):
        """Calls of containers' methods, nested functions, the Python builtins of
        ``idioms`` and dataclass and namedtuple classes; else ``_NOT_SPECIAL``."""
        if isinstance(fn, ContainerMethod):
            return self.call_container_method(fn, args, kwargs, loc)
        if isinstance(fn, LocalFunction):
            return self.call_local(fn, args, kwargs, loc)
        if fn in (enumerate, zip, sum, divmod, pow):
            return self.call_idiom(fn, args, kwargs, loc)
        if fn is round and (len(args) == 2 or "ndigits" in kwargs):
            return self.round_digits(args[0], args[1] if len(args) == 2
                                     else kwargs["ndigits"], loc)
        if isinstance(fn, type) and (dataclasses.is_dataclass(fn) or issubclass(fn, tuple)
                                     and hasattr(fn, "_fields")):
            return self.make_instance(fn, args, kwargs, loc)
        if fn is dataclasses.replace:
            return self.replace_fields(args, kwargs, loc)
        return _NOT_SPECIAL

    def list_or_expr(self, node: ast.expr):
        if isinstance(node, ast.List):
            return ListArg(self.list_or_expr(e) for e in node.elts)
        return self.expr(node)

    def call_intrinsic(self, name: str, args, kwargs, loc: Loc):
        entry = intrinsics.INTRINSICS[name]
        if name in LANE_ARRAY_FNS and args and is_array(args[0]) and not kwargs \
                and len(args) == entry.nargs:
            return self.call_lane_reduction(name, args, loc)
        if kwargs or len(args) != entry.nargs:
            raise CompileError(f"{name}() takes {entry.nargs} positional argument(s)", loc)
        if name == "atomic_add" and len(args) == 3 and isinstance(args[1], tuple) \
                and isinstance(args[0], Value) and isinstance(args[0].type, ArrayType):
            return self.atomic_add_at(args, loc)  # atomic_add(a, (i, j), v)
        for a in args:
            if not isinstance(a, Value):
                raise CompileError(f"{name}() takes numbers, not {self.describe(a)}", loc)
        problem = intrinsics.check_argument_types(name, [a.type for a in args])
        if problem:
            raise CompileError(problem, loc)
        coerced = []
        for a, p in zip(args, entry.params):
            kind = intrinsics.PARAM_KINDS[p]
            if kind == "1-d array" and a.type.ndim != 1:
                raise CompileError(f"{name} needs a 1-d array", loc)
            if kind in ("lane index", "index"):
                a = self.coerce(a, INT64, loc)
            elif kind == "element of a":
                a = self.coerce(a, args[entry.params.index("a")].type.dtype, loc)
            coerced.append(a)
        args = coerced
        if entry.effect:
            self.emit_op("intrinsic", args, [], loc, {"name": name})
            return None
        result = entry.result([a.type for a in args])
        return self.emit("intrinsic", args, result, loc, {"name": name})

    def call_builtin(self, fn, args, kwargs, loc: Loc):
        if kwargs:
            raise CompileError(f"{fn.__name__}() keyword arguments are not supported", loc)
        if fn is range:
            raise CompileError("range() is only supported as the iterable of a for loop", loc)
        if fn is len:
            if len(args) != 1:
                raise CompileError("len() takes one argument", loc)
            (a,) = args
            if is_node(a):
                return self.container_len(a, loc)
            if isinstance(a, Value) and isinstance(a.type, ArrayType):
                if a.type.shape:
                    return self.const(a.type.shape[0], loc)
                return self.emit("array_dim", [a], WEAK_INT, loc, {"axis": 0})
            raise CompileError(f"len() of {self.describe(a)} is not supported", loc)
        if fn in (min, max):
            if len(args) == 1 and is_node(args[0]):
                args = list(items_of(args[0]))
            if any(isinstance(a, Value) and isinstance(a.type, ArrayType) for a in args):
                raise array_reduction_error(fn.__name__, loc)
            if len(args) < 2:
                raise CompileError(f"{fn.__name__}() needs at least two numbers", loc)
            return functools.reduce(lambda x, y: self.arith(fn.__name__, x, y, loc), args)
        if len(args) != 1:
            raise CompileError(f"{fn.__name__}() takes one argument here", loc)
        (a,) = args
        if fn is abs and is_array(a):
            return self.array_op("abs", [a], loc)
        if not isinstance(a, Value) or not isinstance(a.type, ScalarType):
            raise CompileError(f"{fn.__name__}() of {self.describe(a)} is not supported", loc)
        if fn is abs:
            if a.type.kind == "b":
                return self.bool_unary("abs", a, loc)
            return self.emit("abs", [a], a.type, loc)
        if fn is bool:
            return self.coerce(self.truthy(a, loc), WEAK_BOOL, loc)
        if fn is int:
            return self.coerce(a, WEAK_INT, loc) if a.type.kind != "f" else \
                self.python_int(a, loc)
        if fn is float:
            return self.coerce(a, WEAK_FLOAT, loc)
        if fn is round:
            if a.type.kind != "f":
                return a
            return self.python_int(self.emit("math", [a], a.type, loc, {"fn": "rint"}), loc)
        raise CompileError(f"{fn.__name__}() is not supported", loc)

    def call_cast(self, t: ScalarType, args, kwargs, loc: Loc) -> Value:
        if kwargs or len(args) != 1 or not isinstance(args[0], Value):
            raise CompileError(f"{t.name}() takes one number", loc)
        return self.coerce(self.truthy(args[0], loc) if t.kind == "b" else args[0], t, loc)

    def call_math(self, fn, fname: str, args, kwargs, loc: Loc):
        from_numpy = fn.__module__ != "math" if hasattr(fn, "__module__") else True
        if fname in ("zeros", "empty", "ones", "full") and from_numpy:
            return self.call_local_array(fname, args, kwargs, loc)
        if from_numpy and self.wants_array_call(fname, args, kwargs):
            return self.call_numpy_array(fname, args, kwargs, loc,
                                         getattr(fn, "__module__", None) or "numpy")
        if from_numpy and not kwargs and not any(is_array(a) for a in args):
            value = scalar_ufunc(self, fname, args, loc)  # NumPy's own rules (sign, ...)
            if value is not None:
                return value
        name = _NUMPY_ALIASES.get(fname, fname)
        if name in ("abs", "min", "max"):
            return self.call_builtin({"abs": abs, "min": min, "max": max}[name], args, kwargs, loc)
        if any(isinstance(a, Value) and isinstance(a.type, ArrayType) for a in args):
            raise array_reduction_error(fname, loc)
        if name not in MATH_FUNCTIONS or kwargs:
            raise CompileError(f"{getattr(fn, '__module__', 'numpy')}.{fname} is not supported in "
                               f"kernels", loc)
        ir_name, arity, kind = MATH_FUNCTIONS[name]
        if len(args) != arity or not all(isinstance(a, Value) and isinstance(a.type, ScalarType)
                                         for a in args):
            raise CompileError(f"{fname}() takes {arity} number(s)", loc)
        t = math_operand_type([a.type for a in args])
        operands = [self.coerce(a, t, loc) for a in args]
        # math.isnan gives a Python bool, np.isnan a NumPy bool
        result_type = (BOOL if from_numpy else WEAK_BOOL) if kind == "bool" else t
        result = self.emit("math", operands, result_type, loc, {"fn": ir_name})
        if not from_numpy and name in _MATH_TO_INT:
            result = self.python_int(result, loc)
        return result

    def call_local_array(self, fname: str, args, kwargs, loc: Loc) -> Value:
        if not args:
            raise CompileError(f"np.{fname}() needs a shape", loc)
        given = args[0] if isinstance(args[0], tuple) else (args[0],)
        dtype_arg = kwargs.pop("dtype", args[2] if fname == "full" and len(args) > 2 else
                               (args[1] if len(args) > 1 and fname != "full" else None))
        fill = {"zeros": 0, "ones": 1, "empty": 0}.get(fname)
        if fname == "full":
            if len(args) < 2:
                raise CompileError("np.full() needs a shape and a fill value", loc)
            fill = self.constant_value(args[1])
            if dtype_arg is None and isinstance(args[1], Value):
                dtype_arg = Meta(args[1].type.strong().dtype.type)  # NumPy: the fill's type
            if fill is None:  # a computed (maybe per-lane) fill value: an array op
                return self.array_op("full", [args[1]], loc, shape=tuple(
                    self._static_int(d, "np.full()'s shape", loc) for d in given),
                    dtype=self._dtype(dtype_arg, "np.full()", loc))
        if kwargs:
            raise CompileError(f"np.{fname}() arguments {sorted(kwargs)} are not supported", loc)
        dtype = FLOAT64 if dtype_arg is None else self.dtype_named(
            dtype_arg.obj if isinstance(dtype_arg, Meta) else dtype_arg, f"np.{fname}()", loc)
        if fname == "full":
            self.coerce(args[1], dtype, loc)  # a Python int fill must fit (OverflowError)
        dims = []
        for d in given:
            if not isinstance(d, Value) or d.type.kind not in "iu":
                raise CompileError(f"np.{fname}(): the shape must be integers", loc)
            size = self.constant_value(d)
            if size is not None and size < 0:
                raise CompileError(f"np.{fname}(): negative dimension {size}", loc,
                                   hint="the size of a per-lane array must be >= 0")
            dims.append(self.coerce(d, INT64, loc))
        sizes = [self.constant_value(d) for d in dims]
        shape = tuple(int(s) for s in sizes) if None not in sizes else None
        out = self.emit("local_array", dims, ArrayType(dtype, len(dims), shape), loc,
                        {"dtype": dtype.name, "fill": fill})
        if shape is None:
            params = [p for d in given for p in self._params_behind(d)]
            self.unknown_shapes[out.id] = (loc, params)
        return out

    def call_print(self, node: ast.Call, loc: Loc) -> None:
        operands: list[Value] = []
        options = {"sep": " ", "end": "\n"}
        for k in node.keywords:
            v = self.expr(k.value)
            if k.arg not in options or not (isinstance(v, Meta) and isinstance(v.obj, str)):
                raise CompileError("print() supports only sep= and end= with string constants",
                                   loc)
            options[k.arg] = v.obj
        template = [self.print_piece(a, operands, loc) for a in node.args]
        self.emit_op("print", operands, [], loc, {"parts": template, **options})
        return None

    def print_piece(self, node: ast.expr, operands: list[Value], loc: Loc):
        if isinstance(node, ast.JoinedStr):
            pieces = []
            for part in node.values:
                if isinstance(part, ast.Constant):
                    pieces.append(part.value)
                else:
                    spec = ""
                    if part.format_spec is not None:
                        if not all(isinstance(p, ast.Constant) for p in part.format_spec.values):
                            raise CompileError("nested f-string formats are not supported", loc)
                        spec = "".join(p.value for p in part.format_spec.values)
                    conv = chr(part.conversion) if part.conversion > 0 else ""
                    pieces.append(("fmt", self.print_piece(part.value, operands, loc), conv, spec))
            return ("fstr", pieces)
        return self.print_value(self.expr(node), operands, loc)

    def print_value(self, value, operands: list[Value], loc: Loc):
        if isinstance(value, Meta) and (isinstance(value.obj, str) or value.obj is None):
            return ("str", value.obj)
        if isinstance(value, tuple):
            return ("tuple", [self.print_value(v, operands, loc) for v in value])
        if isinstance(value, Struct):  # rebuilt per lane and printed as Python prints it
            node = trees.TreeDef(value.kind, value.aux, value.names,
                                 (trees.LEAF,) * len(value.items))
            return ("tree", node, [self.print_value(v, operands, loc) for v in value.items])
        if isinstance(value, Value) and (isinstance(value.type, ScalarType) or is_array(value)
                                         and value.type.shape is not None):
            operands.append(value)  # a per-lane array prints as NumPy prints it
            return ("val", len(operands) - 1)
        if is_array(value):
            raise NeedShapes("printing an array needs its shape", loc)
        raise CompileError(f"cannot print {self.describe(value)}", loc)

    def call_relu(self, x: Value, loc: Loc) -> Value:
        """``hydra.nn.relu``: np.maximum(x, 0), spelled so that hydra.grad gives it its own
        rule, relu'(0) = 0 (SPEC section 11): for an array ``where(x <= 0, 0, x)``, the
        same values (a NaN stays NaN, -0.0 becomes 0.0 as np.maximum makes it)."""
        if isinstance(x.type, ScalarType):
            return scalar_relu(self, x, loc)
        if isinstance(x.type, ArrayType) and x.type.dtype.kind == "f":
            zero = self.const(0.0, loc, x.type.dtype)
            return self.array_op("where", [self.array_op("le", [x, zero], loc), zero, x], loc)
        return self.call_inline(nn.relu, [x], {}, loc)

    def compile_time(self, v, loc: Loc):
        """The Python object an argument of ``hydra.grad`` stands for (a function, a
        constant, a tuple of them): it must be known when the kernel compiles."""
        if isinstance(v, tuple):
            return tuple(self.compile_time(x, loc) for x in v)
        if isinstance(v, Meta):
            return v.obj
        if isinstance(v, Value) and v.id in self.const_ops:
            return self.const_ops[v.id].attrs["value"]
        raise CompileError("the arguments of hydra.grad must be known when the kernel "
                           "compiles (a function, argnums, wrt, has_aux)", loc)

    def call_stop_gradient(self, args, kwargs, loc: Loc):
        """``hydra.stop_gradient(x)``: ``x`` through a cast that ``hydra.grad`` stops at."""
        if len(args) != 1 or kwargs:
            raise CompileError("hydra.stop_gradient takes one value", loc)

        def stop(x):
            if isinstance(x, tuple):
                return tuple(stop(v) for v in x)
            if isinstance(x, Value) and isinstance(x.type, ScalarType) and x.type.kind == "f":
                return self.emit("cast", [x], x.type, loc, {"stop_gradient": True})
            return x
        return stop(args[0])

    def call_grad(self, grad, args, kwargs, loc: Loc):
        """A ``hydra.grad`` function called as a helper: its gradient's IR, built for the
        arguments' types, copied in (``hydra.grad.transform.inline``)."""
        from ..grad.transform import inline
        from ..types import TupleType, finalize
        try:
            bound = binder(grad.__wrapped__, mark_defaults=True)(*args, **kwargs)
        except TypeError as e:
            raise CompileTypeError(str(e), loc) from None
        names = parameter_names(parse_function(grad.__wrapped__).node)
        values = [self.from_python(v.value, n, loc) if isinstance(v, Default) else v
                  for n, v in zip(names, bound)]

        def type_of(v):
            if isinstance(v, tuple):
                return TupleType(tuple(type_of(x) for x in v))
            if not isinstance(v, Value):
                raise CompileError(f"{self.describe(v)} cannot be passed to a gradient", loc)
            return finalize(v.type)
        types = [type_of(v) for v in values]
        try:
            fn = grad.build(types)
        except TypeError as e:
            raise CompileTypeError(str(e), loc) from None
        leaves = [self.coerce(v, p.type, loc) for v, p in
                  zip(self.flatten(tuple(values), "argument", loc)[0], fn.params)]
        return self.unflatten(inline(fn, leaves, self.region), fn.notes["result_tree"])

    def call_inline(self, fn, args, kwargs, loc: Loc):
        if fn in self.call_stack:
            raise CompileError(f"recursive call to {fn.__name__} is not supported", loc,
                               hint="rewrite the recursion as a loop")
        parsed = parse_function(fn)
        check_subset(parsed)
        try:
            bound = binder(parsed.pyfunc, mark_defaults=True)(*args, **kwargs)
        except TypeError as e:  # Python's own words for a bad call
            raise CompileTypeError(str(e), loc) from None
        names = parameter_names(parsed.node)
        # a default is a constant (or array, function, ...) captured like a module global
        env = {name: self.from_python(v.value, name, loc) if isinstance(v, Default) else v
               for name, v in zip(names, bound)}
        return self.unflatten(*self.translate_function(parsed, env, loc, fn))
