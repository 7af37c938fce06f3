"""The one table of lane intrinsics (SPEC section 3).

Each ``Intrinsic`` holds everything about one intrinsic: the Python-level stub a
user imports, its argument count, its type rule, its uniformity rule, its
reference implementation (the semantics: NumPy over all N lanes with the active
mask) and its doc.  Backends register their lowerings in ``lowerings`` with
``@lowers(backend, name)``; a test checks every backend covers every entry, and the
docs' intrinsics table is generated from this one.

Reference implementations take ``(args, mask, lanes, fail)``: ``args`` are the
operands, each a NumPy array of ``lanes`` values (uniform ones broadcast),
``mask`` the active lanes, and ``fail(kind, message, lane)`` raises the error of
SPEC section 6.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .types import BOOL, INT64, WEAK_INT, ArrayType, ScalarType, Type


@dataclass(slots=True)
class Intrinsic:
    name: str
    nargs: int
    doc: str
    result: Callable[[list[Type]], Type | None]  # type rule; None: no result
    varying: Callable[[list[bool]], bool]  # uniformity rule over argument marks
    reference: Callable
    cross_lane: bool = True  # reads other lanes: a sync point, takes the active mask
    effect: bool = False
    lowerings: dict[str, Callable] = field(default_factory=dict)


def _same(ts: list[Type]) -> Type:
    return ts[0]


def _summed(ts: list[Type]) -> Type:
    t = ts[0]
    return INT64 if isinstance(t, ScalarType) and t.kind == "b" else t


def _check_active(src: np.ndarray, mask: np.ndarray, fail, what: str) -> None:
    bad = np.nonzero(mask & ~mask[src])[0]
    if bad.size:
        i = int(bad[0])
        fail("inactive", f"{what} reads lane {int(src[i])}, which is not active", i)


def _check_range(src: np.ndarray, mask: np.ndarray, lanes: int, fail, what: str) -> None:
    bad = np.nonzero(mask & ((src < 0) | (src >= lanes)))[0]
    if bad.size:
        i = int(bad[0])
        fail("index", f"{what}: lane index {int(src[i])} is out of range for {lanes} lanes", i)


def _reduce(name: str, ufunc, empty):
    def ref(args, mask, lanes, fail):
        (x,) = args
        active = x[mask]
        if active.size == 0:
            if empty is None:
                fail("inactive", f"{name} over no active lanes", None)
            return np.asarray(empty, dtype=x.dtype)
        return ufunc.reduce(active)
    return ref


def _ref_lane(args, mask, lanes, fail):
    return np.arange(lanes, dtype=np.int64)


def _ref_nlanes(args, mask, lanes, fail):
    return np.int64(lanes)


def _ref_broadcast(args, mask, lanes, fail):
    x, k = args
    src = np.full(lanes, int(k[0]), dtype=np.int64)
    _check_range(src, mask, lanes, fail, "broadcast")
    _check_active(src, mask, fail, "broadcast")
    return x[int(k[0])]


def _ref_shuffle(args, mask, lanes, fail):
    x, idx = args
    src = idx.astype(np.int64)
    _check_range(src, mask, lanes, fail, "shuffle")
    src = np.where(mask, src, np.arange(lanes))
    _check_active(src, mask, fail, "shuffle")
    return x[src]


def _ref_rotate(args, mask, lanes, fail):
    x, off = args
    src = (np.arange(lanes) + off.astype(np.int64)) % lanes
    _check_active(src, mask, fail, "rotate")
    return x[src]


def _ref_prefixsum(args, mask, lanes, fail):
    (x,) = args
    vals = np.where(mask, x, 0).astype(x.dtype if x.dtype != np.bool_ else np.int64)
    return np.cumsum(vals) - vals


def _ref_atomic_add(args, mask, lanes, fail):
    arr, i, v = args  # arr: the shared array itself (uniform), i and v per lane
    idx = i.astype(np.int64)[mask]
    n = arr.shape[0]
    bad = np.nonzero(mask & ((i < -n) | (i >= n)))[0]
    if bad.size:
        ln = int(bad[0])
        fail("index", f"atomic_add index {int(i[ln])} is out of bounds for axis 0 "
             f"with size {n}", ln)
    np.add.at(arr, idx, v[mask].astype(arr.dtype))
    return None


INTRINSICS: dict[str, Intrinsic] = {}


def _add(*entries: Intrinsic) -> None:
    for e in entries:
        INTRINSICS[e.name] = e


_add(
    Intrinsic("lane", 0, "this lane's index, 0..N-1", lambda ts: WEAK_INT,
              lambda vs: True, _ref_lane, cross_lane=False),
    Intrinsic("nlanes", 0, "the number of lanes N", lambda ts: WEAK_INT,
              lambda vs: False, _ref_nlanes, cross_lane=False),
    Intrinsic("lanesum", 1, "sum of x over the active lanes, in the type of x (int32 "
              "stays int32; bools count as int64)", _summed,
              lambda vs: False, _reduce("lanesum", np.add, 0)),
    Intrinsic("laneprod", 1, "product of x over the active lanes, in the type of x", _summed,
              lambda vs: False, _reduce("laneprod", np.multiply, 1)),
    Intrinsic("lanemin", 1, "minimum of x over the active lanes", _same,
              lambda vs: False, _reduce("lanemin", np.minimum, None)),
    Intrinsic("lanemax", 1, "maximum of x over the active lanes", _same,
              lambda vs: False, _reduce("lanemax", np.maximum, None)),
    Intrinsic("laneany", 1, "is c true on any active lane", lambda ts: BOOL,
              lambda vs: False, _reduce("laneany", np.logical_or, False)),
    Intrinsic("laneall", 1, "is c true on every active lane", lambda ts: BOOL,
              lambda vs: False, _reduce("laneall", np.logical_and, True)),
    Intrinsic("broadcast", 2, "x on lane k (k uniform, lane k active)", _same,
              lambda vs: False, _ref_broadcast),
    Intrinsic("shuffle", 2, "lane i gets x from lane idx_i (an active lane)", _same,
              lambda vs: True, _ref_shuffle),
    Intrinsic("rotate", 2, "lane i gets x from lane (i + off) % N (an active lane)", _same,
              lambda vs: True, _ref_rotate),
    Intrinsic("prefixsum", 1, "exclusive sum of x over the active lanes below this one",
              _summed, lambda vs: True, _ref_prefixsum),
    Intrinsic("atomic_add", 3, "a[i] += v for every active lane, duplicates all counted",
              lambda ts: None, lambda vs: False, _ref_atomic_add, effect=True),
)


def lowers(backend: str, name: str):
    """Register a backend's lowering of intrinsic ``name``."""
    def register(fn):
        INTRINSICS[name].lowerings[backend] = fn
        return fn
    return register


def check_argument_types(name: str, types: list[Type]) -> str | None:
    """A message if the argument types do not fit the intrinsic, else None."""
    if name == "atomic_add":
        if not isinstance(types[0], ArrayType):
            return "atomic_add needs an array as its first argument"
        return None
    for t in types:
        if not isinstance(t, ScalarType):
            return f"{name} takes numbers, not {t}"
    if name in ("broadcast", "shuffle", "rotate") and types[1].kind not in "iu":
        return f"the lane index of {name} must be an integer, not {types[1]}"
    return None


# --- the functions users import ------------------------------------------------------

def _stub(name: str):
    entry = INTRINSICS[name]

    def stub(*args):
        raise RuntimeError(
            f"hydra.{name}() only has a meaning inside a kernel run by hydra.compile or "
            f"hydra.spmd; outside one there are no lanes"
        )
    stub.__name__ = stub.__qualname__ = name
    stub.__doc__ = entry.doc
    stub.__hydra_intrinsic__ = name
    return stub


lane = _stub("lane")
nlanes = _stub("nlanes")
lanesum = _stub("lanesum")
laneprod = _stub("laneprod")
lanemin = _stub("lanemin")
lanemax = _stub("lanemax")
laneany = _stub("laneany")
laneall = _stub("laneall")
broadcast = _stub("broadcast")
shuffle = _stub("shuffle")
rotate = _stub("rotate")
prefixsum = _stub("prefixsum")
atomic_add = _stub("atomic_add")


def markdown_table() -> str:
    """The intrinsics table of the docs, generated from this module."""
    rows = ["| call | result | meaning |", "|---|---|---|"]
    for e in INTRINSICS.values():
        params = {0: "", 1: "x", 2: "x, k", 3: "a, i, v"}[e.nargs]
        kind = "none" if e.effect else ("varying" if e.varying([True] * e.nargs) else "uniform")
        rows.append(f"| `{e.name}({params})` | {kind} | {e.doc} |")
    return "\n".join(rows)
