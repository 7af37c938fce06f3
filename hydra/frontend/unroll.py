"""Unrolled ``for ... in range(...)`` loops: shapes that depend on a loop counter.

SPEC section 8 lets a per-lane array's shape depend on uniform values, but a shape is
part of a type and must be known when the kernel compiles; inside a ``while`` op the
counter is a loop-carried value, not a constant.  So when a shape depends on the
counter of a loop that hydra can unroll (bounds that are constants when the kernel
compiles, constants or the uniform ints it specializes on; at most ``MAX_TRIPS`` trips;
no ``break``, ``continue`` or ``return`` in its body), ``build_function`` translates the
kernel again with that loop unrolled: one copy of the body per trip, the counter a
constant in each, so every copy's shapes are static.  Python's semantics hold: after the
loop the counter keeps its last value, and a loop that runs zero times leaves it as it
was (unbound if it was).  Where the loop cannot be unrolled, the error says why.
"""

from __future__ import annotations

import ast
import contextvars

from ..errors import Loc
from .common import NeedShapes, has_return, loop_exits

#: the loops (file, line, column of their ``for``) to unroll while a kernel is built
UNROLL = contextvars.ContextVar("hydra_unroll", default=frozenset())
#: the most trips a loop is unrolled for (each trip is a copy of the body)
MAX_TRIPS = 64


class LoopCounter:
    """The counter of a loop that was not unrolled, as a shape that depends on it names
    it: ``why`` it cannot be unrolled (None: it can), and ``behind``: the parameters and
    counters its bounds come from (the kernel may specialize on those)."""

    __slots__ = ("key", "name", "why", "behind")

    def __init__(self, key: tuple, name: str, why: str | None, behind: tuple) -> None:
        self.key, self.name, self.why, self.behind = key, name, why, behind

    def describe(self) -> str:
        """What a shape that depends on this counter depends on, for an error message."""
        if self.why is None:
            return f"the loop counter `{self.name}`"
        return f"the loop counter `{self.name}` of a loop hydra cannot unroll ({self.why})"


def shape_reason(behind) -> str | None:
    """The loop counter a shape that is not known depends on (``behind``: the parameters
    and counters it comes from), for an error message; None where it depends on none."""
    counters = [c for c in behind if isinstance(c, LoopCounter)]
    stuck = [c for c in counters if c.why is not None]
    return (stuck or counters)[0].describe() if counters else None


def loop_key(loc: Loc) -> tuple:
    return (loc.file, loc.line, loc.col)


class UnrollMixin:
    """Unrolled loops and the counters of the others; mixed into ``Builder``."""

    def counter_of(self, node: ast.For, bounds, loc: Loc) -> LoopCounter:
        """What a shape that depends on this loop's counter needs to know about it."""
        consts = [self.constant_value(v) for v in bounds]
        has_break, has_continue = loop_exits(node.body)
        why = None
        if has_break or has_continue:
            why = f"a {'break' if has_break else 'continue'} in its body"
        elif has_return(node.body):
            why = "a return in its body"
        elif None in consts:
            why = "its bounds are not constants when the kernel compiles"
        elif consts[2] == 0:
            why = "a zero step"  # the loop itself raises the ValueError
        elif len(range(*consts)) > MAX_TRIPS:
            why = (f"it runs {len(range(*consts))} times; hydra unrolls loops of at most "
                   f"{MAX_TRIPS} trips")
        behind = tuple(p for v in bounds for p in self._params_behind(v))
        name = node.target.id if isinstance(node.target, ast.Name) else "of this loop"
        return LoopCounter(loop_key(self.loc(node)), name, why, behind)

    def unrolled_for(self, node: ast.For, bounds, loc: Loc) -> bool:
        """Translate the loop unrolled where ``build_function`` asked for it: one copy of
        the body per trip, the counter a constant in each; False where it did not."""
        if loop_key(self.loc(node)) not in UNROLL.get():
            return False
        counter = self.counter_of(node, bounds, loc)
        if counter.why is not None:
            return False
        t = bounds[0].type
        for k in range(*[self.constant_value(v) for v in bounds]):
            self.store_target(node.target, self.const(k, loc, t))
            self.stmts(node.body)
        return True


def build_unrolling(build):
    """``build()``, again with the loops unrolled whose counters shapes depend on, until
    no new one is asked for (a NeedShapes that names no such loop goes on)."""

    done = UNROLL.get()
    while True:
        token = UNROLL.set(done)
        try:
            return build()
        except NeedShapes as e:
            new = {c.key for c in e.loops if c.why is None} - done
            if not new:
                raise
            done = done | new
        finally:
            UNROLL.reset(token)


__all__ = ["UNROLL", "MAX_TRIPS", "LoopCounter", "UnrollMixin", "build_unrolling",
           "shape_reason"]
