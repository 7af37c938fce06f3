"""The supported Python subset (SPEC section 5) as one visible table.

``STATEMENTS`` and ``EXPRESSIONS`` map each supported AST node type to the
builder method that translates it; ``PARTS`` are the node types that only occur
inside those (operators, contexts, arguments).  ``check_subset`` runs when
``hydra.compile`` is called, so unsupported syntax is reported at once, at the
user's line, before any call.
"""

from __future__ import annotations

import ast

from ..errors import CompileError
from .source import ParsedFunction

STATEMENTS: dict[type[ast.AST], str] = {
    ast.Assign: "stmt_assign",
    ast.AugAssign: "stmt_augassign",
    ast.AnnAssign: "stmt_annassign",
    ast.If: "stmt_if",
    ast.While: "stmt_while",
    ast.For: "stmt_for",
    ast.Break: "stmt_break",
    ast.Continue: "stmt_continue",
    ast.Return: "stmt_return",
    ast.Pass: "stmt_pass",
    ast.Expr: "stmt_expr",
    ast.Assert: "stmt_assert",
}

EXPRESSIONS: dict[type[ast.AST], str] = {
    ast.Constant: "expr_constant",
    ast.Name: "expr_name",
    ast.BinOp: "expr_binop",
    ast.UnaryOp: "expr_unaryop",
    ast.BoolOp: "expr_boolop",
    ast.Compare: "expr_compare",
    ast.IfExp: "expr_ifexp",
    ast.Call: "expr_call",
    ast.Subscript: "expr_subscript",
    ast.Attribute: "expr_attribute",
    ast.Tuple: "expr_tuple",
    ast.JoinedStr: "expr_joinedstr",  # f-strings, inside print() only
    ast.FormattedValue: "expr_joinedstr",
    ast.Slice: "expr_slice",  # in an index only (per-lane arrays, SPEC section 8)
}

PARTS: tuple[type[ast.AST], ...] = (
    ast.operator, ast.unaryop, ast.boolop, ast.cmpop, ast.expr_context,
    ast.arguments, ast.arg, ast.keyword,
)

_NAMES = {
    ast.Try: "try/except", ast.With: "with", ast.ClassDef: "class definitions",
    ast.Yield: "yield", ast.YieldFrom: "yield from", ast.Await: "await",
    ast.Lambda: "lambda inside a kernel", ast.ListComp: "list comprehensions",
    ast.List: "lists", ast.Dict: "dicts", ast.Set: "sets", ast.DictComp: "dict comprehensions",
    ast.SetComp: "set comprehensions", ast.GeneratorExp: "generator expressions",
    ast.Global: "global", ast.Nonlocal: "nonlocal", ast.Import: "import",
    ast.ImportFrom: "import", ast.Delete: "del", ast.Raise: "raise",
    ast.NamedExpr: "the walrus operator :=", ast.Starred: "*args unpacking",
    ast.FunctionDef: "nested function definitions inside a kernel",
    ast.Slice: "slices", ast.Match: "match", ast.AsyncFor: "async for",
}


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
        _check(fn, stmt, top=not isinstance(node, ast.Lambda))


def _check(fn: ParsedFunction, node: ast.AST, top: bool) -> None:
    kind = type(node)
    if isinstance(node, ast.stmt):
        if kind not in STATEMENTS:
            raise CompileError(not_supported(node),
                               fn.loc(node), hint=_hint(node))
        if isinstance(node, (ast.For, ast.While)) and node.orelse:
            raise CompileError("else: after a loop is not supported", fn.loc(node.orelse[0]),
                               hint="use a flag variable set before break")
    elif isinstance(node, ast.expr):
        if kind not in EXPRESSIONS:
            raise CompileError(not_supported(node),
                               fn.loc(node), hint=_hint(node))
    elif not isinstance(node, PARTS) and kind not in (ast.comprehension,):
        raise CompileError(not_supported(node), fn.loc(node))
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.List) and _takes_lists(node):
            # np.concatenate([a, b]), axis=[0, 1], np.pad(a, [(1, 1)]), a[[0, 2]]: a
            # list as an argument or an index is fine (nested lists too)
            _check_list(fn, child, top)
            continue
        if isinstance(node, ast.Subscript) and child is node.slice \
                and isinstance(child, ast.Tuple):  # a[[0, 2], 1:]
            for elt in child.elts:
                (_check_list if isinstance(elt, ast.List) else _check)(fn, elt, top)
            continue
        _check(fn, child, top)


def _takes_lists(node: ast.AST) -> bool:
    """A list is an argument of a call (a keyword's value) or an index (a[[0, 2]])."""
    return isinstance(node, (ast.Call, ast.keyword, ast.Subscript))


def _check_list(fn: ParsedFunction, node: ast.List, top: bool) -> None:
    for elt in node.elts:
        if isinstance(elt, ast.List):
            _check_list(fn, elt, top)
        else:
            _check(fn, elt, top)


def _hint(node: ast.AST) -> str | None:
    if isinstance(node, (ast.List, ast.ListComp)):
        return "use a tuple, or np.zeros(k) for a per-lane array"
    if isinstance(node, ast.Try):
        return "kernels cannot catch exceptions; check the condition with if instead"
    if isinstance(node, ast.FunctionDef):
        return "define helper functions outside the kernel; hydra inlines calls to them"
    return None

