"""Find the Python source and AST of a function: ``def``s, nested functions, lambdas,
closures, and functions defined in IPython/Jupyter cells (IPython registers each
cell's text in ``linecache``, so ``inspect`` finds it like a file's).
"""

from __future__ import annotations

import ast
import inspect
import linecache
import re
import textwrap
import types
from dataclasses import dataclass

from ..errors import CompileError, Loc


@dataclass(slots=True)
class ParsedFunction:
    """A function's AST with what the frontend needs to resolve its names."""

    pyfunc: types.FunctionType
    node: ast.FunctionDef | ast.Lambda
    filename: str
    line_offset: int  # add to an AST line number to get the file's line number
    col_offset: int

    @property
    def name(self) -> str:
        return self.pyfunc.__name__

    def loc(self, node: ast.AST) -> Loc:
        line = getattr(node, "lineno", 0)
        col = getattr(node, "col_offset", 0)
        return Loc(self.filename, line + self.line_offset if line else 0,
                   col + self.col_offset)

    def resolve_free(self, name: str):
        """A closure cell's, global's or builtin's value; raises KeyError if none."""
        fn = self.pyfunc
        code = fn.__code__
        if fn.__closure__ and name in code.co_freevars:
            cell = fn.__closure__[code.co_freevars.index(name)]
            try:
                return cell.cell_contents
            except ValueError:  # an empty cell: assigned after the function was made
                raise KeyError(name) from None
        if name in fn.__globals__:
            return fn.__globals__[name]
        builtins = fn.__globals__.get("__builtins__", __builtins__)
        if isinstance(builtins, types.ModuleType):
            builtins = vars(builtins)
        return builtins[name]


def parse_function(fn) -> ParsedFunction:
    """The ``ParsedFunction`` of a Python function; ``CompileError`` if it has no source."""
    fn = inspect.unwrap(fn)
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"hydra.compile needs a Python function, not {type(fn).__name__}")
    code = fn.__code__
    filename = code.co_filename
    node = getattr(fn, "__hydra_node__", None)
    if node is not None:  # a ``%%spmd`` cell's function, made from the cell's own AST
        return ParsedFunction(fn, node, filename, 0, 0)
    try:
        lines, first = _source_lines(fn)
    except (OSError, TypeError):
        raise CompileError(
            f"cannot find the source of {fn.__qualname__}",
            Loc(filename, code.co_firstlineno),
            hint="hydra reads the function's source: define it in a file or a notebook cell, "
                 "not with exec() or in the plain interactive interpreter",
        ) from None
    if fn.__name__ == "<lambda>":  # maybe in the middle of an expression: the file's AST
        return ParsedFunction(fn, _find_lambda(fn, lines, first), filename, 0, 0)
    block = inspect.getblock(lines[first:])
    indent = min((len(ln) - len(ln.lstrip()) for ln in block if ln.strip()), default=0)
    for node in ast.walk(ast.parse(textwrap.dedent("".join(block)))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == fn.__name__:
            if isinstance(node, ast.AsyncFunctionDef):
                raise CompileError("async functions are not supported",
                                   Loc(filename, node.lineno + first))
            return ParsedFunction(fn, node, filename, first, indent)
    raise CompileError(f"cannot find the definition of {fn.__qualname__} in its source",
                       Loc(filename, code.co_firstlineno))


_START = re.compile(r"\s*(@|def\s|async\s+def\s)|.*(?<!\w)lambda(:|\s)")


def _source_lines(fn) -> tuple[list[str], int]:
    """The lines of ``fn``'s file and the index of its first line (``inspect.findsource``,
    which first maps every loaded module to its real path: 25 ms in a fresh process
    with NumPy loaded, a tenth of a cached kernel's start-up)."""
    code = fn.__code__
    lines = linecache.getlines(code.co_filename, fn.__globals__)
    first = code.co_firstlineno - 1
    if 0 <= first < len(lines) and _START.match(lines[first]):
        return lines, first
    return inspect.findsource(code)


def _find_lambda(fn, lines: list[str], first: int) -> ast.Lambda:
    """The lambda node whose code is ``fn.__code__`` in the file it was defined in."""
    filename = fn.__code__.co_filename
    source = "".join(lines) or "".join(linecache.getlines(filename))
    tree = ast.parse(source)
    want = fn.__code__.co_firstlineno
    candidates = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and n.lineno == want]
    args = fn.__code__.co_varnames[: fn.__code__.co_argcount]
    matching = [n for n in candidates if tuple(a.arg for a in n.args.args) == args]
    if len(matching) >= 1:
        if len(matching) > 1:
            # Several lambdas on one line with the same parameters: the one whose span
            # holds the code's own columns (Python 3.11+), else the same bytecode (which
            # a closure's free names, loaded from cells, defeat: compiled alone they are
            # globals).
            inside = _spanning(matching, fn.__code__)
            if inside is not None:
                return inside
            for node in matching:
                code = compile(ast.Expression(node), filename, "eval")
                inner = next(c for c in code.co_consts if isinstance(c, types.CodeType))
                if inner.co_code == fn.__code__.co_code and inner.co_names == fn.__code__.co_names:
                    return node
        return matching[0]
    raise CompileError("cannot find the source of this lambda", Loc(filename, want))


def _spanning(nodes: list[ast.Lambda], code: types.CodeType) -> ast.Lambda | None:
    """The innermost of ``nodes`` whose source span holds every column ``code``'s
    instructions come from (``co_positions``, Python 3.11+); None where unknown."""
    positions = getattr(code, "co_positions", None)
    if positions is None:
        return None
    spans = [(line, col, end_line, end_col) for line, end_line, col, end_col in positions()
             if line is not None and col is not None and end_col is not None
             and (line, col, end_col) != (code.co_firstlineno, 0, 0)]
    if not spans:
        return None
    start, end = min((s[0], s[1]) for s in spans), max((s[2], s[3]) for s in spans)
    holding = [n for n in nodes if (n.lineno, n.col_offset) <= start
               and end <= (n.end_lineno, n.end_col_offset)]
    return max(holding, key=lambda n: (n.lineno, n.col_offset)) if holding else None

