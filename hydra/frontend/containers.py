"""Containers inside a kernel: tuples, lists, dicts, namedtuples and dataclasses.

A container argument arrives as its leaves (``hydra.arguments``); the builder sees it
again as a container (``param_tree``), so the body reads it as Python would:
``p["W1"]``, ``m.W1``, ``layers[0]``, ``for layer in layers`` (unrolled: one copy of
the body per item), ``len(layers)``, ``p.items()``.  A plain tuple is a Python tuple
of frontend values, as it always was; the other containers are a ``Struct``: its
kind, class and names (a dict's keys, sorted, or the fields) and its items.  Both are
compile-time structures whose leaves are SSA values: they join at ``if``s and loops
leaf by leaf, and a kernel or helper returns them as its leaves and a ``TreeDef``.

Containers are read-only in a kernel (JAX's pytrees are too): assigning an item or
an attribute, or calling ``append``, is a ``CompileError``; a new one is built from a
literal (``{**p, "W": W}``, ``(*t, x)`` is not supported: ``t + (x,)`` is) or with
``dataclasses.replace``.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from dataclasses import dataclass

from .. import trees
from ..errors import CompileError, CompileTypeError, Loc
from ..ir.core import Value
from ..types import TreeType, Type
from .arrayops import SHAPE_VALUES
from .common import Meta, loop_exits

READ_ONLY = "containers are read-only in hydra kernels"
READ_ONLY_HINT = ("build a new one instead: {**p, 'key': value} for a dict, t + (x,) for a "
                  "tuple, dataclasses.replace(m, field=value) for a dataclass")
_MUTATORS = ("append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse",
             "update", "setdefault", "popitem", "__setitem__", "__delitem__")


@dataclass(frozen=True, slots=True)
class Struct:
    """A list, dict, namedtuple or dataclass value in the builder (``trees.TreeDef``'s
    kinds): its ``items`` are frontend values (SSA values, tuples, Structs, ``Meta``)."""

    kind: str
    aux: object
    names: tuple
    items: tuple

    def like(self, items) -> "Struct":
        return Struct(self.kind, self.aux, self.names, tuple(items))

    def same_node(self, other: "Struct") -> bool:
        return (self.kind, self.aux, self.names, len(self.items)) == \
            (other.kind, other.aux, other.names, len(other.items))

    def describe(self) -> str:
        if self.kind == "list":
            return f"a list of {len(self.items)}"
        if self.kind == "dict":
            return "a dict"
        name = self.aux.__name__
        return ("an " if name[0] in "AEIOUaeiou" else "a ") + name


@dataclass(frozen=True, slots=True)
class ContainerMethod:
    """``p.items`` before the call: the container and the method's name."""

    struct: Struct
    name: str


def is_node(v) -> bool:
    """A container (a tuple or a ``Struct``): an inner node of a tree."""
    return isinstance(v, (tuple, Struct))


def items_of(v) -> tuple:
    """A container's items (a tuple's own elements, a Struct's items)."""
    return v if isinstance(v, tuple) else v.items


def like(v, items):
    """A container of ``v``'s structure holding ``items``."""
    return tuple(items) if isinstance(v, tuple) else v.like(items)


def treedef_of(v, children: tuple) -> trees.TreeDef:
    """The ``TreeDef`` node of container ``v`` over its items' nodes ``children``."""
    if isinstance(v, tuple):
        return trees.TreeDef("tuple", None, (), children)
    return trees.TreeDef(v.kind, v.aux, v.names, children)


def struct_of(t: trees.TreeDef, items) -> object:
    """The builder's value of a node of ``t``'s kind holding ``items``."""
    if t.kind == "tuple":
        return tuple(items)
    return Struct(t.kind, t.aux, t.names, tuple(items))


def _ident(key) -> str:
    return re.sub(r"\W", "_", str(key))


class ContainerMixin:
    """Containers in the builder; mixed into ``Builder``."""

    # --- arguments -----------------------------------------------------------------

    def param_tree(self, name: str, t: Type, loc: Loc, params: list, names: list):
        """The body's value of parameter ``name`` of type ``t``: a container argument
        arrives as its leaves, parameters named after their paths (``p_W1``)."""
        if not isinstance(t, TreeType):
            v = Value(t, loc, name)
            params.append(v)
            names.append(name)
            return v
        leaves = iter(t.leaves)
        paths = iter(trees.paths(t.treedef, name))
        return self._param_node(t.treedef, name, name, leaves, paths, loc, params, names)

    def _param_node(self, t, ident: str, owner: str, leaves, paths, loc, params, names):
        if t.kind == "leaf":
            while ident in names:
                ident += "_"
            v = Value(next(leaves), loc, ident)
            params.append(v)
            names.append(ident)
            self.param_owners[ident] = owner
            path = self.param_paths[ident] = next(paths)
            pinned = SHAPE_VALUES.get() or {}
            if path in pinned:  # an int leaf a shape or an unrolled loop depends on
                return self.const(pinned[path], loc, v.type)
            return v
        if t.kind == "static":
            return self.const(t.aux, loc) if isinstance(t.aux, bool) else Meta(t.aux)
        keys = t.names or range(len(t.children))
        items = [self._param_node(c, f"{ident}_{_ident(k)}", owner, leaves, paths, loc,
                                  params, names) for k, c in zip(keys, t.children)]
        return struct_of(t, items)

    # --- results -------------------------------------------------------------------

    def flatten(self, value, name: str, loc: Loc) -> tuple[list[Value], trees.TreeDef]:
        """Leaves of a (possibly nested) container value and its structure."""
        if is_node(value):
            leaves, kids = [], []
            for v in items_of(value):
                lv, t = self.flatten(v, name, loc)
                leaves += lv
                kids.append(t)
            return leaves, treedef_of(value, tuple(kids))
        if isinstance(value, Value):
            return [value], trees.LEAF
        if value is None:
            return [], trees.NONE
        if isinstance(value, Meta) and (value.obj is None or isinstance(value.obj, str)):
            return [], trees.static(value.obj)
        raise CompileError(f"'{name.lstrip('$')}' holds {self.describe(value)}, which cannot "
                           f"be returned or carried between paths", loc)

    def unflatten(self, leaves: list[Value], tree: trees.TreeDef):
        """The builder's value of ``tree`` holding ``leaves`` (a helper's result)."""
        if tree == trees.NONE:
            return None
        return self._unflatten(tree, iter(leaves))

    def _unflatten(self, t: trees.TreeDef, it):
        if t.kind == "leaf":
            return next(it)
        if t.kind == "static":
            return Meta(t.aux)
        return struct_of(t, [self._unflatten(c, it) for c in t.children])

    # --- reading -------------------------------------------------------------------

    def container_item(self, base, node: ast.Subscript, loc: Loc):
        """``base[...]`` of a tuple, list, namedtuple or dict."""
        if isinstance(base, Struct) and base.kind == "dict":
            key = self.expr(node.slice)
            key = key.obj if isinstance(key, Meta) else None
            if not isinstance(key, str):
                raise CompileError("a dict in a kernel is indexed by a string constant "
                                   "(its keys are known when the kernel compiles)", loc)
            if key not in base.names:
                raise CompileError(f"KeyError: {key!r} is not a key of this dict (its keys "
                                   f"are {', '.join(map(repr, base.names))})", loc)
            return base.items[base.names.index(key)]
        if isinstance(base, Struct) and base.kind == "dataclass":
            raise CompileError(f"'{base.aux.__name__}' object is not subscriptable", loc,
                               hint="read its fields as attributes: m.field")
        items = items_of(base)
        what = "a tuple" if isinstance(base, tuple) else base.describe().split(" of ")[0]
        if isinstance(node.slice, ast.Slice):
            raise CompileError(f"slices of {what} are not supported", loc,
                               hint="index it with integer constants")
        index_value = self.expr(node.slice)
        index = self.constant_value(index_value)
        if not isinstance(index, int) or isinstance(index, bool):
            raise self.item_index_error(index_value, what, loc)
        if not -len(items) <= index < len(items):
            raise CompileError(f"{what.split()[-1]} index {index} out of range for "
                               f"{what} of {len(items)}", loc)
        return items[index]

    def item_index_error(self, index, what: str, loc: Loc) -> CompileError:
        """The error for a container indexed by a value not known at compile time; a
        ``NeedShapes`` (the builder retries with the loop unrolled) where the index is
        the counter of a loop hydra can unroll, or a uniform int it may specialize on."""
        from .arrayops import NeedShapes
        from .unroll import shape_reason
        behind = self._params_behind(index) if isinstance(index, Value) else ()
        counter = shape_reason(behind)
        text = (f"{what} can only be indexed by an integer constant or the counter of a loop "
                f"that hydra unrolls (range() of constants, no break, continue or return)")
        if counter:
            text += f"; this index depends on {counter}"
        return NeedShapes(text, loc, hint="write for item in items: ... (unrolled), or keep "
                          "equal-shaped arrays in one array with a leading axis",
                          params=behind)

    def container_attribute(self, base: Struct, attr: str, loc: Loc):
        if base.kind in ("namedtuple", "dataclass") and attr in base.names:
            return base.items[base.names.index(attr)]
        if attr in _MUTATORS:
            raise CompileError(f"'{attr}' would change {base.describe()}: {READ_ONLY}", loc,
                               hint=READ_ONLY_HINT)
        if base.kind == "dict" and attr in ("items", "keys", "values", "get"):
            return Meta(ContainerMethod(base, attr))
        raise CompileError(f"{base.describe()} has no attribute '{attr}' in a kernel", loc)

    def call_container_method(self, m: ContainerMethod, args, kwargs, loc: Loc):
        s = m.struct
        if m.name == "get":
            key = args[0].obj if args and isinstance(args[0], Meta) else None
            if kwargs or len(args) not in (1, 2) or not isinstance(key, str):
                raise CompileError("get() takes a string constant and a default", loc)
            if key in s.names:
                return s.items[s.names.index(key)]
            return args[1] if len(args) == 2 else Meta(None)
        if args or kwargs:
            raise CompileError(f"{m.name}() takes no arguments", loc)
        keys = tuple(Meta(k) for k in s.names)
        return {"keys": keys, "values": s.items,
                "items": tuple(zip(keys, s.items))}[m.name]

    def iteration_items(self, value, loc: Loc) -> tuple:
        """What ``for x in value`` runs over, for a container (a dict: its keys)."""
        if isinstance(value, Struct) and value.kind == "dict":
            return tuple(Meta(k) for k in value.names)
        if isinstance(value, Struct) and value.kind == "dataclass":
            raise CompileError(f"'{value.aux.__name__}' object is not iterable", loc)
        return items_of(value)

    def for_items(self, node: ast.For, items: tuple, loc: Loc) -> None:
        """``for x in (a, b, c)``: unrolled, the body translated once per item (so each
        copy may see another type: arrays of other shapes, other containers).  A
        ``break``, ``continue`` or ``return`` sets its flag, as in a loop, and the rest
        of the copy and the copies after it run only where no flag stops them."""
        frame = self.frame
        has_break, has_continue = loop_exits(node.body)
        tag = frame.prefix + "." + self.fresh()
        brk, cont = (f"$brk{tag}" if has_break else ""), (f"$cont{tag}" if has_continue else "")
        if brk:
            frame.env[brk] = self.const(False, loc)
        hidden = []

        def at(x):
            return ast.copy_location(x, node)

        def copies(k: int) -> None:
            if k == len(items):
                return
            name = f"$item{frame.prefix}.{self.fresh()}"
            hidden.append(name)
            self.frame.env[name] = items[k]
            if cont:
                self.frame.env[cont] = self.const(False, loc)
            self.frame.loops.append((brk, cont))
            self.stmts([at(ast.Assign([node.target], at(ast.Name(name, ast.Load())))),
                        *node.body])
            if cont:
                self.frame.env[cont] = self.const(False, loc)
            guard = self.still_running(loc)  # not after a return or a break
            self.frame.loops.pop()
            if guard is None:
                copies(k + 1)
            else:
                self.build_if(guard, lambda: copies(k + 1), lambda: None, loc)
        copies(0)
        for name in [*hidden, brk, cont]:
            self.frame.env.pop(name, None)
            self.frame.partial.pop(name, None)

    # --- building ------------------------------------------------------------------

    def expr_list(self, node: ast.List):
        return Struct("list", None, (), tuple(self.expr(e) for e in node.elts))

    def expr_dict(self, node: ast.Dict):
        loc = self.loc(node)
        out: dict = {}
        for k, v in zip(node.keys, node.values):
            value = self.expr(v)
            if k is None:  # {**p, ...}
                if not (isinstance(value, Struct) and value.kind == "dict"):
                    raise CompileError(f"** takes a dict, not {self.describe(value)}", loc)
                out.update(zip(value.names, value.items))
                continue
            key = self.expr(k)
            if not (isinstance(key, Meta) and isinstance(key.obj, str)):
                raise CompileError("dict keys in a kernel are string constants", self.loc(k))
            out[key.obj] = value
        keys = tuple(sorted(out))
        return Struct("dict", None, keys, tuple(out[k] for k in keys))

    def make_instance(self, cls, args, kwargs, loc: Loc):
        """``MLP(W1=..., b1=...)`` or ``Point(x, y)``: a dataclass or namedtuple built in
        the kernel (its defaults as constants)."""
        if dataclasses.is_dataclass(cls):
            names = tuple(f.name for f in dataclasses.fields(cls))
        else:
            names = tuple(cls._fields)
        try:
            bound = inspect.signature(cls).bind(*args, **kwargs)
        except TypeError as e:
            raise CompileTypeError(f"{cls.__name__}(): {e}", loc) from None
        values = dict(bound.arguments)
        for name in names:
            if name not in values:
                default = _default_of(cls, name)
                if default is _MISSING:
                    raise CompileError(f"{cls.__name__}(): field '{name}' has no value", loc)
                values[name] = self.from_python(default, name, loc)
        kind = "dataclass" if dataclasses.is_dataclass(cls) else "namedtuple"
        return Struct(kind, cls, names, tuple(values[n] for n in names))

    def replace_fields(self, args, kwargs, loc: Loc):
        """``dataclasses.replace(m, W1=W)`` (or a namedtuple's ``_replace``)."""
        if len(args) != 1 or not isinstance(args[0], Struct) \
                or args[0].kind not in ("dataclass", "namedtuple"):
            raise CompileError("dataclasses.replace() takes one dataclass and fields", loc)
        s = args[0]
        unknown = [k for k in kwargs if k not in s.names]
        if unknown:
            raise CompileTypeError(f"{s.aux.__name__} has no field '{unknown[0]}'", loc)
        return s.like(kwargs.get(n, v) for n, v in zip(s.names, s.items))

    def read_only_target(self, target: ast.Attribute, loc: Loc) -> None:
        """The error for ``m.W = v`` where ``m`` is a container."""
        self.read_only_error(self.expr(target.value), "an attribute", loc)

    def read_only_error(self, base, what: str, loc: Loc) -> None:
        """Raise the error for assigning ``what`` (an item, an attribute) of ``base``, if
        it is a container."""
        if is_node(base):
            shown = base.describe() if isinstance(base, Struct) else "a tuple"
            raise CompileError(f"cannot assign to {what} of {shown}: {READ_ONLY}", loc,
                               hint=READ_ONLY_HINT)

    def container_len(self, a, loc: Loc) -> Value:
        if isinstance(a, Struct) and a.kind == "dataclass":
            raise CompileError(f"object of type '{a.aux.__name__}' has no len()", loc)
        return self.const(len(items_of(a)), loc)


_MISSING = object()


def _default_of(cls, name: str):
    if dataclasses.is_dataclass(cls):
        f = next(f for f in dataclasses.fields(cls) if f.name == name)
        if f.default is not dataclasses.MISSING:
            return f.default
        return _MISSING
    return getattr(cls, "_field_defaults", {}).get(name, _MISSING)

