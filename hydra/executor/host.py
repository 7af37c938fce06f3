"""The host: runs one predicated function's regions over ``lanes`` lanes by its planned
steps, the host rules by default (``rules``).

Takes: a ``Function``, the lane count, a ``policy.Policy`` (when per-lane array code
compacts; the numpy reference never does) and a ``planner.Planner`` (what the backend
supplies: the reference's plans every op as its host rule; the cpu backend's fuses
elementwise chains and prepares ops, with its native loop compiler).
Guarantees: ``Host(fn, lanes, policy, planner)(args)`` gives the function's results over
all lanes, as the host rules define them.  A varying ``while`` whose heavy per-lane
array work the policy lets compact runs on its active lanes' rows (``compact.run``; a uniform
loop whose lanes only join, a gradient's reverse sweep: ``growing.run``): it
goes on with a host of those rows (``compacted``), whose ``lanes`` is the row count,
whose ``fail`` names the original lane, whose ``run_op`` gives ``lane()`` and
``nlanes()`` of the original lanes and gathers a live-in's rows at uniform indices, and
whose regions run as the planner plans them for rows.  Every region runs through the
one runner, ``steps.run_steps``.
"""

from __future__ import annotations

import numpy as np

from ..errors import RUNTIME_ERRORS, Loc
from ..ir.core import Function, Op, Region
from . import compact, growing
from .planner import Planner
from .policy import Policy
from .policy import current as current_policy
from .rules import masked_loop, run_op
from .steps import run_steps


class Host:
    """Runs one predicated function for ``lanes`` lanes (see the module docstring);
    the cuda backend subclasses it (its ``region`` runs device phases between the
    host ops)."""

    def __init__(self, fn: Function, lanes: int, policy: Policy | None = None,
                 planner: Planner | None = None) -> None:
        self.fn = fn
        self.lanes = lanes
        #: when per-lane array code compacts: the reference never does; a host made
        #: inside a kernel's run takes that run's
        self.policy = current_policy() if policy is None else policy
        self.planner = Planner(fn) if planner is None else planner
        #: the host of all N lanes; on a host of compacted rows: the original lane of
        #: each row (``ids``), the host it was compacted from (``outer``) and the
        #: positions of its rows there (``rows``)
        self.root = self
        self.ids = self.outer = self.rows = None
        #: the id of the loop mask that is true on every row of the body now running
        #: (``compact.run`` sets it), None where that is not known
        self.full = None
        #: a select whose mask is true on every row may pass its first value on (only
        #: in compacted loops without stores, where no write could tell the two apart)
        self.pass_selects = False
        #: the compaction plans of the loops (the planner's: made once per kernel)
        self.loops = self.planner.loops

    def __call__(self, args: list) -> list:
        env: dict[int, object] = {p.id: a for p, a in zip(self.fn.params, args)}
        with np.errstate(all="ignore"):
            return self.region(self.fn.body, env)

    def compacted(self, rows: np.ndarray) -> "Host":
        """The host of the rows ``rows`` of this host's lanes (``compact.run``)."""
        h = Host(self.fn, len(rows), self.policy, self.planner)
        h.root, h.outer, h.rows = self.root, self, rows
        h.ids = rows if self.ids is None else self.ids[rows]
        return h

    def fail(self, kind: str, message: str, lane, loc: Loc):
        if self.ids is not None:
            return self.root.fail(kind, message, None if lane is None else
                                  int(self.ids[lane]), loc)
        raise RUNTIME_ERRORS[kind](message, lane, loc)

    def loop(self, op: Op, env: dict) -> list:
        """Run a ``while`` op (its host rule): on its active lanes' rows where the
        policy and ``compact.plan`` allow it, else masked over every lane."""
        p = compact.plan(self, op)
        if p is not None:
            return compact.run(self, op, env, p)
        g = growing.plan(self, op)  # (a gradient's reverse loop: its lanes join)
        if g is not None:
            return growing.run(self, op, env, g)
        return masked_loop(self, op, env)

    def carried(self, env: dict, v):
        """A loop's value going in, as the loop passes it on (the cuda backend's host
        keeps a device value where it is)."""
        return env[v.id]

    def region(self, region: Region, env: dict) -> list:
        run_steps(self, self.planner.plan(region, self.ids is not None, self.policy), env)
        return [env[v.id] for v in region.terminator.operands]

    def run_op(self, op: Op, env: dict) -> None:
        """One op by its host rule (on compacted rows: see the module docstring)."""
        if self.ids is not None:
            if op.opcode == "intrinsic" and op.attrs["name"] in ("lane", "nlanes"):
                # they observe lane identity: the original lanes, not the rows
                out = self.ids if op.attrs["name"] == "lane" else self.root.lanes
                out = np.asarray(out).astype(op.result.type.dtype)
                env[op.result.id] = out if op.result.varying else out[()]
                return
            if self._passes(op, env):
                env[op.result.id] = env[op.operands[1].id]  # every row takes the first
                return
            if op.opcode == "array" and env.gather_rows(self, op):
                return
        run_op(self, op, env)

    def _passes(self, op: Op, env: dict) -> bool:
        """A select whose (varying) mask is true on every row, between per-lane values:
        its first value as it is, without a copy of every row."""
        return (op.opcode == "select" and self.pass_selects and op.operands[0].varying
                and op.operands[1].varying and env[op.operands[1].id] is not None
                and bool(np.all(env[op.operands[0].id])))

    def shape(self, op: Op, out):
        """Varying results as arrays of N lanes, uniform ones as scalars."""
        r = op.results[0]
        out = np.asarray(out)
        if r.varying:
            return np.broadcast_to(out, (self.lanes,)).copy() if out.ndim == 0 else out
        return out[()] if out.ndim == 0 else out[0]


