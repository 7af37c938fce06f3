"""The one planner of the per-lane array executor: what steps a region runs.

Takes: a function and the backend's native loop compiler (``compile_loop(source,
label, reassoc=False) -> loop``, cpu: ``machinecode.loops.compiled``; None for the numpy
reference, whose plans are its host rules op by op).
Guarantees: ``Planner.plan(region, rows, policy)`` is the region's list of
``(step, ids dead after it)``, made once per region (and per all lanes / compacted
rows) and kept for every later call of the kernel:

- **fusion** (``schedule``): every maximal chain (a DAG) of elementwise ``array`` ops
  that ``fuse.fusable`` accepts becomes one ``fuse.Fused`` step, placed where the
  first op outside the chain needs one of its values (or where an op with a side
  effect, a region or a backend's step comes: those might write what the chain
  reads);
- **step rules**: each other op becomes the step its rule prepares
  (``opsteps.quick``: views, reshapes, reductions, products ...) or an ``OpStep``
  (its host rule);
- on **compacted rows**, the steps ``rowsteps.plan_rows`` makes of these;
- **deaths** (``deaths``): after each step, the region's values nothing reads later,
  dropped at once so that the next step's arrays reuse their memory.

The cpu backend plans its top-level steps (native phases between host ops) with
``steps`` too.  ``runner``: ``steps.run_steps``.
"""

from __future__ import annotations

from ..backends.cut import nested, users_of
from ..ir.core import Op, Region
from .fuse import Fused, broadcast, fusable, shape_of
from .layersteps import fold as fold_layers
from .opsteps import quick
from .rowsteps import plan_rows
from .steps import OpStep, Quick, Step


class Planner:
    """The plans of one function's regions (see the module docstring)."""

    def __init__(self, fn, compile_loop=None) -> None:
        self.fn = fn
        self.compile_loop = compile_loop
        self._users: dict | None = None
        self._undef: set[int] | None = None
        #: (id(region), on rows, planned for rows) -> (region, plan)
        self._plans: dict[tuple, tuple] = {}
        #: ``compact.plan``'s analyses of the function's varying loops (kept per kernel,
        #: not made again on every call)
        self.loops: dict = {}

    def steps(self, items: list, layers: bool = False) -> list[Step]:
        """``items`` (ops and a backend's steps, in program order) as steps; ``layers``:
        a kernel's top level, where a layer with its bias and relu, or a hand-written
        pooling, becomes one step (``layersteps``)."""
        if self.compile_loop is None:  # the reference's plans: every op by its host rule
            return [OpStep(i) if isinstance(i, Op) else i for i in items]
        if self._users is None:
            self._users, self._undef = users_of(self.fn), undefined(self.fn)
        if layers:
            items = fold_layers(items, self._users)
        return [(quick(s, self.compile_loop) or OpStep(s)) if isinstance(s, Op) else s
                for s in schedule(items, self._users, self._undef, self.compile_loop)]

    def plan(self, region: Region, rows: bool, policy) -> list:
        """The ``(step, dead)`` pairs of ``region`` on all lanes, or on a compacted
        loop's rows (planned for them where ``policy.plan_steps``; else its
        precomputed steps run as their ops)."""
        key = (id(region), rows, rows and policy.plan_steps)
        got = self._plans.get(key)
        if got is None:
            steps = self.steps(region.ops[:-1])
            if rows and policy.plan_steps:
                plan = plan_rows(region, steps, deaths)
            else:
                if rows:
                    steps = [OpStep(s.op) if isinstance(s, Quick) else s for s in steps]
                plan = list(zip(steps, deaths(region, [s.ops for s in steps])))
            got = self._plans[key] = (region, plan)
        return got[1]


def deaths(region: Region, groups: list) -> list[list[int]]:
    """For each group of the region's ops run as one step (in order, without the
    terminator), the region's own values (its arguments and its ops' results) that
    nothing reads after it: the loop's temporaries, dropped at once so that their
    memory is reused (held to the end of the step, every step's arrays would come from
    fresh pages)."""
    own = {a.id for a in region.args} | {r.id for o in region.ops for r in o.results}
    last: dict[int, int] = {}
    for i, ops in enumerate([*groups, [region.terminator]]):
        for op in ops:
            for r in op.results:
                if r.id in own:
                    last.setdefault(r.id, i)
            nested_ops = [o for r in op.regions for o in r.walk()]
            for v in op.inputs() + [v for o in nested_ops for v in o.inputs()]:
                if v.id in own:
                    last[v.id] = i
    out: list[list[int]] = [[] for _ in range(len(groups) + 1)]
    for v, i in last.items():
        out[i].append(v)
    return out[:-1]  # what the terminator reads is the region's result


def undefined(fn) -> set[int]:
    """Ids of the values ``undef`` ops make (an arm no lane ran leaves ``None``)."""
    return {op.result.id for op in fn.walk() if op.opcode == "undef"}


def schedule(steps: list, users: dict, undef: set[int], compile_loop) -> list:
    """``steps`` (ops and a backend's steps, in order) with the elementwise chains
    fused (see the module docstring)."""
    out: list = []
    pos = {id(s): k for k, s in enumerate(steps)}
    groups: list[list[Op]] = []
    owner: dict[int, list[Op]] = {}

    def close(gs) -> None:
        for g in list(gs):
            groups.remove(g)
            for o in g:
                owner.pop(o.result.id, None)
            out.append(Fused(sorted(g, key=lambda o: pos[id(o)]), users, compile_loop))

    for step in steps:
        if isinstance(step, Op) and fusable(step, undef):
            gs = []
            for v in step.operands:
                g = owner.get(v.id)
                if g is not None and not any(g is h for h in gs):
                    gs.append(g)
            shapes = [shape_of(o.result) for g in gs for o in g] + [shape_of(step.result)]
            if gs and broadcast(shapes) is None:
                close(gs)
                gs = []
            g = [o for h in gs for o in h] + [step]
            for h in gs:
                groups.remove(h)
            groups.append(g)
            for o in g:
                owner[o.result.id] = g
            continue
        if not isinstance(step, Op) or step.effect and step.opcode != "count" or step.regions:
            close(list(groups))  # it may write what a chain reads
        else:
            read = [owner[v.id] for o in nested(step) for v in o.inputs() if v.id in owner]
            close([g for k, g in enumerate(read) if not any(g is h for h in read[:k])])
        out.append(step)
    close(list(groups))
    return out
