"""NumPy arrays that a kernel cannot take as they are: masked arrays and byte-swapped ones.

A ``np.ma.MaskedArray`` is an ``ndarray`` whose mask a kernel would silently ignore: it
is refused (a ``TypeError`` naming the parameter at the call, a ``CompileError`` for a
captured module array) with what to pass instead.  An array in non-native byte order
(``">f8"`` on a little-endian host) is passed to the backends as a native copy and
copied back afterwards, so writes land in the caller's array as with any other array;
the compiled backends' machine code only reads native numbers.  A captured module
array is not copied (the kernel holds it, not a call): it must be native.
"""

from __future__ import annotations

import numpy as np

_MASKED_HINT = ("pass {name}.filled(value) to replace the masked entries, or {name}.data "
                "to use the values under the mask")


def array_problem(a: np.ndarray) -> tuple[str, str] | None:
    """(what is wrong, a hint with ``{name}``) for a captured array hydra cannot use."""
    if isinstance(a, np.ma.MaskedArray):
        return "is a numpy.ma.MaskedArray (kernels do not see masks)", _MASKED_HINT
    if not a.dtype.isnative:
        return (f"has non-native byte order ({a.dtype.str})",
                "capture a native copy: {name} = {name}.astype({name}.dtype.newbyteorder('='))")
    return None


def check_argument(name: str, a) -> None:
    """``TypeError`` for an argument array a kernel cannot take (a masked array)."""
    if isinstance(a, np.ma.MaskedArray):
        raise TypeError(f"argument '{name}' is a numpy.ma.MaskedArray, which kernels do not "
                        f"support (they would ignore its mask): "
                        + _MASKED_HINT.format(name=name))


def native_arguments(values: list, modes) -> tuple[list, list[tuple[np.ndarray, np.ndarray]]]:
    """The values with byte-swapped arrays replaced by native copies, and the (caller's
    array, copy) pairs to copy back with ``copy_back`` once the kernel has run: those
    the kernel may write (``modes``: one per value, ``hydra.effects``), so that a launch
    writes no array it does not declare (another launch may be writing it meanwhile)."""
    pairs = []
    out = list(values)
    for i, (a, mode) in enumerate(zip(values, modes)):
        if isinstance(a, np.ndarray) and not a.dtype.isnative:
            native = a.astype(a.dtype.newbyteorder("="))
            if "w" in mode:
                pairs.append((a, native))
            out[i] = native
    return out, pairs


def copy_back(pairs: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """Write the native copies back into the caller's arrays (those that can be written:
    a read-only array cannot have been written by the kernel)."""
    for original, native in pairs:
        if original.flags.writeable:
            original[...] = native
