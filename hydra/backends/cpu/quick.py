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
