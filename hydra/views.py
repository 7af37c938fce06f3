"""Which reshapes of shared arrays NumPy makes a copy for (SPEC section 8: NumPy's
semantics, views included).

Per example, NumPy decides at run time whether ``a.reshape(s)`` is a view of ``a`` or a
copy: a view where ``a``'s strides allow it (always for a C-contiguous ``a``), a copy
otherwise (``W.T.reshape(6)``).  It matters where the kernel writes the result: into a
view, the write lands in the shared array; into a copy, each example writes its own
array, so hydra must make it per-lane.  For a lane's own arrays the batched reshape
makes the same choice at run time as each lane's reshape would (the lane axis is one
more leading axis), so only the reshapes of uniform arrays need a decision when the
kernel compiles.

The decision asks NumPy itself: a stand-in array with the shared array's shape and
the strides of a C-contiguous array (no memory behind it, never read) goes through the
same chain of views (``.T``, basic indexing, reshapes) and ``np.reshape(...,
copy=False)`` says whether a copy is needed.  Arguments and captured arrays are assumed
C-contiguous; ``check_layouts`` verifies that assumption at each call for the reshapes
it decided something for, and refuses an argument whose layout would make NumPy choose
otherwise (its strides are not part of the kernel's type).

``check_stores`` refuses, as ``CompileError``s, the stores that land in a base per
example but would miss it in hydra's batched form: through a gather at a varying index
(a view per example), and into an array a varying ``if`` chose, or a loop carried where
a varying ``if`` in it chose or a varying loop kept each lane's last one (hydra joins
the arms into per-lane rows, a copy), where the base is observed elsewhere.  Two views
of one array (``x[0] if c > 0 else x[1]``) are two arrays here: the join copies them
too, so the store misses ``x``; only an arm that yields the very value the other does
makes no copy.
"""

from __future__ import annotations

import numpy as np

from .batching import index_tuple
from .errors import CompileError, KernelValueError
from .ir.core import ARRAY_MEMORY, VIEW, Function, Op, Value, passes_on

#: array fns whose result may be a view of their first operand (their declaration)
VIEW_FNS = frozenset(fn for fn, memory in ARRAY_MEMORY.items() if memory == VIEW)


def _apply(op: Op, a: np.ndarray) -> np.ndarray:
    """``op`` on ``a`` as NumPy runs it per example, views only: raises ValueError where
    a reshape needs a copy.  Computed indices are taken as 0 (strides do not depend on
    them)."""
    fn, params = op.attrs["fn"], op.attrs["params"]
    if fn == "transpose":
        return np.transpose(a)
    if fn == "reshape":
        return np.reshape(a, tuple(op.result.type.shape), copy=False)
    spec = params["index"]
    return a[index_tuple(spec, [0] * sum(1 for item in spec if item[0] == "int"))]


def _stand_in(shape: tuple) -> np.ndarray:
    """A C-contiguous array of ``shape`` with no memory behind it (views only)."""
    strides = tuple(int(np.prod(shape[k + 1:], dtype=np.int64)) for k in range(len(shape)))
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), shape, strides,
                                           writeable=False)


def shared_reshapes(fn: Function) -> dict[int, tuple[bool, Value, list[Op]]]:
    """Reshapes of uniform parameters and captured arrays, through views: result id ->
    (NumPy copies, the shared array, the chain of view ops from it, the reshape last),
    for a C-contiguous shared array.  Reshapes whose shapes are not known are left out."""
    shared = [p for p in fn.params if not p.varying]
    shared += [op.result for op in fn.walk() if op.opcode == "global_array"]
    chains: dict[int, tuple[Value, list[Op], np.ndarray]] = {
        v.id: (v, [], _stand_in(tuple(v.type.shape))) for v in shared
        if getattr(v.type, "shape", None) is not None}
    out = {}
    for op in fn.walk():
        if op.opcode != "array" or op.attrs["fn"] not in VIEW_FNS \
                or op.operands[0].id not in chains \
                or getattr(op.result.type, "shape", None) is None:
            continue
        root, chain, a = chains[op.operands[0].id]
        try:
            view, copies = _apply(op, a), False
        except ValueError:  # NumPy needs a copy for this reshape
            view, copies = None, True
        except IndexError:  # an index into an empty axis: nothing to decide
            continue
        if op.attrs["fn"] == "reshape":
            out[op.result.id] = (copies, root, chain + [op])
        if view is not None:
            chains[op.result.id] = (root, chain + [op], view)
    return out


def check_layouts(fn: Function, values: list) -> None:
    """The reshapes hydra decided for a C-contiguous shared array (``fn.notes``, set by
    the uniformity pass) make the same choice for this call's arrays: else a
    ``KernelValueError`` naming the reshape, before anything runs."""
    decided = fn.notes.get("shared_reshapes")
    if not decided:
        return
    given = {p.id: (f"argument '{p.name}'", a) for p, a in zip(fn.params, values)}
    given.update((op.result.id, (f"the captured array '{op.attrs['name']}'", op.attrs["array"]))
                 for op in fn.walk() if op.opcode == "global_array")
    for copies, root, chain in decided:
        what, a = given[root.id]
        if not isinstance(a, np.ndarray) or a.flags.c_contiguous:
            continue
        strides, b = a.strides, a
        try:
            for op in chain:
                b = _apply(op, b)
            now = False
        except ValueError:
            now = True
        except IndexError:
            continue
        if now != copies:
            made, other = ("a copy", "a view") if now else ("a view", "a copy")
            raise KernelValueError(
                f"{what} has strides {strides} for which NumPy makes "
                f"{made} in this reshape, and the kernel writes it: hydra compiled {other}, "
                f"as for a C-contiguous array; pass np.ascontiguousarray(...)", None,
                chain[-1].loc)


def check_stores(fn: Function) -> None:
    """The stores a view carries per example that hydra's batched form would lose (see
    the module docstring), as ``CompileError``s naming the store; after uniformity."""
    made = {r.id: op for op in fn.walk() for r in op.results}
    copied = {chain[-1].result.id for copies, _, chain in fn.notes.get("shared_reshapes", ())
              if copies}
    stores = [op for op in fn.walk() if op.opcode in ("store", "array_store")]
    for op in stores:
        _gathered(op, made, copied)
    merged = _Merges(fn, made, copied)
    for op in stores:
        merged.check(op)


def _views_back(v: Value, made: dict, copied: set):
    """``v`` and the arrays it is a view of, nearest first."""
    yield v
    while v.id in made and made[v.id].opcode == "array" \
            and made[v.id].attrs["fn"] in VIEW_FNS and v.id not in copied:
        v = made[v.id].operands[0]
        yield v


def _gathered(op: Op, made: dict, copied: set) -> None:
    """A store through ``r = W[i]`` at a varying ``i``: per example ``r`` is a view (basic
    indexing) and the store lands in ``W`` (a shared array, or the lane's own), where
    hydra gathers a per-lane copy (SPEC section 8)."""
    for v in _views_back(op.operands[0], made, copied):
        view = made.get(v.id)
        if view is None or view.opcode != "array" or view.attrs["fn"] != "getitem":
            continue  # (a copied reshape is no getitem)
        base = view.operands[0]
        if any(i.varying for i in view.operands[1:]):
            what = "the lane's array" if base.varying else "the shared array"
            raise CompileError(
                f"a store into {base.name or 'an array'}[...] at a varying index: per "
                f"example that is a view, so the store would land in {what}, where hydra "
                f"gathers a per-lane copy", op.loc,
                hint="store into the array itself (W[i, j] = ...), or copy the row first "
                     "(r = W[i].copy())")


class _Merges:
    """Stores into (a view of) an array a varying ``if`` chose.  Per example the store
    lands in the array the lane's arm chose; hydra joins the arms into per-lane rows (a
    copy), so the store misses an arm's own array.  That is refused where the miss can
    be seen: the arm is (a view of) an argument or a captured array, or that array (or
    a view of it, or a value joined from it) is read after the store on a lane that ran
    it, or in a later trip of a loop around it."""

    def __init__(self, fn: Function, made: dict, copied: set) -> None:
        self.made, self.copied = made, copied
        self.order = list(fn.walk())
        self.pos = {id(op): k for k, op in enumerate(self.order)}
        self.end: dict[int, int] = {}
        self.loops: dict[int, list[Op]] = {}  # id(op) -> the whiles around it
        self.arms: dict[int, dict[int, int]] = {}  # id(op) -> {id(if around it): its arm}
        self.owner: dict[int, Op] = {}  # id(terminator) -> the op whose region it ends
        self._span(fn.body, [], {})
        self.returned = fn.notes.get("kernel_return_ids", set())
        self.callers = {p.id for p in fn.params}
        self.callers.update(op.result.id for op in self.order if op.opcode == "global_array")
        self.uses: dict[int, list[Op]] = {}
        for op in self.order:
            for v in op.operands:
                self.uses.setdefault(v.id, []).append(op)

    def _span(self, region, loops: list, arms: dict) -> None:
        for op in region.ops:
            self.loops[id(op)], self.arms[id(op)] = loops, arms
            inner = loops + [op] if op.opcode == "while" else loops
            for k, r in enumerate(op.regions):
                if r.ops:
                    self.owner[id(r.terminator)] = op
                self._span(r, inner, {**arms, id(op): k} if op.opcode == "if" else arms)
                for a in r.args:  # made afresh each trip, at the op
                    self.made.setdefault(a.id, op)
            self.end[id(op)] = self.pos[id(op)] + sum(1 for r in op.regions for _ in r.walk())

    def check(self, op: Op) -> None:
        *_, v = _views_back(op.operands[0], self.made, self.copied)
        merge = self.made.get(v.id)
        if merge is not None and (merge.opcode == "while" or merge.opcode == "if"
                                  and not merge.operands[0].varying):
            return self._carried(op, v)
        if merge is None or merge.opcode != "if":
            return
        i = merge.results.index(v)
        yields = [reg.terminator.operands[i] for reg in merge.regions]
        if yields[0] is yields[1]:  # one value on every lane: no select, no copy
            return self._carried(op, v)
        arms = [list(_views_back(y, self.made, self.copied))[-1] for y in yields]
        for arm in arms:  # an arm that is itself a join: the arrays it joined
            if arm.id in self.made and _sources(self.made[arm.id], arm) is not None:
                self._carried(op, arm, {v.id})
        for arm in arms:
            if arm.id in self.callers or self._read_later(
                    arm, op, {v.id}, merge, {k for k, a in enumerate(arms) if a is arm}):
                _refuse(op, "a varying if chose", arm, arm.id in self.callers,
                        arm if arms[0] is arms[1] else None)

    def _carried(self, op: Op, v: Value, chosen: set | None = None) -> None:
        """A store into (a view of) a value a loop carries: where the loop joined
        different arrays (a varying ``if`` in it chose, or a varying loop kept a lane's
        last one) it is per-lane rows (a copy).  Refused as for an ``if`` where the
        array is the caller's; for the kernel's own, where it can be seen (coarser than
        for an ``if``: ``_read_later`` with every join on the way the store's).
        ``chosen``: where ``v`` is an arm of a varying ``if`` the store goes through
        (a copy already), that if's result (its id)."""
        missed, joins = self._origins(v, set(), chosen is not None)
        joins |= chosen or set()
        for base in missed.values():
            if base.id in self.callers or self._read_later(
                    base, op, joins, renewed=self._renewed(base, op, v, chosen is not None)):
                what = "a loop carried" if self.made[v.id].opcode == "while" else \
                    "a varying if chose"
                _refuse(op, what, base, base.id in self.callers,
                        base if len(missed) == 1 else None)

    def _origins(self, v: Value, blocked: set, copied: bool = False
                 ) -> tuple[dict[int, Value], set[int]]:
        """The arrays ``v`` is (a view of) through joins on a path with a copy (by id;
        ``copied``: ``v`` is one already), and the ids of the joins on the way; not
        through the region arguments of the whiles in ``blocked`` (ids)."""
        missed, joins, seen, todo = {}, set(), set(), [(v, copied)]
        while todo:
            w, copied = todo.pop()
            *_, w = _views_back(w, self.made, self.copied)
            if (w.id, copied) in seen:
                continue
            seen.add((w.id, copied))
            at = self.made.get(w.id)
            sources = _sources(at, w) if at is not None else None
            if sources is None:
                if copied:
                    missed[w.id] = w
                continue
            if at.opcode == "while" and w not in at.results and id(at) in blocked:
                continue
            joins.add(w.id)
            todo += [(u, copied or copies) for u, copies in sources]
        return missed, joins

    def _renewed(self, base: Value, store: Op, v: Value, copied: bool) -> bool:
        """Is ``base`` made in a loop around ``store``, and reaches the store's ``v`` with a
        copy only from an earlier trip of such a loop (through its arguments)?"""
        defined = self.made.get(base.id)
        at = self.pos[id(defined)] if defined is not None else -1
        around = {id(w) for w in self.loops[id(store)]
                  if self.pos[id(w)] < at <= self.end[id(w)]}
        return bool(around) and base.id not in self._origins(v, around, copied)[0]

    def _read_later(self, base: Value, store: Op, own: set, merge: Op | None = None,
                    chose: set = frozenset(), renewed: bool = False) -> bool:
        """Is ``base`` or a view of it read after ``store`` on a lane that ran the store
        (not in the other arm of an ``if`` around both), or anywhere in a loop around
        ``store`` that ``base`` comes from outside of?  Reads before the store cannot
        see it, but a value joined from ``base`` before the store is ``base`` too (except
        ``own``, the ids of the joins the store goes through: their reads see the
        store).  ``merge``, ``chose``: the varying ``if`` whose result the store goes
        through and the arms of it that chose ``base`` (on the others the store lands
        elsewhere, so what they do with ``base`` cannot see it).  ``renewed``: the store
        sees an earlier trip's ``base`` (``_carried``), so only what that one was joined
        into can be read later."""
        start, end = (self.pos[id(merge)], self.end[id(merge)]) if merge else (1, 0)
        after = self.pos[id(store)]
        defined = self.made.get(base.id)
        at = self.pos[id(defined)] if defined is not None else -1
        loops = [w for w in self.loops[id(store)] if self.pos[id(w)] > at]
        store_arms = self.arms[id(store)]
        todo, seen = [base], set()
        while todo:
            v = todo.pop()
            if v.id in seen:
                continue
            seen.add(v.id)
            for use in self.uses.get(v.id, []):
                k = self.pos[id(use)]
                if start <= k <= end and self.arms[id(use)].get(id(merge)) not in chose:
                    continue
                owner = self.owner.get(id(use))
                if use.opcode == "array" and use.attrs["fn"] in VIEW_FNS \
                        and use.result.id not in self.copied:
                    todo.append(use.result)  # a view: its reads are base's
                    continue
                joined = use.opcode == "while" or owner is not None
                if joined and all(r.id in own for r in _carried_to(owner, use, v)):
                    continue  # into the store's own join
                if renewed and v is base:  # this trip's base is another array than the
                    if joined:  # store's; an earlier trip's was joined before the store
                        todo.extend(r for r in _carried_to(owner, use, v)
                                    if r.id not in own and r.id not in self.returned)
                    continue
                in_loop = any(self.pos[id(w)] <= k <= self.end[id(w)] for w in loops)
                if in_loop and owner is not merge:
                    return True  # a later trip reads it
                use_arms = self.arms[id(use)]
                if any(use_arms.get(i, arm) != arm for i, arm in store_arms.items()):
                    continue  # the other arm of an if around the store: not its lanes
                if use.opcode == "while" and k < after \
                        or owner is not None and (owner is merge or k < after):
                    # joined into another value (not a read): follow it, but not into
                    # the kernel's return value (lanes that return run no later store)
                    todo.extend(r for r in _carried_to(owner, use, v)
                                if r.id not in own and r.id not in self.returned)
                elif k > after:
                    return True
        return False


def _sources(at: Op, w: Value) -> list[tuple[Value, bool]] | None:
    """The values a join ``w`` (a result of the varying ``if`` or the ``while`` ``at``,
    or an argument of one of the while's regions) is made from, each with whether
    hydra's batched join copies it on the way (a select); None where ``w`` is no such
    join."""
    if at.opcode == "if" and w in at.results:  # a uniform if's arm is one lane's
        i = at.results.index(w)
        yields = [reg.terminator.operands[i] for reg in at.regions]
        return [(y, bool(at.operands[0].varying) and yields[0] is not yields[1])
                for y in yields]
    if at.opcode != "while":
        return None
    before, body = at.regions
    test, passed = before.terminator.operands[0], before.terminator.operands[1:]
    yielded = body.terminator.operands
    if w in before.args:  # a varying loop keeps each lane's last value: a select at the
        j = before.args.index(w)  # end of a trip, unless the body passes it on unchanged
        return [(at.operands[j], False),
                (yielded[j], bool(test.varying) and yielded[j] is not body.args[j])]
    if w in body.args:
        return [(passed[body.args.index(w)], False)]
    j = at.results.index(w)  # a value uniform inside a varying loop: a per-lane copy
    return [(passed[j], bool(test.varying) and not body.args[j].varying)]


def _refuse(op: Op, chose: str, base: Value, caller: bool, one: Value | None) -> None:
    """The ``CompileError`` for a store into one of the arrays that ``chose`` joined
    (into per-lane rows, a copy), landing per example in ``base``, the caller's array or
    one read after the store; ``one``: the array where every choice is (a view of) that
    one array."""
    seen = f"{base.name or 'an argument'}, the caller's array" if caller else \
        f"{base.name or 'an array'}, which is read after the store"
    if one is None:
        raise CompileError(
            f"a store into an array that {chose}: per example it lands in {seen}, on the "
            f"lanes whose arm chose it, where hydra joins the arms into per-lane rows (a "
            f"copy)", op.loc,
            hint="store into each array under the if's condition, or copy the array the "
                 "other arm chose (z = y.copy())")
    name = one.name or "x"
    raise CompileError(
        f"a store into an array that {chose}: per example it lands in {seen}, through "
        f"the view of it each lane chose, where hydra joins the views into per-lane rows "
        f"(a copy)", op.loc,
        hint=f"store into {name} itself, at an index each lane computes as it chose the "
             f"view ({name}[i, j] = ... with i = 0 if c > 0 else 1, for {name}[0] or "
             f"{name}[1]), or "
             f"under the condition that chose it")


def _carried_to(owner: Op | None, end: Op, v: Value) -> list[Value]:
    """The values that ``end``, a terminator of one of ``owner``'s regions or a
    ``while`` (its operands: the initial carried values), passes ``v`` on to."""
    return [to for to, u, at in passes_on(owner or end) if u is v and at is end]
