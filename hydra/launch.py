"""What a launch of a kernel is, shared by ``hydra.api`` (a plain call),
``hydra.dataflow`` (submitted launches) and ``hydra.dask`` (lanes as Dask tasks), so
none of them reaches into another's private names.

- ``PreparedCall``: a call made ready to run (``Kernel.prepare``): the specialized IR,
  the backend's runner, the flattened argument values and their types, and the lanes;
  ``Kernel.run_prepared`` runs it.
- ``result``: the caller's value of a run from the runner's leaves: varying numbers as
  arrays of the lanes, uniform numbers as Python or NumPy scalars, uniform arrays once,
  put back into the kernel's result structure (``hydra.trees``).
- ``CHECK_IR``: verify the IR after every pass (the tests and ``HYDRA_CHECK_IR=1``).
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from . import trees
from .arguments import is_device_array
from .executor.scalars import python_scalar
from .ir.core import Function
from .types import ArrayType, Type

#: verify the IR after every pass (the tests and HYDRA_CHECK_IR=1 turn it on)
CHECK_IR = os.environ.get("HYDRA_CHECK_IR", "") not in ("", "0")


class PreparedCall(NamedTuple):
    """A call ready to run: nothing about it is checked again when it runs."""

    fn: Function          # the specialization's predicated IR
    runner: object        # the backend's ``runner(values, lanes) -> leaves``
    values: list          # the argument leaves, checked and converted
    types: list[Type]     # their types
    lanes: int


def result(fn: Function, leaves: list, lanes: int):
    """The value a call returns, from its runner's ``leaves``."""
    values = []
    for v, x in zip(fn.body.terminator.operands, leaves):
        if v.varying and is_device_array(x):
            values.append(x)  # a device result (the cuda backend): left where it is
        elif v.varying:
            arr = np.asarray(x)
            values.append(np.broadcast_to(arr, (lanes,)).copy() if arr.ndim == 0 else arr)
        elif isinstance(v.type, ArrayType):
            values.append(x)  # a uniform array (SPEC section 8): one array of its shape
        else:
            values.append(python_scalar(np.asarray(x), v.type))
    # (trees.unflatten is a module function, not a closure that calls itself: that
    # closure was a reference cycle holding every call's results until the cyclic GC
    # ran, so each call's output buffers were fresh pages: 0.5 ms, a mandelbrot call)
    return trees.unflatten(fn.notes["result_tree"], values)
