"""The supported Python subset (SPEC section 5) as one visible table.

``SHOWN`` lists each supported AST node type as the guide shows it; ``STATEMENTS`` and
``EXPRESSIONS`` map each to the builder method that translates it; ``PARTS`` are the
node types that only occur inside those (operators, contexts, arguments).
``check_subset`` runs when ``hydra.compile`` is called, so unsupported syntax is
reported at once, at the user's line, before any call.
"""

from __future__ import annotations

import ast

from ..errors import CompileError
from .source import ParsedFunction

#: each supported construct as the guide's generated table shows it (docs/regen.py)
SHOWN: dict[type[ast.AST], str] = {
    ast.Assign: "`x = e`, `a, b = t`, `a[i] = v`, `a[i:j] = v` (containers are read-only)",
    ast.AugAssign: "`x += e` and the other operators, also `a[i] += v`",
    ast.AnnAssign: "`x: np.float32 = e` (the annotation converts)",
    ast.If: "`if`/`elif`/`else` (uniform: a branch; varying: masks; static: one arm)",
    ast.While: "`while` (no `else:`)",
    ast.For: "`for i in range(...)`, `for row in a`, `for x in container` (unrolled), "
             "`enumerate`, `zip`",
    ast.Break: "`break`", ast.Continue: "`continue`", ast.Return: "`return` anywhere",
    ast.Pass: "`pass`", ast.Expr: "a call for its effect, a docstring",
    ast.Assert: "`assert c, \"message\"` (fails naming the lane)",
    ast.FunctionDef: "a nested `def` (inlined where called; reads the enclosing variables)",
    ast.Constant: "numbers, `True`/`False`, `None`, strings (static: print, keys, `==`)",
    ast.Name: "variables, parameters, module constants and arrays, closures",
    ast.BinOp: "arithmetic and bit operators, `@`, `t + t` of tuples",
    ast.UnaryOp: "`-x`, `+x`, `~x`, `not x`",
    ast.BoolOp: "`and`/`or` with per-lane short circuit",
    ast.Compare: "comparisons (chained), `in`/`not in` a tuple or dict, `is None`",
    ast.IfExp: "`a if c else b`",
    ast.Call: "helpers, builtins, `math`/`np` functions, intrinsics, dataclass and "
              "namedtuple classes",
    ast.Subscript: "`a[i, j]`, `a[i:j]`, `t[0]`, `p[\"key\"]`",
    ast.Attribute: "`a.shape`, `m.field`, `np.sqrt`, `p.items()`",
    ast.Tuple: "tuples: build, unpack, return",
    ast.JoinedStr: "f-strings, inside `print()`", ast.FormattedValue: "`{x:.3f}` in an f-string",
    ast.Slice: "`i:j:k` in an index",
    ast.List: "lists: `[a, b]` (read-only), `np.stack([a, b])`",
    ast.Dict: "dicts with string keys: `{\"W\": W}`, `{**p, \"W\": W}`",
    ast.Lambda: "`lambda` (inlined where called)",
    ast.GeneratorExp: "`sum(e for i in range(n))` (the argument of `sum` only)",
}
#: the builder methods not named stmt_<node> or expr_<node> (``ast.If``: ``stmt_if``)
_METHODS = {ast.FunctionDef: "stmt_def", ast.FormattedValue: "expr_joinedstr",
            ast.GeneratorExp: "expr_genexp"}
STATEMENTS: dict[type[ast.AST], str] = {
    k: _METHODS.get(k, f"stmt_{k.__name__.lower()}") for k in SHOWN if issubclass(k, ast.stmt)}
EXPRESSIONS: dict[type[ast.AST], str] = {
    k: _METHODS.get(k, f"expr_{k.__name__.lower()}") for k in SHOWN if issubclass(k, ast.expr)}

PARTS: tuple[type[ast.AST], ...] = (
    ast.operator, ast.unaryop, ast.boolop, ast.cmpop, ast.expr_context,
    ast.arguments, ast.arg, ast.keyword,
)

_NAMES = {
    ast.Try: "try/except", ast.With: "with", ast.ClassDef: "class definitions",
    ast.Yield: "yield", ast.YieldFrom: "yield from", ast.Await: "await",
    ast.ListComp: "list comprehensions", ast.Set: "sets", ast.DictComp: "dict comprehensions",
    ast.SetComp: "set comprehensions", ast.Global: "global", ast.Nonlocal: "nonlocal",
    ast.Import: "import", ast.ImportFrom: "import", ast.Delete: "del", ast.Raise: "raise",
    ast.NamedExpr: "the walrus operator :=", ast.Starred: "*args unpacking",
    ast.Match: "match", ast.AsyncFor: "async for",
}


def refused() -> list[str]:
    """The constructs with a name of their own that the subset refuses (for the guide)."""
    return sorted(set(_NAMES.values()))


def describe(node: ast.AST) -> str:
    return _NAMES.get(type(node), type(node).__name__)


def not_supported(node: ast.AST) -> str:
    """'lists are not supported ...', 'with is not supported ...'."""
    what = describe(node)
    verb = "are" if what.split()[-1].endswith("s") else "is"
    return f"{what} {verb} not supported in hydra kernels"


def check_subset(fn: ParsedFunction) -> None:
    """Raise ``CompileError`` at the first construct outside the supported subset."""
    node = fn.node
    args = node.args
    if args.vararg or args.kwarg:
        raise CompileError("*args and **kwargs parameters are not supported", fn.loc(node),
                           hint="name every parameter (defaults and keyword-only ones are "
                                "fine)")
    body = [node.body] if isinstance(node, ast.Lambda) else node.body
    for stmt in body:
        _check(fn, stmt)


def _check(fn: ParsedFunction, node: ast.AST) -> None:
    # SHOWN holds statements and expressions only: another node is refused unless a part
    if type(node) not in SHOWN and not isinstance(node, (*PARTS, ast.comprehension)):
        raise CompileError(not_supported(node), fn.loc(node), hint=_hint(node))
    if isinstance(node, (ast.For, ast.While)) and node.orelse:
        raise CompileError("else: after a loop is not supported", fn.loc(node.orelse[0]),
                           hint="use a flag variable set before break")
    for child in ast.iter_child_nodes(node):
        _check(fn, child)


def _hint(node: ast.AST) -> str | None:
    if isinstance(node, ast.ListComp):
        return "use a tuple, a for loop, or np.zeros(k) for a per-lane array"
    if isinstance(node, ast.Try):
        return "kernels cannot catch exceptions; check the condition with if instead"
    if isinstance(node, ast.Nonlocal):
        return "a nested function cannot assign the enclosing function's variables; " \
               "return the value instead"
    return None

