"""The array namespace a launch's array steps run through, and a strict stand-in for
CuPy that CI can run.

Takes: the backend of a launch.  Guarantees:

- ``choose(backend)``: the namespace (``xp``) that code written once against the
  NumPy API runs on: CuPy for the cuda backend on a real GPU (where CuPy is
  installed), NumPy otherwise (the numpy and cpu backends, and cuda on the CUDA
  simulator, whose device memory is host memory).  ``HYDRA_ARRAY_NAMESPACE=strict``
  picks ``Strict()`` instead, for any backend: the namespace-generic code then runs as
  it would on CuPy, with every hidden transfer an error.
- ``Strict``: NumPy underneath, but its arrays (``StrictArray``) behave as CuPy's
  device arrays do where that matters, only stricter: ``np.asarray(a)`` /
  ``__array__``, ``int(a)``, ``float(a)``, ``bool(a)``, ``a.__index__`` and ``if a:``
  raise ``TypeError`` (CuPy refuses ``__array__`` and silently synchronizes on the
  others: on a GPU each is a host round trip); mixing a NumPy array into an operation
  raises as CuPy does; reductions return 0-d arrays, not scalars.  The explicit
  transfers (``xp.asnumpy(a)``, ``a.get()``, ``a.item()``, ``a.tolist()`` to the host;
  ``xp.asarray(host)``, storing a host array into one, to the device) are counted in
  ``xp.transfers``; ``with xp.budget(to_host=k):`` raises ``UnexpectedTransfer`` at
  the ``k + 1``-th transfer to the host inside it.
- ``to_host(xp, a)`` / ``to_device(xp, a)``: the explicit transfers in any namespace
  (nothing to do on NumPy).
"""

from __future__ import annotations

import contextlib
import os

import numpy as np


class UnexpectedTransfer(AssertionError):
    """A transfer to the host beyond what a ``budget`` allows."""


def choose(backend: str):
    """The namespace of a launch on ``backend``."""
    if os.environ.get("HYDRA_ARRAY_NAMESPACE") == "strict":
        return strict()
    if backend == "cuda" and not _simulator():
        try:
            import cupy
            return cupy
        except ImportError:
            pass
    return np


_STRICT: list = []


def strict() -> "Strict":
    """The process's one strict namespace (its ``transfers`` add up across launches)."""
    if not _STRICT:
        _STRICT.append(Strict())
    return _STRICT[0]


def _simulator() -> bool:
    try:
        from numba import config
    except ImportError:  # pragma: no cover - numba is a dependency
        return True
    return bool(config.ENABLE_CUDASIM)


def is_host_namespace(xp) -> bool:
    return xp is np


def to_host(xp, a) -> np.ndarray:
    """``a`` as a NumPy array: an explicit (counted) transfer off a device."""
    if xp is np:
        return np.asarray(a)
    return xp.asnumpy(a)


def to_device(xp, a):
    """A host array (or number) as an array of ``xp``: an explicit transfer."""
    if xp is np:
        return np.asarray(a)
    return xp.asarray(a)


def from_device(xp, d):
    """A numba device array as an array of ``xp``, where it is: CuPy takes it through
    ``__cuda_array_interface__``; the shim wraps the simulator's device memory (host
    memory) as ``Strict.wrap`` does."""
    if isinstance(xp, Strict):
        return xp.wrap(d.copy_to_host())
    return xp.asarray(d)


def _data(x):
    return x.data if isinstance(x, StrictArray) else x


def _unwrap(x, strict: "Strict"):
    """An operand of a NumPy call: a strict array's data; a NumPy array is refused as
    CuPy refuses one (a 0-d one, like a NumPy scalar, is allowed)."""
    if isinstance(x, StrictArray):
        return x.data
    if isinstance(x, np.ndarray) and x.ndim:
        raise TypeError(f"Unsupported type {type(x)}: a NumPy array mixed into a device "
                        f"operation (CuPy refuses it; use xp.asarray first)")
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v, strict) for v in x)
    if isinstance(x, dict):
        return {k: _unwrap(v, strict) for k, v in x.items()}
    return x


def _wrap(x, strict: "Strict"):
    if isinstance(x, np.ndarray):
        return StrictArray(x, strict)
    if isinstance(x, np.generic):  # CuPy's reductions give 0-d device arrays
        return StrictArray(np.asarray(x), strict)
    if isinstance(x, tuple):
        return tuple(_wrap(v, strict) for v in x)
    if isinstance(x, list):
        return [_wrap(v, strict) for v in x]
    return x


_REFUSED = ("Implicit conversion of a device array to the host is not allowed here: it "
            "is a host round trip on a GPU (CuPy refuses __array__ and synchronizes on "
            "int/float/bool); use xp.asnumpy(a) where the host needs the value")


class StrictArray:
    """A device array of the ``Strict`` namespace (NumPy data underneath)."""

    __slots__ = ("data", "xp")
    __array_priority__ = 100

    def __init__(self, data: np.ndarray, xp: "Strict") -> None:
        self.data = data
        self.xp = xp

    # --- what CuPy's arrays refuse, or do only with a hidden synchronization ----------
    def __array__(self, *args, **kwargs):
        raise TypeError(_REFUSED)

    def __bool__(self):
        raise TypeError(_REFUSED)

    def __int__(self):
        raise TypeError(_REFUSED)

    def __float__(self):
        raise TypeError(_REFUSED)

    def __complex__(self):
        raise TypeError(_REFUSED)

    def __index__(self):
        raise TypeError(_REFUSED)

    # --- the explicit transfers ------------------------------------------------------
    def get(self) -> np.ndarray:
        return self.xp.asnumpy(self)

    def item(self):
        return self.xp.asnumpy(self).item()

    def tolist(self):
        return self.xp.asnumpy(self).tolist()

    # --- metadata lives on the host (as CuPy's does) ---------------------------------
    shape = property(lambda self: self.data.shape)
    dtype = property(lambda self: self.data.dtype)
    ndim = property(lambda self: self.data.ndim)
    size = property(lambda self: self.data.size)
    strides = property(lambda self: self.data.strides)
    T = property(lambda self: StrictArray(self.data.T, self.xp))

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        return f"StrictArray(shape={self.shape}, dtype={self.dtype})"

    def __getattr__(self, name):
        if name.startswith("__"):  # __array_interface__, __array_struct__, __dlpack__
            raise AttributeError(name)
        attr = getattr(self.data, name)
        if not callable(attr):
            return _wrap(attr, self.xp)

        def method(*args, **kwargs):
            return _wrap(attr(*_unwrap(args, self.xp), **_unwrap(kwargs, self.xp)), self.xp)
        return method

    def __getitem__(self, index):
        index = _unwrap(index, self.xp)
        if any(isinstance(i, np.ndarray) and i.dtype == np.bool_
               for i in (index if isinstance(index, tuple) else (index,))):
            self.xp.count("to_host")  # a boolean mask: CuPy waits to learn the size
        return _wrap(self.data[index], self.xp)

    def __setitem__(self, index, value) -> None:
        if isinstance(value, np.ndarray) and value.ndim:
            self.xp.count("to_device")  # CuPy copies a host array in
        else:
            value = _unwrap(value, self.xp)
        self.data[_unwrap(index, self.xp)] = value

    def __iter__(self):
        return (StrictArray(np.asarray(row), self.xp) for row in self.data)

    # --- NumPy's protocols: ufuncs and functions run on the data --------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = _unwrap(inputs, self.xp)
        if "out" in kwargs:
            kwargs["out"] = tuple(_data(o) for o in kwargs["out"])
        return _wrap(getattr(ufunc, method)(*inputs, **kwargs), self.xp)

    def __array_function__(self, func, types, args, kwargs):
        return _wrap(func(*_unwrap(args, self.xp), **_unwrap(kwargs, self.xp)), self.xp)


def _operator(name: str):
    ufunc_call = getattr(np.ndarray, name)

    def op(self, *others):
        return _wrap(ufunc_call(self.data, *_unwrap(others, self.xp)), self.xp)
    op.__name__ = name
    return op


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and",
              "or", "xor", "lshift", "rshift"):
    for _prefix in ("__", "__r"):
        setattr(StrictArray, f"{_prefix}{_name}__", _operator(f"{_prefix}{_name}__"))
    setattr(StrictArray, f"__i{_name}__", _operator(f"__i{_name}__"))
for _name in ("lt", "le", "gt", "ge", "eq", "ne", "neg", "pos", "abs", "invert"):
    setattr(StrictArray, f"__{_name}__", _operator(f"__{_name}__"))


class Strict:
    """A namespace like CuPy's over NumPy, which refuses implicit transfers to the host
    and counts the explicit ones."""

    __name__ = "hydra.arraynamespace.Strict"

    def __init__(self) -> None:
        self.transfers = {"to_host": 0, "to_device": 0}
        self._budget: list[int] = []

    def count(self, kind: str) -> None:
        self.transfers[kind] += 1
        if kind == "to_host" and self._budget:
            self._budget[-1] -= 1
            if self._budget[-1] < 0:
                raise UnexpectedTransfer("a transfer to the host beyond the budget: a "
                                         "host round trip the code was not meant to make")

    @contextlib.contextmanager
    def budget(self, to_host: int = 0):
        self._budget.append(to_host)
        try:
            yield self
        finally:
            self._budget.pop()

    def asnumpy(self, a) -> np.ndarray:
        if not isinstance(a, StrictArray):
            return np.asarray(a)
        self.count("to_host")
        return np.array(a.data, copy=True)

    def asarray(self, a, dtype=None):
        if isinstance(a, StrictArray):
            return a if dtype is None else StrictArray(a.data.astype(dtype), self)
        if isinstance(a, np.ndarray) or isinstance(a, (list, tuple)):
            self.count("to_device")
        return StrictArray(np.array(a, dtype=dtype), self)

    array = asarray

    def wrap(self, data: np.ndarray) -> StrictArray:
        """Device memory (the simulator's, a NumPy array) as a strict array, no copy."""
        return StrictArray(data, self)

    def __getattr__(self, name):
        attr = getattr(np, name)
        if isinstance(attr, type) or not callable(attr):
            return attr  # dtypes, constants (np.float64, np.pi, np.newaxis)
        if isinstance(attr, np.ufunc):
            return _StrictFunction(attr, self, False)
        return _StrictFunction(attr, self, name in SYNCING)


#: functions whose result size depends on the data: CuPy waits for the device to know
#: it (a host round trip the code does not spell), so the shim counts one
SYNCING = frozenset({"nonzero", "flatnonzero", "argwhere", "unique", "compress", "extract",
                     })


class _StrictFunction:
    """A NumPy function or ufunc (with its ``reduce``, ``accumulate``, ``at``, ...) of
    the ``Strict`` namespace."""

    def __init__(self, fn, strict: Strict, syncs: bool) -> None:
        self.fn, self.strict, self.syncs = fn, strict, syncs

    def __call__(self, *args, **kwargs):
        if self.syncs:
            self.strict.count("to_host")
        return _wrap(self.fn(*_unwrap(args, self.strict), **_unwrap(kwargs, self.strict)),
                     self.strict)

    def __getattr__(self, name):
        return _StrictFunction(getattr(self.fn, name), self.strict, False)


# --- namespace-generic rules: written once, run on NumPy, CuPy and the shim alike ------
# (none converts a device value implicitly; where the host must learn something, the
# transfer is explicit and counted)

def lane_reduce(xp, ufunc: str, x, mask, identity):
    """``ufunc`` reduced over the active lanes of ``x`` (``mask`` None: all), left on
    the device as a 0-d array: inactive lanes become the identity (a boolean-mask
    index would make CuPy wait to learn the size).  A float sum's order is the
    namespace's own (NumPy's pairwise order over all N entries)."""
    values = x if mask is None else xp.where(mask, x, xp.asarray(identity, dtype=x.dtype))
    # the array API's reductions: every namespace has them (not every one ufunc.reduce)
    reducer = getattr(xp, _REDUCERS[ufunc])
    if ufunc in ("add", "multiply"):
        return reducer(values, dtype=x.dtype)  # NumPy would widen small ints
    return reducer(values)


#: a reduction's ufunc -> the array API function that computes it
_REDUCERS = {"add": "sum", "multiply": "prod", "minimum": "min", "maximum": "max",
             "logical_or": "any", "logical_and": "all"}


def active_count(xp, mask, lanes: int) -> int:
    """How many lanes are active: one explicit transfer of one number."""
    if mask is None:
        return lanes
    return int(to_host(xp, xp.count_nonzero(mask)))


def exclusive_sum(xp, x, mask, dtype):
    """Each lane's sum of the active lanes below it (NumPy's ``cumsum(v) - v``)."""
    values = xp.asarray(x, dtype=dtype) if mask is None else \
        xp.where(mask, xp.asarray(x, dtype=dtype), xp.asarray(0, dtype=dtype))
    return xp.cumsum(values, dtype=dtype) - values  # (NumPy widens small ints)
