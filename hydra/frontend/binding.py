"""Binding call arguments to parameters exactly as Python does.

A kernel (at its call) and a helper it calls (at compile time) take positional and
keyword arguments and default parameter values.  Rather than re-implementing Python's
rules, ``binder(fn)`` makes a function with ``fn``'s parameters (names, kinds,
defaults) whose body returns them in order; calling it binds the arguments as Python
would, and a bad call raises Python's own ``TypeError`` in Python's own words
("f() missing 1 required positional argument: 'x'").
"""

from __future__ import annotations

import ast
import types


class Default:
    """A parameter's default value, marked so that the caller can tell it from an
    argument that was passed (a helper's defaults become constants)."""

    __slots__ = ("value",)

    def __init__(self, value) -> None:
        self.value = value


def parameter_names(node: ast.FunctionDef | ast.Lambda) -> list[str]:
    """Every parameter's name, in the order ``binder`` returns their values."""
    a = node.args
    return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]


def binder(fn: types.FunctionType, mark_defaults: bool = False):
    """A function that takes ``fn``'s arguments and returns the tuple of its parameter
    values in ``parameter_names`` order (defaults filled in, as ``Default`` objects
    with ``mark_defaults``)."""
    code = fn.__code__
    n_pos, n_kw = code.co_argcount, code.co_kwonlyargcount
    names = code.co_varnames[:n_pos + n_kw]
    pieces = list(names[:n_pos])
    if code.co_posonlyargcount:
        pieces.insert(code.co_posonlyargcount, "/")
    if n_kw:
        pieces.append("*")
        pieces += names[n_pos:]
    source = (f"def binder({', '.join(pieces)}):\n"
              f"    return ({''.join(n + ', ' for n in names)})\n")
    scope: dict = {}
    exec(compile(source, "<hydra binder>", "exec"), scope)  # noqa: S102 - names only
    bind = scope["binder"]
    names_of = {"co_name": code.co_name}
    if hasattr(code, "co_qualname"):  # Python 3.11+ words its errors with it
        names_of["co_qualname"] = code.co_qualname
    bind.__code__ = bind.__code__.replace(**names_of)
    bind.__name__, bind.__qualname__ = fn.__name__, fn.__qualname__
    defaults, kwdefaults = fn.__defaults__, fn.__kwdefaults__
    if mark_defaults:
        defaults = defaults and tuple(Default(v) for v in defaults)
        kwdefaults = kwdefaults and {k: Default(v) for k, v in kwdefaults.items()}
    bind.__defaults__, bind.__kwdefaults__ = defaults, kwdefaults
    return bind
