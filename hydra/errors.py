"""Hydra's error hierarchy.

Every error a user can meet is a ``HydraError``.  Errors found while reading the
program are ``CompileError``s carrying file, line, column, the source line with a
caret and a hint.  Errors found while running keep the built-in type a Python user
would expect (``IndexError``, ``ZeroDivisionError``, ``AssertionError``) so that
``except IndexError`` still works, and add the lane and the source location.
"""

from __future__ import annotations

import linecache
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Loc:
    """A place in the user's source: file, 1-based line, 0-based column."""

    file: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    def source_line(self) -> str:
        return linecache.getline(self.file, self.line).rstrip("\n")


def _render(message: str, loc: Loc | None, hint: str | None) -> str:
    parts = [message]
    if loc is not None and loc.line > 0:
        parts[0] = f"{loc.file}:{loc.line}:{loc.col + 1}: {message}"
        text = loc.source_line()
        if text:
            parts.append("    " + text)
            parts.append("    " + " " * loc.col + "^")
    if hint:
        parts.append(f"hint: {hint}")
    return "\n".join(parts)


class HydraError(Exception):
    """Base class of every error hydra raises on its own behalf."""


class HydraWarning(UserWarning):
    """Code that compiles and runs as documented but likely not as meant (a
    read-modify-write of a shared array that lanes may race on); shown at the user's
    line when the kernel compiles."""


class CompileError(HydraError):
    """The function uses Python that hydra cannot compile, or its types conflict."""

    def __init__(self, message: str, loc: Loc | None = None, hint: str | None = None):
        self.message = message
        self.loc = loc
        self.hint = hint
        self.file = loc.file if loc else None
        self.line = loc.line if loc else None
        self.col = loc.col if loc else None
        super().__init__(_render(message, loc, hint))


class CompileOverflowError(CompileError, OverflowError):
    """A Python int constant that does not fit the NumPy type it meets: NumPy 2 raises
    ``OverflowError`` there, so ``except OverflowError`` catches this one too."""


class CompileTypeError(CompileError, TypeError):
    """A call inside a kernel that Python would refuse (a missing, unexpected or
    duplicate argument), or an operation NumPy refuses (``-`` of NumPy bools), in their
    words; ``except TypeError`` catches it too."""


class _KernelError(HydraError):
    """An error found while a kernel ran, at a lane (or None: all lanes) and a source
    location; each kind below is also the built-in error a Python user would catch."""

    def __init__(self, message: str, lane: int | None, loc: Loc | None):
        self.lane, self.loc = lane, loc
        where = f" (lane {lane})" if lane is not None else ""
        text = f"{message}{where}"
        if loc is not None and loc.line > 0:
            text = f"{loc.file}:{loc.line}: {text}"
            src = loc.source_line()
            if src:
                text += "\n    " + src.strip()
        super().__init__(text)


class KernelIndexError(_KernelError, IndexError):
    """An out-of-bounds index inside a kernel."""


class KernelZeroDivisionError(_KernelError, ZeroDivisionError):
    """Integer ``//`` or ``%`` by zero inside a kernel."""


class KernelAssertionError(_KernelError, AssertionError):
    """A failing ``assert`` inside a kernel."""


class KernelValueError(_KernelError, ValueError):
    """A run-time value error inside a kernel (e.g. ``range`` with step 0)."""


class KernelOverflowError(_KernelError, OverflowError):
    """A Python int computed in a kernel that does not fit the NumPy type it meets."""


class InactiveLaneError(_KernelError):
    """A cross-lane operation read a value from a lane that is not active."""


RUNTIME_ERRORS = {
    "index": KernelIndexError,
    "zerodiv": KernelZeroDivisionError,
    "assert": KernelAssertionError,
    "value": KernelValueError,
    "inactive": InactiveLaneError,
    "overflow": KernelOverflowError,
}
