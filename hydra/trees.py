"""Containers of values as trees (JAX's pytrees): ``flatten`` and ``unflatten``.

A kernel's arguments and results may be tuples, lists, dicts with ``str`` keys,
namedtuples and dataclasses, nested.  At the boundary a container becomes its
*leaves* (arrays, numbers, futures: whatever is not a container) and a ``TreeDef``,
its structure: hashable, so that it is part of a kernel's specialization key, and
enough to rebuild a container of the same structure from other leaves (a result, or
one day a gradient in its argument's structure).

- a dict's leaves come in sorted key order (as JAX), whatever order it was built in;
- ``None`` and strings are *static*: not leaves but part of the structure (and so of
  the key), as are a dataclass's ``bool`` fields (a flag such as ``use_bias`` decides
  code when the kernel compiles);
- a dataclass is rebuilt by calling its class with its fields as keywords (fields
  with ``init=False`` are set after), a namedtuple by its class.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

#: types whose instances are always leaves (``is_container`` answers them first)
_LEAF_TYPES = frozenset({np.ndarray, float, int, bool, np.float64, np.float32, np.int64,
                         np.int32, np.bool_})

#: the kinds of inner nodes, with the static and leaf kinds
KINDS = ("leaf", "static", "tuple", "list", "dict", "namedtuple", "dataclass")


@dataclass(frozen=True, slots=True, repr=False)
class TreeDef:
    """One node of a tree's structure.  ``kind``: one of ``KINDS``; ``aux``: a static
    node's value, or a namedtuple's or dataclass's class; ``names``: a dict's keys
    (sorted), a namedtuple's or dataclass's field names; ``children``: the nodes below."""

    kind: str
    aux: object = None
    names: tuple = ()
    children: tuple["TreeDef", ...] = ()
    _hash: int = dataclasses.field(default=0, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        # a kernel's cache key holds the treedef: hashed on every call, so hashed once
        object.__setattr__(self, "_hash", hash((self.kind, self.aux, self.names,
                                                self.children)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self):
        # rebuilt, not restored: a class's hash differs from one process to the next
        return TreeDef, (self.kind, self.aux, self.names, self.children)

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    def __str__(self) -> str:
        return show(self, ["*"] * self.num_leaves)

    def __repr__(self) -> str:  # (dump-ir prints it in a print op's template)
        return f"TreeDef({show(self, ['*'] * self.num_leaves, qualified=True)})"


LEAF = TreeDef("leaf")
NONE = TreeDef("static", None)


def static(value) -> TreeDef:
    """The node of a static value (``None``, a string, a dataclass's bool field)."""
    return TreeDef("static", value)


def is_namedtuple(obj) -> bool:
    """Is ``obj`` an instance of a ``namedtuple`` (or ``typing.NamedTuple``) class?"""
    return isinstance(obj, tuple) and hasattr(type(obj), "_fields")


def is_dataclass_instance(obj) -> bool:
    """Is ``obj`` a dataclass instance (not a dataclass class)?"""
    return dataclasses.is_dataclass(obj) and not isinstance(obj, type)


def is_container(obj) -> bool:
    """Is ``obj`` an inner node of a tree (not a leaf, not a static value)?"""
    if type(obj) in _LEAF_TYPES:  # the common arguments, asked on every call: at once
        return False
    return isinstance(obj, (tuple, list, dict)) or is_dataclass_instance(obj)


def flatten(obj, path: str = "", is_leaf=None) -> tuple[list, TreeDef]:
    """``(leaves, treedef)`` of ``obj``.  ``path`` names ``obj`` in a ``TypeError``
    (a dict key that is not a string); ``is_leaf(x)``: True where a container ``x`` is
    to be one leaf (as JAX's ``is_leaf``)."""
    leaves: list = []
    try:
        return leaves, _flatten(obj, leaves, None, False, is_leaf)
    except _BadKey:  # again, with the paths (made only here: a call flattens its
        pass        # arguments, and the paths cost more than the rest)
    return leaves, _flatten(obj, [], path, False, is_leaf)


class _BadKey(Exception):
    pass


@functools.lru_cache(maxsize=None)
def _kind_of(cls) -> str:
    """How ``flatten`` takes an object of class ``cls`` (cached: it runs per leaf)."""
    if cls is type(None) or issubclass(cls, str):
        return "static"
    if issubclass(cls, tuple):
        return "namedtuple" if hasattr(cls, "_fields") else "tuple"
    if issubclass(cls, list):
        return "list"
    if issubclass(cls, dict):
        return "dict"
    return "dataclass" if dataclasses.is_dataclass(cls) else "leaf"


def _flatten(obj, leaves: list, path: str | None, in_dataclass: bool, is_leaf) -> TreeDef:
    if is_leaf is not None and is_leaf(obj):
        leaves.append(obj)
        return LEAF
    kind = _kind_of(type(obj))
    if kind == "leaf":
        if in_dataclass and isinstance(obj, bool):
            return static(obj)
        leaves.append(obj)
        return LEAF
    if kind == "static":
        return static(obj)
    if kind in ("tuple", "list"):
        kids = tuple(_flatten(v, leaves, path and f"{path}[{i}]", False, is_leaf)
                     for i, v in enumerate(obj))
        return TreeDef(kind, None, (), kids)
    if kind == "dict":
        bad = [k for k in obj if not isinstance(k, str)]
        if bad and path is None:
            raise _BadKey
        if bad:
            raise TypeError(f"argument '{path}' is a dict with the key {bad[0]!r}: hydra "
                            f"takes dicts with str keys")
        keys = tuple(sorted(obj))
        kids = tuple(_flatten(obj[k], leaves, path and f"{path}[{k!r}]", False, is_leaf)
                     for k in keys)
        return TreeDef("dict", None, keys, kids)
    names = obj._fields if kind == "namedtuple" else _field_names(type(obj))
    kids = tuple(_flatten(getattr(obj, n), leaves, path and f"{path}.{n}", kind == "dataclass",
                          is_leaf) for n in names)
    return TreeDef(kind, type(obj), tuple(names), kids)


@functools.lru_cache(maxsize=None)
def _field_names(cls) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def unflatten(treedef: TreeDef, leaves) -> object:
    """The container of ``treedef``'s structure holding ``leaves`` (in flatten's order)."""
    it = iter(leaves)
    out = _build(treedef, it)
    if next(it, _END) is not _END:
        raise ValueError(f"too many leaves for the structure {treedef}")
    return out


_END = object()


def _build(t: TreeDef, it):
    kind = t.kind
    if kind == "leaf":
        return next(it)
    if kind == "static":
        return t.aux
    items = [_build(c, it) for c in t.children]
    if kind == "tuple":
        return tuple(items)
    if kind == "list":
        return items
    if kind == "dict":
        return dict(zip(t.names, items))
    if kind == "namedtuple":
        return t.aux(*items)
    return _dataclass(t.aux, dict(zip(t.names, items)))


def _dataclass(cls, values: dict):
    init = {f.name for f in dataclasses.fields(cls) if f.init}
    obj = cls(**{k: v for k, v in values.items() if k in init})
    for k, v in values.items():
        if k not in init:
            object.__setattr__(obj, k, v)  # frozen dataclasses too
    return obj


def paths(treedef: TreeDef, root: str) -> list[str]:
    """The names of the leaves as the user writes them: ``p['W1']``, ``m.W1``,
    ``layers[0]``, in leaf order."""
    out: list[str] = []
    _paths(treedef, root, out)
    return out


def _paths(t: TreeDef, path: str, out: list) -> None:
    if t.kind == "leaf":
        out.append(path)
    elif t.kind == "dict":
        for k, c in zip(t.names, t.children):
            _paths(c, f"{path}[{k!r}]", out)
    elif t.kind in ("namedtuple", "dataclass"):
        for k, c in zip(t.names, t.children):
            _paths(c, f"{path}.{k}", out)
    else:
        for i, c in enumerate(t.children):
            _paths(c, f"{path}[{i}]", out)


def show(t: TreeDef, leaves: list, qualified: bool = False) -> str:
    """The structure with ``leaves`` (strings) in it, e.g. ``MLP(W1=float64[3, 4], b1=*)``
    (``qualified``: classes with their modules)."""
    it = iter(leaves)
    return _show(t, it, qualified)


def _show(t: TreeDef, it, qualified: bool) -> str:
    if t.kind == "leaf":
        return str(next(it))
    if t.kind == "static":
        return repr(t.aux)
    items = [_show(c, it, qualified) for c in t.children]
    if t.kind == "tuple":
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if t.kind == "list":
        return "[" + ", ".join(items) + "]"
    if t.kind == "dict":
        return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(t.names, items)) + "}"
    name = f"{t.aux.__module__}.{t.aux.__qualname__}" if qualified else t.aux.__name__
    return f"{name}(" + ", ".join(f"{k}={v}" for k, v in zip(t.names, items)) + ")"


def tuple_of(n: int) -> TreeDef:
    """A tuple of ``n`` leaves."""
    return TreeDef("tuple", None, (), (LEAF,) * n)
