"""The cpu backend's host steps: a ``Step`` has its ops and ``run(env, lanes)``, which
puts into ``env`` what the host rules of its ops would.  Two kinds: ``fuse.Fused`` (a
chain of elementwise ops as one native loop) and ``Quick`` (one host op whose work the
backend prepared when it planned the kernel: ``hoststeps``, ``lanesteps``,
``products``)."""

from __future__ import annotations

import numpy as np

from ... import events  # hydra.profile (issue 30)
from ...ir.core import Op
from ..counting import timed_step  # hydra.profile (issue 30)


class Step:
    """A planned host step (see the module docstring)."""

    ops: list[Op]

    def run(self, env: dict, lanes: int) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        """The line ``dump-ir --stage steps`` prints for it."""
        raise NotImplementedError


class Quick(Step):
    """One host op with its work precomputed (see the module docstring)."""

    def __init__(self, op: Op, fn) -> None:
        self.op = op
        self.fn = fn
        self.rid = op.results[0].id

    def run(self, env: dict, lanes: int) -> None:
        if events.RECORDING:  # hydra.profile (issue 30): timed, products recorded
            return timed_step(self.op, self.fn, env, lanes)
        self.fn(env, lanes)

    @property
    def ops(self) -> list[Op]:
        return [self.op]

    def describe(self) -> str:
        """The line ``dump-ir --stage steps`` prints: the op and the rule that made it."""
        made_by = f"{self.fn.__module__.rsplit('.', 1)[-1]}." \
                  f"{self.fn.__qualname__.split('.<locals>')[0]}"
        return f"precomputed host step: {op_label(self.op)} ({made_by})"


def op_label(op: Op) -> str:
    """``array matmul (line 12)``: an op as the steps dump names it."""
    what = op.attrs.get("fn") or op.attrs.get("name") or (
        repr(op.attrs["value"]) if op.opcode == "const" else "")
    line = f" (line {op.loc.line})" if op.loc and op.loc.line > 0 else ""
    return f"{op.opcode}{' ' + what if what else ''}{line}"


def converter(dtype):
    """A converter of values to ``dtype`` that copies only where the dtype differs."""
    def typed(value):
        value = np.asarray(value)
        return value if value.dtype == dtype else value.astype(dtype)
    return typed
