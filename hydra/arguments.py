"""A kernel call's arguments: their types (the specialization key) and their leaves.

An argument is a leaf (a number, an array, a GPU array) or a container of them
(``hydra.trees``: tuples, lists, dicts with str keys, namedtuples, dataclasses,
nested).  A container is typed as a ``TreeType``: its structure, static values
included, and its leaves' types; it reaches the backends as its leaves, in
``trees.flatten`` order, as the frontend's parameters are (``builder.param_tree``).
A varying container's leaves are all varying: each has one entry per lane along its
leading axis.  A varying tuple or list of numbers stays what it always was, the
per-lane values of one varying scalar (``np.asarray`` of it).
"""

from __future__ import annotations

import numpy as np

from . import trees
from .arrays import check_argument
from .types import ArrayType, ScalarType, TreeType, Type, scalar, typeof_python

_NUMBERS = (bool, int, float, complex, np.generic)


def numbers(a) -> bool:
    """A list or tuple (not a namedtuple) of numbers, nested: passed varying, one
    array (``[1.0, 2.0, 3.0]``: one number per lane, as before containers)."""
    return isinstance(a, (tuple, list)) and not trees.is_namedtuple(a) and all(
        isinstance(x, _NUMBERS) for x in trees.flatten(a)[0])


def is_tree(a, varying: bool) -> bool:
    """Is the argument ``a`` a container (typed as a ``TreeType``)?  ``None`` and a
    string are static trees of no leaves."""
    if a is None or isinstance(a, str):
        return True
    return trees.is_container(a) and not (varying and numbers(a))


def typed_argument(kernel, name: str, a, varying: bool) -> tuple[object, Type]:
    """(the value passed on, its type) of argument ``name``; a container's value is the
    tuple of its converted leaves."""
    if is_tree(a, varying):
        leaves, treedef = trees.flatten(a, name, numbers if varying else None)
        typed = []
        for k, x in enumerate(leaves):
            try:
                typed.append(typed_leaf(kernel, name, x, varying))
            except (TypeError, ValueError):  # again, naming the leaf by its path (the
                # paths are made only here: they cost more than the flattening)
                typed_leaf(kernel, trees.paths(treedef, name)[k], x, varying)
                raise
        return tuple(v for v, _ in typed), TreeType(treedef, tuple(t for _, t in typed))
    return typed_leaf(kernel, name, a, varying)


def typed_leaf(kernel, name: str, a, varying: bool) -> tuple[object, Type]:
    """(the value passed on, its type) of one leaf: a number (converted to its NumPy
    type), an array, a GPU array; a varying one with one entry per lane."""
    check_argument(name, a)
    if is_device_array(a):
        return a, device_array_type(kernel, name, a, varying)
    if varying:
        if not isinstance(a, np.ndarray):
            a = np.asarray(a)
        try:
            dt = scalar(a.dtype)
        except TypeError:
            raise TypeError(f"argument '{name}' has unsupported dtype {a.dtype}") from None
        if a.ndim == 0:
            raise ValueError(f"varying argument '{name}' must be an array with one entry "
                             f"per lane, got a scalar")
        return a, (dt if a.ndim == 1 else ArrayType(dt, a.ndim - 1, tuple(a.shape[1:])))
    t = typeof_python(a)
    if t is None:
        raise TypeError(f"argument '{name}' has unsupported type {type(a).__name__}"
                        + (f" (dtype {a.dtype})" if isinstance(a, np.ndarray) else ""))
    if isinstance(t, ScalarType):
        a = scalar_argument(name, a, t)
    elif isinstance(t, ArrayType):
        t = ArrayType(t.dtype, t.ndim, tuple(a.shape))
    return a, t


def device_array_type(kernel, name: str, a, varying: bool) -> Type:
    """The type of a GPU array argument (numba device arrays, CuPy, anything with
    ``__cuda_array_interface__``): passed to the cuda backend without a copy."""
    if kernel.backend_name != "cuda":
        raise TypeError(f"argument '{name}' is a GPU array; only backend='cuda' takes "
                        f"those (copy it to the host for the {kernel.backend_name} backend)")
    dtype, shape = device_dtype_shape(a)
    try:
        dt = scalar(np.dtype(dtype))
    except TypeError:
        raise TypeError(f"argument '{name}' has unsupported dtype {dtype}") from None
    ndim = len(shape)
    if varying:
        return dt if ndim == 1 else ArrayType(dt, ndim - 1)
    return ArrayType(dt, ndim)


def device_dtype_shape(a) -> tuple:
    """(dtype, shape) of a GPU array: its ``__cuda_array_interface__``'s, else its own
    attributes (a DLPack array; a PyTorch dtype by its name)."""
    try:
        interface = getattr(a, "__cuda_array_interface__", None)
    except Exception:  # noqa: BLE001 - a tensor that requires grad refuses it
        interface = None
    if isinstance(interface, dict):
        return interface["typestr"], tuple(interface["shape"])
    try:
        dtype = np.dtype(a.dtype)
    except TypeError:
        dtype = str(a.dtype).rpartition(".")[2]
    return dtype, tuple(a.shape)


def is_device_array(a) -> bool:
    """A GPU array (numba device array, CuPy, a PyTorch CUDA tensor, a DLPack CUDA
    array, ...), not a NumPy array."""
    return not isinstance(a, np.ndarray) and (has_cuda_interface(a)
                                              or hasattr(a, "copy_to_host")
                                              or is_dlpack_cuda(a))


def has_cuda_interface(a) -> bool:
    """Has ``a`` a usable ``__cuda_array_interface__``?  (A PyTorch tensor that
    requires grad refuses it with a RuntimeError.)"""
    try:
        return hasattr(a, "__cuda_array_interface__")
    except Exception:  # noqa: BLE001
        return False


#: DLPack device types of CUDA memory (kDLCUDA, kDLCUDAHost, kDLCUDAManaged)
_DLPACK_CUDA = (2, 3, 13)


def is_dlpack_cuda(a) -> bool:
    """A DLPack array in CUDA memory (a NumPy array or a CPU tensor is not one)."""
    device = getattr(a, "__dlpack_device__", None)
    if device is None or not hasattr(a, "__dlpack__") or isinstance(a, np.ndarray):
        return False
    try:
        return int(device()[0]) in _DLPACK_CUDA
    except Exception:  # noqa: BLE001 - a producer that cannot say is not a device array
        return False


def is_readonly_device_array(a) -> bool:
    """A device array whose ``__cuda_array_interface__`` marks its data read-only."""
    try:
        interface = getattr(a, "__cuda_array_interface__", None)
    except Exception:  # noqa: BLE001 - e.g. a tensor that requires grad: DLPack then
        return False
    data = interface.get("data") if isinstance(interface, dict) else None
    return bool(data and data[1])


def scalar_argument(name: str, a, t: ScalarType):
    """A number argument as its NumPy scalar of type ``t`` (an OverflowError if it does
    not fit, as NumPy 2 raises)."""
    try:
        return t.dtype.type(a)
    except OverflowError:
        raise OverflowError(f"argument '{name}' = {a} does not fit in {t.name}, the type "
                            f"of a Python int argument (NumPy 2 raises OverflowError "
                            f"there too)") from None


def lane_leaves(name: str, a) -> list[tuple[str, object]]:
    """(name, value) of a varying argument's leaves, as the caller passed it."""
    if is_tree(a, True):
        leaves, treedef = trees.flatten(a, name, numbers)
        return list(zip(trees.paths(treedef, name), leaves))
    return [(name, a)]


def unshaped(t: Type) -> Type:
    """``t`` without array shapes (kernels that only index arrays compile once)."""
    if isinstance(t, ArrayType):
        return t.unshaped()
    if isinstance(t, TreeType):
        return TreeType(t.treedef, tuple(unshaped(x) for x in t.leaves))
    return t


def flatten_arguments(values: list, types: list[Type]) -> tuple[list, list[Type]]:
    """Container arguments as their leaves, in the order of the frontend's parameters."""
    flat_values, flat_types = [], []
    for v, t in zip(values, types):
        if isinstance(t, TreeType):
            flat_values += list(v)
            flat_types += list(t.leaves)
        else:
            flat_values.append(v)
            flat_types.append(t)
    return flat_values, flat_types


def int_arguments(names: list[str], values: list, types: list[Type]) -> dict:
    """The call's uniform int arguments by name, and the int leaves of its containers by
    path (``cfg['hidden']``): the values a per-lane array's shape or an unrolled loop's
    bounds may depend on (``Kernel.specialize``)."""
    out = {}
    for name, v, t in zip(names, values, types):
        if isinstance(t, ScalarType) and t.kind in "iu":
            out[name] = v
        elif isinstance(t, TreeType) and any(isinstance(lt, ScalarType) and lt.kind in "iu"
                                             for lt in t.leaves):
            out.update((path, x) for path, x, lt in zip(trees.paths(t.treedef, name), v,
                                                         t.leaves)
                       if isinstance(lt, ScalarType) and lt.kind in "iu")
    return out


def leaf_names(names: list[str], types: list[Type]) -> list[str]:
    """The names of the arguments' leaves as the user writes them (``centre[1]``,
    ``p['W1']``, ``m.b``), in the order of ``flatten_arguments``."""
    out = []
    for name, t in zip(names, types):
        if isinstance(t, TreeType):
            out += trees.paths(t.treedef, name)
        else:
            out.append(name)
    return out


def leaves_of(names: list[str], args) -> list:
    """Every leaf of the arguments (a container's, and the others themselves)."""
    out = []
    for name, a in zip(names, args):
        if trees.is_container(a):
            out += trees.flatten(a, name)[0]
        else:
            out.append(a)
    return out
