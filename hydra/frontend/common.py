"""Small pieces shared by the frontend's modules: the compile-time objects a name can
stand for (``Meta``), syntactic scans of statement lists (which names a loop assigns,
whether a body contains ``break``/``return``, whether it always returns), and
``NeedShapes``, the error by which a build asks to be retried with array shapes.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..errors import CompileError, Loc


class Meta:
    """A compile-time object a name can stand for: a module, function, type or string."""

    __slots__ = ("obj",)

    def __init__(self, obj) -> None:
        self.obj = obj

    def __eq__(self, other) -> bool:
        return isinstance(other, Meta) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


@dataclass(slots=True)
class Partial:
    """Where a variable got a value on only some paths (for the error at its use)."""

    defined_at: Loc
    missing_at: Loc
    loop: bool = False  # assigned only inside the loop at missing_at, which may not run


def assigned_names(stmts: list[ast.stmt]) -> list[str]:
    """Names a list of statements may assign, in order of first appearance."""
    return list(dict.fromkeys(node.id for stmt in stmts for node in ast.walk(stmt)
                              if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)))


def contains(stmts, kinds, into_loops: bool) -> bool:
    """Does any statement contain a node of ``kinds``?  Without ``into_loops``, loops
    (the statements themselves included) are not looked into: their ``break`` and
    ``continue`` are their own."""
    stack = list(stmts)
    while stack:
        node = stack.pop()
        if isinstance(node, kinds):
            return True
        if not into_loops and isinstance(node, (ast.For, ast.While)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def has_return(stmts) -> bool:
    return contains(stmts, ast.Return, into_loops=True)


def loop_exits(stmts) -> tuple[bool, bool]:
    """(has break, has continue) belonging to this loop (not to loops nested in it)."""
    return (contains(stmts, ast.Break, into_loops=False),
            contains(stmts, ast.Continue, into_loops=False))


def always_returns(stmts: list[ast.stmt]) -> bool:
    """Does control never fall off the end of these statements?"""
    for stmt in stmts:
        if isinstance(stmt, ast.Return):
            return True
        if isinstance(stmt, ast.If) and always_returns(stmt.body) and always_returns(stmt.orelse):
            return True
        if isinstance(stmt, ast.While):
            forever = isinstance(stmt.test, ast.Constant) and bool(stmt.test.value)
            if forever and not contains(stmt.body, ast.Break, into_loops=False):
                return True
    return False


class NeedShapes(CompileError):
    """A whole-array operation met an array whose shape is not in its type; ``params``:
    the parameters whose values would make it known (the kernel may specialize on them
    where they are uniform) and ``loops``: the counters of the loops (``LoopCounter``)
    whose unrolling would make it known."""

    def __init__(self, message, loc=None, hint=None, params=()):
        super().__init__(message, loc, hint)
        self.params = tuple(p for p in params if isinstance(p, str))
        self.loops = tuple(p for p in params if not isinstance(p, str))

    def plain(self) -> CompileError:
        """This error as the user meets it, once no retry can give the shape."""
        return CompileError(self.message, self.loc, self.hint)
