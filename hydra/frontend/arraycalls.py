"""More NumPy functions on per-lane arrays for the builder (issue 27; the operations are
``hydra.arraylib``'s): their arguments bound as NumPy's signatures bind them, the
static ones (axes, counts, modes, tolerances) as constants, and the spellings that are
other operations (``np.ravel``: a reshape, ``np.flip``: basic indexing with negative
steps, ``np.copy``: a copy in ``a``'s axis order), so that a write through the result
reaches what NumPy's would.  ``np.take`` checks its indices on the active lanes first
(an ``IndexError`` naming the lane, as NumPy's ``mode='raise'``).
"""

from __future__ import annotations

import numpy as np

from ..arraylib import SPELLINGS
from ..errors import CompileError, Loc
from ..ir.core import Value
from ..types import BOOL, ArrayType, ScalarType
from .common import Meta

_REQUIRED = object()

#: NumPy's signatures: parameter -> default (``_REQUIRED``: none); ``SUPPORTED`` names
#: those hydra takes, the others must keep their default
SIGNATURES: dict[str, tuple[tuple[str, object], ...]] = {
    "cumsum": (("a", _REQUIRED), ("axis", None), ("dtype", None), ("out", None)),
    "var": (("a", _REQUIRED), ("axis", None), ("dtype", None), ("out", None), ("ddof", 0),
            ("keepdims", False)),
    "np.linalg.norm": (("x", _REQUIRED), ("ord", None), ("axis", None), ("keepdims", False)),
    "sort": (("a", _REQUIRED), ("axis", -1), ("kind", None), ("order", None),
             ("stable", None)),
    "round": (("a", _REQUIRED), ("decimals", 0), ("out", None)),
    "eye": (("N", _REQUIRED), ("M", None), ("k", 0), ("dtype", float), ("order", "C")),
    "linspace": (("start", _REQUIRED), ("stop", _REQUIRED), ("num", 50), ("endpoint", True),
                 ("retstep", False), ("dtype", None), ("axis", 0)),
    "take": (("a", _REQUIRED), ("indices", _REQUIRED), ("axis", None), ("out", None),
             ("mode", "raise")),
    "roll": (("a", _REQUIRED), ("shift", _REQUIRED), ("axis", None)),
    "diff": (("a", _REQUIRED), ("n", 1), ("axis", -1), ("prepend", None), ("append", None)),
    "tile": (("A", _REQUIRED), ("reps", _REQUIRED)),
    "repeat": (("a", _REQUIRED), ("repeats", _REQUIRED), ("axis", None)),
    "diag": (("v", _REQUIRED), ("k", 0)),
    "trace": (("a", _REQUIRED), ("offset", 0), ("axis1", 0), ("axis2", 1), ("dtype", None),
              ("out", None)),
    "isclose": (("a", _REQUIRED), ("b", _REQUIRED), ("rtol", 1e-05), ("atol", 1e-08),
                ("equal_nan", False)),
    "interp": (("x", _REQUIRED), ("xp", _REQUIRED), ("fp", _REQUIRED), ("left", None),
               ("right", None), ("period", None)),
    "searchsorted": (("a", _REQUIRED), ("v", _REQUIRED), ("side", "left"), ("sorter", None)),
    "pad": (("array", _REQUIRED), ("pad_width", _REQUIRED), ("mode", "constant"),
            ("constant_values", 0)),
    "ravel": (("a", _REQUIRED), ("order", "C")),
    "flatten": (("a", _REQUIRED), ("order", "C")),
    "squeeze": (("a", _REQUIRED), ("axis", None)),
    "expand_dims": (("a", _REQUIRED), ("axis", _REQUIRED)),
    "flip": (("m", _REQUIRED), ("axis", None)),
    "copy": (("a", _REQUIRED), ("order", "K")),
    "array": (("object", _REQUIRED), ("dtype", None), ("copy", True), ("order", "K")),
    "asarray": (("a", _REQUIRED), ("dtype", None), ("order", None)),
}
SIGNATURES["norm"] = SIGNATURES.pop("np.linalg.norm")
for _same, _as in (("cumprod", "cumsum"), ("std", "var"), ("argsort", "sort"),
                   ("allclose", "isclose")):
    SIGNATURES[_same] = SIGNATURES[_as]
SIGNATURES["fliplr"] = SIGNATURES["flipud"] = (("m", _REQUIRED),)
#: the parameters of each signature that hydra takes (the others keep their default)
_UNSUPPORTED = {"dtype", "out", "order", "prepend", "append", "period", "sorter", "retstep",
                "stable", "mode"}
_TAKEN = {"eye": {"dtype"}, "linspace": {"dtype"}, "array": {"dtype", "copy"},
          "asarray": {"dtype"}, "pad": {"mode"}, "sort": {"stable"}, "argsort": {"stable"},
          "copy": {"order"}}
#: functions of no array argument that make per-lane arrays
MAKERS = ("eye", "linspace")
#: functions that take numbers as well as arrays
_OF_NUMBERS = ("round", "around", "array", "isclose", "allclose", "interp")
#: every function this module takes (the frontend's table and the guide's)
FUNCTIONS = frozenset(SIGNATURES) - {"flatten"}
#: and the array methods
METHODS = frozenset({"cumsum", "cumprod", "var", "std", "argsort", "round", "take", "repeat",
                     "trace", "searchsorted", "ravel", "flatten", "squeeze", "sort"})


class MoreArrayMixin:
    """The functions of ``hydra.arraylib``; mixed into ``Builder``."""

    def call_numpy_more(self, fname: str, args, kwargs, loc: Loc, method: bool = False):
        """``fname`` of ``SIGNATURES`` as array operations, else NotImplemented."""
        if method and fname == "sort":
            raise CompileError("a.sort() sorts in place, which is not supported here", loc,
                               hint="a = np.sort(a), or a[:] = np.sort(a) to write into a")
        if fname not in SIGNATURES:
            return NotImplemented
        p = self._bind_numpy(fname, args, kwargs, loc)
        first = next(iter(p.values()))
        if fname not in SPELLINGS and fname not in MAKERS + _OF_NUMBERS \
                and not self._is_array_value(first):
            raise CompileError(f"np.{fname}() takes an array here, not "
                               f"{self.describe(first)}", loc)
        name = SPELLINGS.get(fname) or _FAMILY.get(fname, fname)
        return getattr(self, "_np_" + name)(fname, p, loc)

    # --- arguments ------------------------------------------------------------------------

    def _bind_numpy(self, fname: str, args, kwargs, loc: Loc) -> dict:
        sig = SIGNATURES[fname]
        names = [n for n, _ in sig]
        if len(args) > len(sig):
            raise CompileError(f"np.{fname}() takes at most {len(sig)} arguments", loc)
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names or k in bound:
                raise CompileError(f"np.{fname}(): the argument {k!r} is not supported "
                                   f"(or given twice)", loc)
            bound[k] = v
        taken = _TAKEN.get(fname, set())
        out = {}
        for name, default in sig:
            if name not in bound:
                if default is _REQUIRED:
                    raise CompileError(f"np.{fname}() needs its argument {name!r}", loc)
                out[name] = default
                continue
            v = bound[name]
            if name in _UNSUPPORTED and name not in taken:
                if self._static(v, name, loc) != default:
                    raise CompileError(f"np.{fname}(): {name}= is not supported here (only "
                                       f"its default, {default!r})", loc)
                v = default
            out[name] = v
        return out

    def _is_array_value(self, v) -> bool:
        return isinstance(v, Value) and isinstance(v.type, ArrayType)

    def _static(self, v, what: str, loc: Loc):
        """A static argument's Python value (a constant, a string, None, a tuple)."""
        if isinstance(v, Meta):
            return v.obj
        if isinstance(v, tuple):
            return tuple(self._static(x, what, loc) for x in v)
        if isinstance(v, Value):
            if isinstance(v.type, ScalarType) and v.type.kind in "iu":
                return self._static_int(v, what, loc)
            c = self.constant_value(v)
            if c is None:
                raise CompileError(f"{what} must be a constant here", loc,
                                   hint="a value known when the kernel compiles (a literal, "
                                        "a module-level constant)")
            return c
        return v

    def _ints(self, v, what: str, loc: Loc):
        """An int or a tuple of ints (nested tuples too), all constants."""
        if isinstance(v, tuple):
            return tuple(self._ints(x, what, loc) for x in v)
        return self._static_int(v, what, loc)

    def _axes(self, v, loc: Loc):
        """axis= of np.flip, np.roll, np.expand_dims, which (unlike the reductions) take
        a list of axes too."""
        return self._axis(tuple(v) if isinstance(v, tuple) else v, loc)

    def _dtype_or_none(self, v, fname: str, loc: Loc):
        if v is None or isinstance(v, Meta) and v.obj is None:
            return None
        return self._dtype(v, f"np.{fname}()", loc)

    # --- the operations ---------------------------------------------------------------------

    def _np_cumsum(self, fname, p, loc):
        return self.array_op(fname, [p["a"]], loc, axis=self._axis(p["axis"], loc))

    def _np_var(self, fname, p, loc):
        return self.array_op(fname, [p["a"]], loc, axis=self._axis(p["axis"], loc),
                             ddof=self._static(p["ddof"], "ddof", loc),
                             keepdims=bool(self._static(p["keepdims"], "keepdims", loc)))

    def _np_norm(self, fname, p, loc):
        o = self._static(p["ord"], "ord", loc)
        return self.array_op(fname, [p["x"]], loc, ord=o, axis=self._axis(p["axis"], loc),
                             keepdims=bool(self._static(p["keepdims"], "keepdims", loc)))

    def _np_sort(self, fname, p, loc):
        # always stable (kind='stable'): the order of ties is then NumPy's on any machine
        return self.array_op(fname, [p["a"]], loc, axis=self._axis(p["axis"], loc))

    def _np_round(self, fname, p, loc):
        a, d = p["a"], self._static_int(p["decimals"], "decimals", loc)
        if not self._is_array_value(a) and d == 0:
            if not isinstance(a, Value) or not isinstance(a.type, ScalarType):
                raise CompileError(f"np.{fname}() of {self.describe(a)} is not supported", loc)
            return a if a.type.kind != "f" else self.emit("math", [a], a.type, loc,
                                                           {"fn": "rint"})
        return self.array_op("round", [a], loc, decimals=d)

    def _np_eye(self, fname, p, loc):
        m = p["M"]
        m = None if m is None or isinstance(m, Meta) and m.obj is None else \
            self._static_int(m, "np.eye()'s M", loc)
        dt = self._dtype_or_none(p["dtype"], fname, loc) or "float64"
        return self.array_op("eye", [], loc, N=self._static_int(p["N"], "np.eye()'s N", loc),
                             M=m, k=self._static_int(p["k"], "np.eye()'s k", loc), dtype=dt)

    def _np_linspace(self, fname, p, loc):
        ends = [p["start"], p["stop"]]
        if not all(isinstance(v, Value) and isinstance(v.type, ScalarType) for v in ends):
            raise CompileError("np.linspace() takes numbers for start and stop here", loc)
        if self._static_int(p["axis"], "np.linspace()'s axis", loc) not in (0, -1):
            raise CompileError("np.linspace(): numbers for start and stop make one axis "
                               "(axis=0)", loc)
        return self.array_op("linspace", ends, loc,
                             num=self._static_int(p["num"], "np.linspace()'s num", loc),
                             endpoint=bool(self._static(p["endpoint"], "endpoint", loc)),
                             dtype=self._dtype_or_none(p["dtype"], fname, loc))

    def _np_take(self, fname, p, loc):
        a, idx = p["a"], p["indices"]
        axis = self._axis(p["axis"], loc)
        idx = self._index_array(idx, loc)
        self._check_shaped(a, "np.take", loc)
        self._check_shaped(idx, "np.take", loc)
        shape = a.type.shape
        size = int(np.prod(shape, dtype=np.int64)) if axis is None else \
            shape[axis % max(len(shape), 1)]
        out = self.array_op("take", [a, idx], loc, axis=axis)
        # after the take (which clips, and has no effect): a backend that refuses
        # per-lane arrays names the take
        self._check_indices(idx, size, 0 if axis is None else axis, loc)
        return out

    def _index_array(self, idx, loc: Loc) -> Value:
        """Integer indices: a number, an array, or a constant list/tuple (captured)."""
        if isinstance(idx, tuple):
            values = self._ints(idx, "an index of a list of indices", loc)
            return self.from_python(np.array(values, dtype=np.int64), "indices", loc)
        if not isinstance(idx, Value) or idx.type.dtype.kind not in "iu":
            raise CompileError(f"indices must be integers, not {self.describe(idx)}", loc)
        return idx

    def _check_indices(self, idx: Value, size: int, axis: int, loc: Loc) -> None:
        """An ``index`` check of the active lanes: every index in ``-size..size-1``."""
        ok = self.arith("bitand", self.compare("ge", idx, self.const(-size, loc), loc),
                        self.compare("lt", idx, self.const(size, loc), loc), loc)
        if self._is_array_value(ok):
            ok = self.array_op("all", [ok], loc, axis=None, keepdims=False)
        if ok.type != BOOL:
            ok = self.coerce(ok, BOOL, loc)
        self.emit_op("check", [ok], [], loc, {
            "kind": "index", "message": f"index out of bounds for axis {axis} with size {size}"})

    def _np_roll(self, fname, p, loc):
        return self.array_op("roll", [p["a"]], loc, shift=self._ints(p["shift"], "shift", loc),
                             axis=self._axes(p["axis"], loc))

    def _np_diff(self, fname, p, loc):
        return self.array_op("diff", [p["a"]], loc, n=self._static_int(p["n"], "n", loc),
                             axis=self._axis(p["axis"], loc))

    def _np_tile(self, fname, p, loc):
        return self.array_op("tile", [p["A"]], loc, reps=self._ints(p["reps"], "reps", loc))

    def _np_repeat(self, fname, p, loc):
        return self.array_op("repeat", [p["a"]], loc,
                             repeats=self._ints(p["repeats"], "repeats", loc),
                             axis=self._axis(p["axis"], loc))

    def _np_diag(self, fname, p, loc):
        out = self.array_op("diag", [p["v"]], loc, k=self._static_int(p["k"], "k", loc))
        if p["v"].type.ndim == 2:  # NumPy's read-only view of the diagonal: never written
            self.readonly_ids.add(out.id)
        return out

    def _np_trace(self, fname, p, loc):
        axes = (self._static_int(p["axis1"], "axis1", loc),
                self._static_int(p["axis2"], "axis2", loc))
        if axes != (0, 1):
            raise CompileError("np.trace(): only axis1=0, axis2=1 are supported here", loc)
        return self.array_op("trace", [p["a"]], loc,
                             offset=self._static_int(p["offset"], "offset", loc))

    def _np_isclose(self, fname, p, loc):
        statics = {k: self._static(p[k], k, loc) for k in ("rtol", "atol", "equal_nan")}
        statics = {"rtol": float(statics["rtol"]), "atol": float(statics["atol"]),
                   "equal_nan": bool(statics["equal_nan"])}
        return self.array_op(fname, [p["a"], p["b"]], loc, **statics)

    def _np_interp(self, fname, p, loc):
        ends = {k: None if p[k] is None or isinstance(p[k], Meta) and p[k].obj is None
                else float(self._static(p[k], k, loc)) for k in ("left", "right")}
        return self.array_op("interp", [p["x"], p["xp"], p["fp"]], loc, **ends)

    def _np_searchsorted(self, fname, p, loc):
        side = self._static(p["side"], "side", loc)
        if side not in ("left", "right"):
            raise CompileError(f"np.searchsorted(): side must be 'left' or 'right', not "
                               f"{side!r}", loc)
        return self.array_op("searchsorted", [p["a"], p["v"]], loc, side=side)

    def _np_pad(self, fname, p, loc):
        a = p["array"]
        nd = a.type.ndim
        mode = self._static(p["mode"], "mode", loc)
        if mode not in ("constant", "edge", "reflect"):
            raise CompileError(f"np.pad(): mode {mode!r} is not supported here", loc,
                               hint="mode='constant' (with constant_values), 'edge' or "
                                    "'reflect'")
        width = np.broadcast_to(np.asarray(self._ints(p["pad_width"], "pad width", loc),
                                           np.int64), (nd, 2))
        params = {"pad_width": tuple(tuple(int(x) for x in row) for row in width),
                  "mode": mode}
        cv = self._static(p["constant_values"], "constant_values", loc)
        if mode == "constant":
            params["constant_values"] = cv if not isinstance(cv, tuple) else tuple(
                tuple(row) for row in np.broadcast_to(np.asarray(cv), (nd, 2)).tolist())
        elif "constant_values" in p and cv != 0:
            raise CompileError(f"np.pad(): constant_values with mode {mode!r}", loc)
        return self.array_op("pad", [a], loc, **params)

    # --- spellings of other operations -------------------------------------------------------

    def _np_reshape(self, fname, p, loc):
        a = p["a"]
        if not self._is_array_value(a):
            raise CompileError(f"np.{fname}() takes an array here", loc)
        self._check_shaped(a, f"np.{fname}", loc)
        shape = tuple(a.type.shape)
        if fname == "ravel":
            new = (int(np.prod(shape, dtype=np.int64)),)
        else:
            axis = self._axes(p["axis"], loc) if fname == "expand_dims" else \
                self._axis(p["axis"], loc)
            stand_in = np.empty(shape, np.uint8)
            try:
                new = (np.squeeze(stand_in, axis) if fname == "squeeze"
                       else np.expand_dims(stand_in, axis)).shape
            except (ValueError, np.exceptions.AxisError) as e:
                raise CompileError(f"np.{fname}(): {e}", loc) from None
        return self.array_op("reshape", [a], loc, shape=new)

    def _np_copy(self, fname, p, loc):
        if fname == "flatten":
            a = self.array_op("copy", [p["a"]], loc, order="C")
            return self.array_op("reshape", [a], loc,
                                 shape=(int(np.prod(a.type.shape, dtype=np.int64)),))
        obj = p["a"] if "a" in p else p["object"]
        if isinstance(obj, tuple):  # np.array((x, y)): numbers and arrays, stacked
            obj = self.array_op("stack", [self._nested(x, loc) for x in obj], loc, axis=0)
        elif not self._is_array_value(obj):
            raise CompileError(f"np.{fname}() of {self.describe(obj)} is not supported", loc)
        elif fname == "copy" or fname == "array" and self._static(p["copy"], "copy", loc):
            # np.array(a, copy=None/False) is a itself where the dtype fits
            order = self._static(p.get("order", "K"), "order", loc)
            if order not in ("K", "C"):
                raise CompileError(f"np.{fname}(): only order='K' or 'C' here", loc)
            obj = self.array_op("copy", [obj], loc, order=order)
        dt = self._dtype_or_none(p.get("dtype"), fname, loc)
        if dt is not None and dt != obj.type.dtype.name:
            obj = self.array_op("astype", [obj], loc, dtype=dt)
        return obj

    def _nested(self, x, loc):
        if isinstance(x, tuple):
            return self.array_op("stack", [self._nested(y, loc) for y in x], loc, axis=0)
        return x

    def _np_getitem(self, fname, p, loc):
        a = p["m"]
        if not self._is_array_value(a):
            raise CompileError(f"np.{fname}() takes an array here", loc)
        nd = a.type.ndim
        axis = {"fliplr": 1, "flipud": 0}.get(fname, None)
        if fname == "flip":
            axis = self._axes(p["axis"], loc)
        axes = range(nd) if axis is None else axis if isinstance(axis, tuple) else (axis,)
        axes = {x % nd if nd else x for x in axes}
        if any(x >= nd for x in axes) or nd == 0:
            raise CompileError(f"np.{fname}(): axis out of range for {nd} dimension(s)", loc)
        spec = tuple(("slice", None, None, -1) if k in axes else ("slice", None, None, None)
                     for k in range(nd))
        return self.array_op("getitem", [a], loc, index=spec)


#: functions that share another's handler
_FAMILY = {"cumprod": "cumsum", "std": "var", "argsort": "sort", "allclose": "isclose"}

