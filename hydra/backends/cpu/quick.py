"""A precomputed host step: one host op whose work the cpu backend prepared when it
planned the kernel (``hoststeps``, ``lanesteps``, ``products``), run as
``step.run(env, lanes)``; it puts into ``env`` what the op's host rule would."""

from __future__ import annotations

import numpy as np

from ...ir.core import Op


class Quick:
    """One host op with its work precomputed (see the module docstring)."""

    def __init__(self, op: Op, fn) -> None:
        self.op = op
        self.fn = fn
        self.rid = op.results[0].id

    def run(self, env: dict, lanes: int) -> None:
        self.fn(env, lanes)


def converter(dtype):
    """A converter of values to ``dtype`` that copies only where the dtype differs."""
    def typed(value):
        value = np.asarray(value)
        return value if value.dtype == dtype else value.astype(dtype)
    return typed
