"""Reverse-mode differentiation of a per-lane function's typed structured SSA
(SPEC section 11): ``differentiate(fn, wrt) -> Function``.

Takes: a function as the frontend builds it (typed, before the uniformity pass, no
masks), the parameters to differentiate (float scalars) and whether its result is
``(value, aux...)``.  Guarantees: a function with the same parameters that returns the
value, the aux leaves and one gradient per ``wrt`` parameter; it is ordinary structured
IR plus ``tape_push``/``tape_pop``, so uniformity, linearize and the backends run it as
they run any kernel.  Each lane gets the derivative of the path it took.

How (JAX's transpose rules on a structured IR, Enzyme's per-lane trip counts):

- **forward sweep**: the body's ops, copied.  A ``while`` at the level being reversed
  also counts its trips in a new carried counter and pushes, at the start of each
  trip, the carried values the body changes (loop-invariant ones are kept once: the
  loop's initial value) onto its own tape; the push carries the loop's mask after
  linearize, so each lane stores exactly the trips it ran.
- **reverse sweep**: the ops backwards, each float result's adjoint handed to the rule
  in its operation's registry record (``hydra.registry``, ``hydra.grad.rules``); only
  values that depend on a differentiated parameter get adjoints (``active``).  An
  ``if`` becomes an ``if`` on the same per-lane condition whose arms recompute their
  forward values and reverse them, and yield the adjoints of the outer values they
  use (linearize turns the per-lane choice into selects: a lane's adjoint comes from
  its own arm only).  A ``while`` becomes a loop aligned with the forward one: ``j``
  counts down from the largest trip count (``lanemax``, chunk-local under Dask), and
  the lanes whose count is above ``j`` pop their state, recompute the body's forward
  values (its own nested loops recorded then, to be reversed at once) and reverse the
  body.  Aligned, the lanes of reverse trip ``j`` are those of forward trip ``j``, so a
  value pushed uniform pops uniform (the uniformity pass knows: ``tape_pop``).  The
  state a trip yields (the next trip's popped state, the loop's result for a lane's
  last trip) is carried back rather than recomputed (``given``), and a product the
  reverse reads is kept on a tape of its own (``hydra.grad.kept``).  Other values in a
  branch or a loop body are recomputed rather than stored (the memory cost the guide
  states); ``checkpoint=K`` stores the state only every K trips and recomputes the
  rest (``hydra.grad.checkpoint``).
- ``break``/``continue``/``return`` are flags the frontend carries already; ``print``
  and ``assert`` run once, in the forward sweep (recomputations drop them).
"""

from __future__ import annotations

import itertools

import numpy as np

from ..batching import ELEMENTWISE
from ..errors import CompileError
from ..ir.core import Function, Op, Region, Value
from ..registry import AdjointState, record
from ..types import BOOL, INT64, ArrayType, ScalarType
from .analysis import active, check_differentiable, defined, describe, useful
from .checkpoint import segment
from .emit import Emitter, is_array
from .functional import functionalize
from .kept import products, read_kept


def is_float(t) -> bool:
    """Carries a gradient: a float number or a float array (SPEC section 11)."""
    if isinstance(t, ArrayType):
        t = t.dtype
    return isinstance(t, ScalarType) and t.kind == "f"


def _record(op: Op):
    if op.opcode in ("math", "array"):
        return record(op.opcode, op.attrs["fn"])
    if op.opcode == "intrinsic":
        return record("intrinsic", op.attrs["name"])
    return record("op", op.opcode)


def _shape(v: Value) -> tuple:
    return v.type.shape if isinstance(v.type, ArrayType) else ()


class Transform:
    """One differentiation: ``env`` maps each original value to its copy in scope."""

    def __init__(self, fn: Function) -> None:
        self.fn = fn
        self.e = Emitter(Region(), fn.loc)
        self.env: dict[int, Value] = {p.id: p for p in fn.params}
        self.orig: dict[int, Value] = {}  # id -> the original value (for its type)
        self.loops: dict[int, tuple[int, Value, list[int]]] = {}
        self.tapes = itertools.count()
        self.wrt: set[int] = set()  # the parameters differentiated
        #: the original values the differentiated value depends on (``useful``)
        self.useful: set[int] = set()
        #: the original values that depend on a differentiated parameter (``active``)
        self.active: set[int] | None = None
        #: adjoint value id -> where it may be nonzero (a branch of a select / np.where)
        self.masks: dict[int, Value] = {}
        #: original value id -> a value the reverse already has for it (a loop trip's
        #: result: the next trip's popped state), so its replay skips the op
        self.given: dict[int, Value] = {}
        #: ``hydra.grad(f, checkpoint=K)``: loop state saved every K trips (``checkpoint``)
        self.checkpoint: int | None = None
        #: products kept (``keep``): id(op) -> tape for the forward trip being copied
        #: and the reverse trip being replayed; every such tape; by loop body
        self.pushing, self.popping, self.kept, self.kept_by = {}, {}, set(), {}

    # --- forward sweep ---------------------------------------------------------------

    def primal(self, region: Region, record: bool, replay: bool) -> None:
        """Copy ``region``'s ops (not its terminator); ``record``: its loops record
        their trips for the reverse; ``replay``: a recomputation (no print, assert)."""
        for op in region.ops[:-1]:
            if replay and op.opcode in ("print", "check"):
                continue
            if replay and op.results and all(r.id in self.given for r in op.results):
                for r in op.results:
                    self.env[r.id] = self.given[r.id]
                continue
            with self.e.at(op.loc):
                if op.opcode == "while" and record and any(
                        is_float(r.type) and r.id in self.useful for r in op.results):
                    self.recorded_while(op, replay)  # (no gradient leaves the others)
                elif id(op) in self.popping:  # a product its forward trip kept
                    self.copy_op(op, [], "undef", {"kept": self.popping[id(op)]})
                else:
                    regions = [self.copy_region(r, replay) for r in op.regions]
                    new = self.copy_op(op, regions)
                    if id(op) in self.pushing:
                        self.e.op("tape_push", new.results, [],
                                  {"tape": self.pushing[id(op)]})

    def copy_op(self, op: Op, regions: list[Region], opcode=None, attrs=None) -> Op:
        new = self.e.op(opcode or op.opcode, [] if opcode else [self.env[v.id] for v in
                        op.operands], [r.type for r in op.results], attrs or op.attrs,
                        regions, [r.name for r in op.results])
        for r, n in zip(op.results, new.results):
            self.env[r.id] = n
        return new

    def fresh_args(self, values: list[Value]) -> list[Value]:
        out = [Value(a.type, a.loc, a.name) for a in values]
        for a, b in zip(values, out):
            self.env[a.id] = b
        return out

    def copy_region(self, region: Region, replay: bool, extra=(), more=()) -> Region:
        new = Region(self.fresh_args(region.args) + list(extra))
        with self.e.into(new):
            self.primal(region, record=False, replay=replay)
            t = region.terminator
            self.e.op(t.opcode, [self.env[v.id] for v in t.operands] + list(more(new)
                      if callable(more) else more), [], t.attrs)
        return new

    def recorded_while(self, op: Op, replay: bool) -> None:
        before, body = op.regions
        passed = before.terminator.operands[1:]
        if any(p is not a for p, a in zip(passed, before.args)):
            raise CompileError("hydra.grad: a loop whose condition changes its carried "
                               "values is not supported", op.loc)
        pushed = [i for i, a in enumerate(body.args) if body.terminator.operands[i] is not a]
        tape = next(self.tapes)
        k0 = self.e.const(0, INT64)
        k_before, k_body = Value(INT64, op.loc, "trips"), Value(INT64, op.loc, "trips")
        nb = self.copy_region(before, replay, [k_before], [k_before])
        nbody = Region(self.fresh_args(body.args) + [k_body])
        with self.e.into(nbody):
            if pushed and self.checkpoint:  # a checkpoint every K trips: 0, K, 2K, ...
                push, skip = Region(), Region()
                with self.e.into(push):
                    self.e.op("tape_push", [nbody.args[i] for i in pushed], [],
                              {"tape": tape})
                    self.e.op("yield", [], [])
                with self.e.into(skip):
                    self.e.op("yield", [], [])
                at = self.e.v("mod", [k_body, self.e.const(self.checkpoint, INT64)], INT64)
                self.e.op("if", [self.e.v("eq", [at, self.e.const(0, INT64)], BOOL)], [],
                          {}, [push, skip])
            elif pushed:
                self.e.op("tape_push", [nbody.args[i] for i in pushed], [], {"tape": tape})
            saved, self.pushing = self.pushing, self.keep(body)
            self.primal(body, record=False, replay=replay)
            self.pushing = saved
            k1 = self.e.v("add", [k_body, self.e.const(1, INT64)], INT64)
            self.e.op("yield", [self.env[v.id] for v in body.terminator.operands] + [k1], [])
        new = self.e.op("while", [self.env[v.id] for v in op.operands] + [k0],
                        [r.type for r in op.results] + [INT64], op.attrs, [nb, nbody],
                        [r.name for r in op.results] + ["trips"])
        for r, n in zip(op.results, new.results):
            self.env[r.id] = n
        self.loops[id(op)] = (tape, new.results[-1], pushed)

    def keep(self, body: Region) -> dict[int, int]:
        """A tape of its own for each float product of ``body`` that its reverse may
        read (``kept``; not with checkpoints, which keep memory to the loop state)."""
        out = {} if self.checkpoint else {
            id(o): next(self.tapes) for o in products(body, self.useful)
            if all(is_float(r.type) for r in o.results)}
        self.kept.update(out.values())
        self.kept_by[id(body)] = out  # (the last recording of the loop: its reverse's)
        return out

    # --- reverse sweep ---------------------------------------------------------------

    def fit(self, g: Value, t, like: Value | None = None) -> Value:
        """``g`` as an adjoint of type ``t``: summed over the axes NumPy broadcast (a
        uniform bias added to per-lane rows, a number times an array), then converted;
        a number for an array (a 0-d array times a number) is spread like ``like``."""
        e = self.e
        if isinstance(t, ArrayType) and not is_array(g):
            if t.shape == ():  # np.where(True, g, g): a number as a 0-d array
                g = e.arr("where", [e.const(True, BOOL), g, g])
            else:
                g = e.mul(e.arr("ones_like", [like], {"dtype": None}), g)
        if is_array(g):
            gs = g.type.shape
            ts = t.shape if isinstance(t, ArrayType) else ()
            lead = len(gs) - len(ts)
            axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(ts)
                                              if n == 1 and gs[lead + i] != 1)
            if not isinstance(t, ArrayType):
                g = e.arr("sum", [g], {"axis": None, "keepdims": False})
            else:
                if axes:
                    g = e.arr("sum", [g], {"axis": axes, "keepdims": True})
                if g.type.shape != ts:
                    g = e.arr("reshape", [g], {"shape": ts})
        return e.cast(g, t)

    def accumulate(self, adj: dict, v: Value, g: Value | None) -> None:
        if g is None or not is_float(v.type) or (self.active is not None
                                                 and v.id not in self.active):
            return
        mask = self.masks.get(g.id)
        g = self.fit(g, v.type, self.env.get(v.id))
        if mask is not None and _shape(mask) in ((), _shape(g)):
            self.masks[g.id] = mask  # the same elements (or a number): still masked
        self.orig[v.id] = v
        adj[v.id] = g if v.id not in adj else self.e.add(adj[v.id], g)

    def reverse(self, region: Region, seeds: dict) -> dict[int, Value]:
        """Emit the reverse of ``region`` (whose forward values are in ``env``) given the
        adjoints ``seeds``; returns every adjoint it found, by original value id."""
        adj = dict(seeds)
        for op in reversed(region.ops[:-1]):
            with self.e.at(op.loc):
                if op.opcode == "if":
                    self.reverse_if(op, adj)
                elif op.opcode == "while":
                    self.reverse_while(op, adj)
                else:
                    self.reverse_op(op, adj)
        return adj

    def reverse_op(self, op: Op, adj: dict) -> None:
        gs = [adj.get(r.id) for r in op.results]
        if all(g is None for g in gs) or not op.operands:
            return
        if op.opcode == "load":
            return self.reverse_load(op, gs[0], adj)
        adjoint = _record(op).adjoint
        if adjoint.state is AdjointState.MISSING:
            raise CompileError(f"hydra.grad: the {describe(op)} has no adjoint rule yet, so "
                               f"it cannot be differentiated", op.loc)
        if adjoint.state is AdjointState.NOT_DIFFERENTIABLE:
            return
        args = [self.env[v.id] for v in op.operands]
        out = self.env[op.results[0].id]
        grads = self.guard(op, args, gs[0], adjoint.rule(self.e, op, args, out, gs[0]))
        for v, g in zip(op.operands, grads):
            self.accumulate(adj, v, g)

    def guard(self, op: Op, args: list[Value], g: Value, grads: list) -> list:
        """An unselected branch of a select or ``np.where`` contributes exactly zero,
        never NaN (SPEC section 11): each branch's adjoint remembers the lanes and
        elements it is zero on (``masks``), and the elementwise operations behind it
        zero their contributions there by a select (``sqrt``'s 0 * inf of a branch that
        was never taken stays 0)."""
        e = self.e
        where = op.opcode == "select" or op.opcode == "array" and op.attrs["fn"] == "where"
        outer = self.masks.get(g.id)
        if where:
            c = args[0]
            taken = [c, e.arr("logical_not", [c]) if is_array(c) else e.v("not", [c], BOOL)]
            if outer is not None:
                taken = [e.arr("logical_and", [t, outer]) if is_array(t) or is_array(outer)
                         else e.v("bitand", [t, outer], BOOL) for t in taken]
            for gb, t in zip(grads[1:], taken):
                if gb is not None:
                    self.masks[gb.id] = t
            return grads
        if outer is None or not (op.opcode != "array" or op.attrs["fn"] in ELEMENTWISE):
            return grads
        out = []
        for gb in grads:
            if gb is not None:
                gb = e.select(outer, gb, 0.0)
                self.masks[gb.id] = outer
            out.append(gb)
        return out

    def reverse_load(self, op: Op, g: Value, adj: dict) -> None:
        """``a[i, j]``: the adjoint of ``a`` is ``g`` at that element, 0 elsewhere (a
        one-hot ``where`` over ``np.arange``: a scatter-add of one element)."""
        src = op.operands[0]
        if not is_float(src.type) or any(src is p and p.id not in self.wrt
                                          for p in self.fn.params) or any(
                o.opcode == "global_array" and o.result is src for o in self.fn.walk()):
            return  # a captured array or an argument not differentiated: a constant
        shape = src.type.shape
        if shape is None:
            from ..frontend.common import NeedShapes
            raise NeedShapes("hydra.grad needs the shape of the array loaded here", op.loc)
        e = self.e
        flat = e.const(0, INT64)
        for i, n in zip(op.operands[1:], shape):
            i = e.cast(self.env[i.id], INT64)
            i = e.v("select", [e.v("lt", [i, e.const(0, INT64)], BOOL),
                               e.v("add", [i, e.const(n, INT64)], INT64), i], INT64)
            flat = e.v("add", [e.v("mul", [flat, e.const(n, INT64)], INT64), i], INT64)
        size = int(np.prod(shape))
        iota = e.arr("arange", [], {"start": 0, "stop": size, "step": 1, "dtype": "int64"})
        hot = e.arr("where", [e.arr("eq", [iota, flat]), g, e.zero(g.type)])
        self.accumulate(adj, src, e.arr("reshape", [hot], {"shape": shape}))

    def _outer_yield(self, parts: list[tuple[Region, dict]]) -> list[int]:
        """The original values, defined outside, that any part has an adjoint for."""
        return list(dict.fromkeys(k for _, outer in parts for k in outer))

    def reverse_if(self, op: Op, adj: dict) -> None:
        gs = [adj.get(r.id) for r in op.results]
        if all(g is None for g in gs):
            return
        parts = []
        for region in op.regions:
            new = Region()
            with self.e.into(new):
                self.primal(region, record=True, replay=True)
                seeds: dict = {}
                for y, g in zip(region.terminator.operands, gs):
                    self.accumulate(seeds, y, g)
                found = self.reverse(region, seeds)
            inner = defined(region)
            parts.append((new, {k: g for k, g in found.items() if k not in inner}))
        keys = self._outer_yield(parts)
        for new, outer in parts:
            with self.e.into(new):
                self.e.op("yield", [outer.get(k) or self.e.zero(self.orig[k].type,
                                                                  self.env[k])
                                    for k in keys], [])
        result = self.e.op("if", [self.env[op.operands[0].id]],
                           [self.orig[k].type for k in keys], {}, [p[0] for p in parts])
        for k, r in zip(keys, result.results):
            self.accumulate(adj, self.orig[k], r)

    def reverse_while(self, op: Op, adj: dict) -> None:
        gs = [adj.get(r.id) for r in op.results]
        if all(g is None for g in gs):
            return  # nothing flows back through the loop (its records stay unread)
        tape, trips, pushed = self.loops[id(op)]
        before, body = op.regions
        e = self.e
        floats = [i for i, r in enumerate(op.results) if is_float(r.type)
                  and (self.active is None or r.id in self.active)]
        d0 = [gs[i] or e.zero(op.results[i].type, self.env[op.results[i].id])
              for i in floats]
        j = Value(INT64, op.loc, "trip")
        d_args = [Value(op.results[i].type, op.loc, f"d{op.results[i].name}")
                  for i in floats]
        # the state a trip yields is the next trip's popped state (the loop's result
        # for a lane's last trip): carried back, so the replay need not recompute it
        made = {r.id for o in body.ops[:-1] for r in o.results}
        ends = [] if self.checkpoint else [
            i for i in pushed if body.terminator.operands[i].id in made]
        nxt = [Value(body.args[i].type, op.loc, "next") for i in ends]
        live = Region()  # the trip of the lanes that ran it: pop, recompute, reverse
        with e.into(live):
            if self.checkpoint:
                found, d_new, inner = segment(self, op, j, d_args, trips, floats)
            else:
                found, d_new = self.trip(op, d_args, floats, ends, nxt)
                inner = defined(body)
            keys = [k for k in found if k not in inner]
            accs = [Value(self.orig[k].type, op.loc, "acc") for k in keys]
            acc_new = [e.add(a, found[k]) for a, k in zip(accs, keys)]
            e.op("yield", [*d_new, *acc_new, *[self.env[body.args[i].id] for i in ends]], [])
        idle = Region()
        with e.into(idle):
            e.op("yield", [*d_args, *accs, *nxt], [])
        nbody = Region([j, *d_args, *accs, *nxt])
        K = self.checkpoint
        with e.into(nbody):  # (with checkpoints, j counts segments of K trips)
            first = e.v("mul", [j, e.const(K, INT64)], INT64) if K else j
            ran = e.v("lt", [first, trips], BOOL)
            arms = e.op("if", [ran], [a.type for a in [*d_args, *accs, *nxt]], {},
                        [live, idle])
            j1 = e.v("sub", [j, e.const(1, INT64)], INT64)
            e.op("yield", [j1, *arms.results], [])
        acc0 = [e.zero(self.orig[k].type, self.env[k]) for k in keys]
        nb = Region([Value(a.type, a.loc, a.name) for a in nbody.args])
        with e.into(nb):
            go = e.v("ge", [nb.args[0], e.const(0, INT64)], BOOL)
            e.op("condition", [go, *nb.args], [])
        # aligned with the forward sweep: reverse trip j is every lane's own trip j, so
        # the lanes active in it are those active in forward trip j (a lane joins when j
        # reaches its own count) and a value the forward trip had uniform is uniform
        # again when popped (``Ws[l]`` stays one matrix, not one per lane)
        most = e.v("intrinsic", [trips], INT64, {"name": "lanemax", "chunk_local": True})
        if K:
            most = e.v("floordiv", [e.v("add", [most, e.const(K - 1, INT64)], INT64),
                                    e.const(K, INT64)], INT64)
        last = e.v("sub", [most, e.const(1, INT64)], INT64)
        final = [self.env[op.results[i].id] for i in ends]
        result = e.op("while", [last, *d0, *acc0, *final], [a.type for a in nbody.args], {},
                      [nb, nbody])
        outs = iter(result.results[1:])
        for i in floats:
            self.accumulate(adj, op.operands[i], next(outs))
        for k in keys:
            self.accumulate(adj, self.orig[k], next(outs))

    def trip(self, op: Op, d_args: list[Value], floats: list[int], ends: list[int],
             nxt: list[Value]) -> tuple[dict, list[Value]]:
        """One reverse trip of loop ``op`` for the lanes whose trip it is: pop the state,
        recompute the body's values (those it yields are ``nxt``: given), reverse it.
        Returns the adjoints found (by original id) and the carried state's."""
        tape, _, pushed = self.loops[id(op)]
        body, e = op.regions[1], self.e
        if pushed:
            popped = e.op("tape_pop", [], [body.args[i].type for i in pushed],
                          {"tape": tape}).results
            for i, p in zip(pushed, popped):
                self.env[body.args[i].id] = p
        for i, a in enumerate(body.args):
            if i not in pushed:  # loop-invariant: the loop's initial value
                self.env[a.id] = self.env[op.operands[i].id]
        saved, self.given = self.given, {
            body.terminator.operands[i].id: v for i, v in zip(ends, nxt)}
        popping, self.popping = self.popping, self.kept_by.get(id(body), {})
        self.primal(body, record=True, replay=True)
        self.given, self.popping = saved, popping
        seeds: dict = {}
        for i, d in zip(floats, d_args):
            self.accumulate(seeds, body.terminator.operands[i], d)
        found = self.reverse(body, seeds)
        return found, [found.get(body.args[i].id)
                       or e.zero(body.args[i].type, self.env[body.args[i].id]) for i in floats]


def differentiate(fn: Function, wrt: list[Value], n_out: int,
                  checkpoint: int | None = None) -> Function:
    """The function that returns ``fn``'s ``n_out`` result leaves (the value first, a
    float scalar) and then the gradient of the value for each of ``wrt``."""
    functionalize(fn)
    check_differentiable(fn)
    t = Transform(fn)
    t.checkpoint = checkpoint
    t.wrt = {p.id for p in wrt}
    t.useful = useful(fn, fn.body.terminator.operands[0])
    t.active = active(fn, t.wrt)
    t.primal(fn.body, record=True, replay=False)
    leaves = fn.body.terminator.operands[:n_out]
    e = t.e
    with e.at(fn.body.terminator.loc):
        seeds: dict = {}
        t.accumulate(seeds, leaves[0], e.const(1.0, leaves[0].type))
        adj = t.reverse(fn.body, seeds)
        grads = [adj.get(p.id) or e.zero(p.type, p) for p in wrt]
        e.op("yield", [t.env[v.id] for v in leaves] + grads, [])
    out = Function(fn.name, fn.params, fn.param_names, e.region, fn.loc)
    out.notes["python_int_params"] = fn.notes.get("python_int_params", {})
    out.notes["kernel_return_ids"] = set()
    read_kept(out, t.kept)
    return out


def inline(fn: Function, args: list[Value], region: Region) -> list[Value]:
    """Copy ``fn``'s body into ``region`` with its parameters bound to ``args`` (a
    gradient called inside a kernel); returns the copies of its result leaves."""
    t = Transform(fn)
    t.e.region = region
    t.env.update({p.id: a for p, a in zip(fn.params, args)})
    start = len(region.ops)
    t.primal(fn.body, record=False, replay=False)
    token = next(_INLINED)  # this copy's tapes are its own (``number_tapes``)
    for op in region.ops[start:]:
        for o in [op, *(x for r in op.regions for x in r.walk())]:
            if o.opcode in ("tape_push", "tape_pop"):
                o.attrs["tape"] = f"{o.attrs['tape']}@{token}"
    return [t.env[v.id] for v in fn.body.terminator.operands]


_INLINED = itertools.count()


def number_tapes(fn: Function) -> None:
    """Number ``fn``'s tapes 0, 1, ... in the order they first appear: two gradients
    (or one twice) inlined into one kernel keep tapes of their own, and the numbers do
    not depend on what was compiled before."""
    ids: dict = {}
    for op in fn.walk():
        if op.opcode in ("tape_push", "tape_pop"):
            op.attrs["tape"] = ids.setdefault(op.attrs["tape"], len(ids))
