"""Checks that need the values of the function's names, run at ``hydra.compile``.

``check_subset`` judges the syntax alone.  These checks also resolve the free names
(globals, closure cells) the function and the helpers it calls read, as they are when
``hydra.compile`` runs, so that programs that could only fail at the first call fail
at once, at the user's line:

- recursion (a call cycle through plain Python helpers, found by a depth-first walk of
  the calls whose callee a name resolves to);
- a module-level ``list``/``dict``/``set`` read by a kernel (hint: an array or a tuple);
- a string constant outside ``print()``, an ``assert`` message, a call's arguments (dtype
  names), a subscript or dict key (``p["W1"]``), a comparison (``act == "relu"``, with
  static strings) and docstrings;
- ``np.zeros(-1)`` and friends with a negative literal size.

Helpers are checked with ``check_subset`` too.  A name that does not resolve yet, or a
callee without source, is left to the builder, which reports it at the first call.
"""

from __future__ import annotations

import ast
import dataclasses
import types as pytypes

from ..errors import CompileError
from .source import ParsedFunction, parse_function
from .subset import check_subset

_CONTAINERS = {list: "a list", dict: "a dict", set: "a set"}
_LOCAL_ARRAYS = ("zeros", "ones", "empty", "full")


def check_early(parsed: ParsedFunction) -> None:
    """Raise ``CompileError`` for what the module docstring lists."""
    _visit(parsed, [parsed.pyfunc], set())


def _body(parsed: ParsedFunction):
    """Every node of the function's body (not its decorators, defaults or annotations)."""
    node = parsed.node
    for stmt in [node.body] if isinstance(node, ast.Lambda) else node.body:
        yield from ast.walk(stmt)


def _visit(parsed: ParsedFunction, stack: list, seen: set) -> None:
    code = parsed.pyfunc.__code__
    local = _locals(code)
    _check_strings(parsed)
    for node in _body(parsed):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) \
                and node.id not in local:
            value = _resolve(parsed, node.id)
            kind = _CONTAINERS.get(type(value))
            if kind:
                raise CompileError(
                    f"'{node.id}' is {kind}; kernels cannot use lists, dicts or sets",
                    parsed.loc(node), hint=f"make it a NumPy array at module level "
                    f"({node.id} = np.array({node.id}), captured when the kernel compiles), "
                    f"or a tuple")
        if not isinstance(node, ast.Call):
            continue
        callee = _callee(parsed, node.func, local)
        if _is_numpy_local_array(callee):
            _check_size(parsed, node, callee.__name__)
        callee = getattr(callee, "__hydra_kernel__", callee)
        if not isinstance(callee, pytypes.FunctionType) or callee is dataclasses.replace \
                or hasattr(callee, "__hydra_intrinsic__") \
                or hasattr(callee, "__hydra_array_op__"):  # hydra.nn.conv2d: an array op
            continue
        if callee in stack:
            raise CompileError(f"recursive call to {callee.__name__} is not supported",
                               parsed.loc(node), hint="rewrite the recursion as a loop")
        if callee in seen:
            continue
        seen.add(callee)
        try:
            inner = parse_function(callee)
        except (CompileError, TypeError):
            continue  # no source: the builder says so at the first call
        check_subset(inner)
        _visit(inner, stack + [callee], seen)


def _locals(code) -> set[str]:
    """The local names of a function and of the functions and lambdas nested in it."""
    names = set(code.co_varnames) | set(code.co_cellvars)
    for c in code.co_consts:
        if isinstance(c, pytypes.CodeType):
            names |= _locals(c)
    return names


def _resolve(parsed: ParsedFunction, name: str):
    try:
        return parsed.resolve_free(name)
    except KeyError:
        return None


def _callee(parsed: ParsedFunction, func: ast.expr, local: set):
    """What ``func`` names (``f`` or ``module.f``), or None."""
    if isinstance(func, ast.Name):
        return None if func.id in local else _resolve(parsed, func.id)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
            and func.value.id not in local:
        base = _resolve(parsed, func.value.id)
        if isinstance(base, pytypes.ModuleType):
            return getattr(base, func.attr, None)
    return None


def _is_numpy_local_array(fn) -> bool:
    return (getattr(fn, "__name__", None) in _LOCAL_ARRAYS
            and (getattr(fn, "__module__", None) or "").startswith("numpy"))


def _check_size(parsed: ParsedFunction, call: ast.Call, fname: str) -> None:
    if not call.args:
        return
    try:
        size = ast.literal_eval(call.args[0])
    except ValueError:
        return
    for d in size if isinstance(size, tuple) else (size,):
        if isinstance(d, int) and d < 0:
            raise CompileError(f"np.{fname}(): negative dimension {d}", parsed.loc(call),
                               hint="the size of a per-lane array must be >= 0")


def _check_strings(parsed: ParsedFunction) -> None:
    allowed: set[int] = set()
    body = parsed.node.body if isinstance(parsed.node, ast.FunctionDef) else []
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        allowed.add(id(body[0].value))  # the docstring
    for node in _body(parsed):
        inside = []
        if isinstance(node, ast.Call):
            inside = node.args + [k.value for k in node.keywords]
        elif isinstance(node, ast.Assert) and node.msg is not None:
            inside = [node.msg]
        elif isinstance(node, ast.AnnAssign):
            inside = [node.annotation]
        elif isinstance(node, ast.Subscript):  # p["W1"]: a dict's key
            inside = [node.slice]
        elif isinstance(node, ast.Dict):  # {"W1": W}: a dict literal's keys
            inside = [k for k in node.keys if k is not None]
        elif isinstance(node, ast.Compare):  # act == "relu", "W" in p: static strings
            inside = [node.left, *node.comparators]
        for sub in inside:
            allowed.update(id(n) for n in ast.walk(sub))
    for node in _body(parsed):
        is_text = isinstance(node, ast.JoinedStr) or (
            isinstance(node, ast.Constant) and isinstance(node.value, str))
        if is_text and id(node) not in allowed:
            raise CompileError("strings are only supported as arguments of print()",
                               parsed.loc(node),
                               hint="a kernel computes with numbers; print the text instead")
