"""The one table of lane intrinsics (SPEC section 3): a table of rules.

Each ``Intrinsic`` holds everything about one intrinsic, and the compiler reads these
facts instead of comparing names:

- ``params``: the argument names; each name's kind (``PARAM_KINDS``) is the argument
  rule the frontend checks and coerces by (a lane index becomes int64, ``v`` the
  element type of ``a``);
- ``result``: the type rule (argument types -> result type; None: no result);
- ``varying``: the uniformity rule (argument marks -> is the result varying);
- ``uniform``: (argument index, message, hint) of an argument that must be uniform;
- ``reference``: the semantics, NumPy over all N lanes with the active mask;
- ``cross_lane``: reads other lanes (a sync point: it takes the active mask and runs
  with all lanes at once; compiled backends run it on the host, by ``reference``);
- ``effect``: writes memory (the array argument ``a``), so it is never removed;
- ``traps``: may raise for some arguments (so it always carries a mask);
- ``lowerings``: backend -> native lowering, one signature per backend
  (``LOWERING_SIGNATURES``), registered with ``@lowers(backend, name)``.

A test runs every entry on every backend; the docs' intrinsics table is generated
from this one (``docs/regen.py``).

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

#: argument name -> its kind: what the frontend accepts there
PARAM_KINDS = {"x": "number", "k": "lane index", "a": "1-d array", "i": "index",
               "v": "element of a"}

#: the signature of a native lowering, per backend (numpy runs ``reference``)
LOWERING_SIGNATURES = {
    "cpu": "(gen: KernelGen, op) -> [value rep]  (hydra/backends/cpu/codegen.py)",
    "cuda": "(op) -> per-lane source expression  (hydra/backends/cuda/emit.py)",
}


@dataclass(frozen=True, slots=True)
class Monoid:
    """A reduction's combining ufunc and its identity (None: reducing no elements is an
    error, as the maximum of nothing is)."""

    ufunc: np.ufunc
    identity: object


@dataclass(slots=True)
class Intrinsic:
    name: str
    params: tuple[str, ...]
    doc: str
    result: Callable[[list[Type]], Type | None]  # type rule; None: no result
    varying: Callable[[list[bool]], bool]  # uniformity rule over argument marks
    reference: Callable
    cross_lane: bool = True
    effect: bool = False
    traps: bool = False
    uniform: tuple | None = None  # (argument index, message, hint)
    monoid: Monoid | None = None  # a reduction over the lanes: how it combines
    lowerings: dict[str, Callable] = field(default_factory=dict)

    @property
    def nargs(self) -> int:
        return len(self.params)


def _same(ts: list[Type]) -> Type:
    return ts[0]


def _summed(ts: list[Type]) -> Type:
    t = ts[0]
    return INT64 if isinstance(t, ScalarType) and t.kind == "b" else t


def _check_sources(src: np.ndarray, mask: np.ndarray, lanes: int, fail, what: str):
    """``src``, the lane each lane reads, with every active lane's in range and active
    (else ``fail``); the inactive lanes read themselves."""
    bad = np.nonzero(mask & ((src < 0) | (src >= lanes)))[0]
    if bad.size:
        i = int(bad[0])
        fail("index", f"{what}: lane index {int(src[i])} is out of range for {lanes} lanes", i)
    src = np.where(mask, src, np.arange(lanes))
    bad = np.nonzero(mask & ~mask[src])[0]
    if bad.size:
        i = int(bad[0])
        fail("inactive", f"{what} reads lane {int(src[i])}, which is not active", i)
    return src


def _reduce(name: str, monoid: Monoid):
    """The reference of a lane reduction that combines by ``monoid``."""
    ufunc, empty = monoid.ufunc, monoid.identity

    def ref(args, mask, lanes, fail):
        (x,) = args
        # all lanes active (the common case): no copy (0.5 ms of mc-pi's 2.4); the same
        # contiguous values, so the same pairwise sum
        full = (isinstance(mask, np.ndarray) and isinstance(x, np.ndarray)
                and x.flags.c_contiguous and mask.shape == x.shape and mask.all())
        active = x if full else x[mask]
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
    _check_sources(np.full(lanes, int(k[0]), dtype=np.int64), mask, lanes, fail, "broadcast")
    return x[int(k[0])]


def _ref_shuffle(args, mask, lanes, fail):
    x, idx = args
    return x[_check_sources(idx.astype(np.int64), mask, lanes, fail, "shuffle")]


def _ref_rotate(args, mask, lanes, fail):
    x, off = args
    src = (np.arange(lanes) + off.astype(np.int64)) % lanes  # (in range)
    _check_sources(src, mask, lanes, fail, "rotate")
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


def _lane_reduction(name: str, doc: str, result, monoid: Monoid) -> Intrinsic:
    return Intrinsic(name, ("x",), doc, result, lambda vs: False, _reduce(name, monoid),
                     monoid=monoid)


INTRINSICS: dict[str, Intrinsic] = {e.name: e for e in (
    Intrinsic("lane", (), "this lane's index, 0..N-1", lambda ts: WEAK_INT,
              lambda vs: True, _ref_lane, cross_lane=False),
    Intrinsic("nlanes", (), "the number of lanes N", lambda ts: WEAK_INT,
              lambda vs: False, _ref_nlanes, cross_lane=False),
    _lane_reduction("lanesum", "sum of x over the active lanes, in the type of x (int32 "
                    "stays int32; bools count as int64)", _summed, Monoid(np.add, 0)),
    _lane_reduction("laneprod", "product of x over the active lanes, in the type of x",
                    _summed, Monoid(np.multiply, 1)),
    _lane_reduction("lanemin", "minimum of x over the active lanes", _same,
                    Monoid(np.minimum, None)),
    _lane_reduction("lanemax", "maximum of x over the active lanes", _same,
                    Monoid(np.maximum, None)),
    _lane_reduction("laneany", "is x true on any active lane", lambda ts: BOOL,
                    Monoid(np.logical_or, False)),
    _lane_reduction("laneall", "is x true on every active lane", lambda ts: BOOL,
                    Monoid(np.logical_and, True)),
    Intrinsic("broadcast", ("x", "k"), "x on lane k (k uniform, lane k active)", _same,
              lambda vs: False, _ref_broadcast,
              uniform=(1, "broadcast(x, k) needs the same k on every lane",
                       "use shuffle(x, idx) to read a different lane per lane")),
    Intrinsic("shuffle", ("x", "k"), "lane i gets x from lane k_i (an active lane)", _same,
              lambda vs: True, _ref_shuffle),
    Intrinsic("rotate", ("x", "k"), "lane i gets x from lane (i + k) % N (an active lane)",
              _same, lambda vs: True, _ref_rotate),
    Intrinsic("prefixsum", ("x",), "exclusive sum of x over the active lanes below this one",
              _summed, lambda vs: True, _ref_prefixsum),
    Intrinsic("atomic_add", ("a", "i", "v"), "a[i] += v for every active lane, duplicates "
              "all counted", lambda ts: None, lambda vs: False, _ref_atomic_add,
              effect=True, traps=True,
              uniform=(0, "atomic_add needs a shared (uniform) array: this one is per-lane, "
                          "so no other lane can see its updates",
                       "pass the array as a uniform argument, or write a[i] += v to a "
                       "per-lane array")),
)}


def lowers(backend: str, name: str):
    """Register a backend's lowering of intrinsic ``name``."""
    def register(fn):
        INTRINSICS[name].lowerings[backend] = fn
        return fn
    return register


def check_argument_types(name: str, types: list[Type]) -> str | None:
    """A message if the argument types do not fit the intrinsic's params, else None."""
    for p, t in zip(INTRINSICS[name].params, types):
        kind = PARAM_KINDS[p]
        if kind == "1-d array":
            if not isinstance(t, ArrayType):
                return f"{name} needs an array as its first argument"
        elif kind in ("number", "lane index") and not isinstance(t, ScalarType):
            return f"{name} takes numbers, not {t}"
        elif kind == "lane index" and t.kind not in "iu":
            return f"the lane index of {name} must be an integer, not {t}"
    return None


# --- the functions users import ------------------------------------------------------

def _stub(name: str):
    def stub(*args):
        raise RuntimeError(
            f"hydra.{name}() only has a meaning inside a kernel run by hydra.compile or "
            f"hydra.spmd; outside one there are no lanes"
        )
    stub.__name__ = stub.__qualname__ = name
    stub.__doc__ = INTRINSICS[name].doc
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
