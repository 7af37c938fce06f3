"""The frontend: Python source -> AST -> typed structured SSA."""

from .builder import build_function
from .source import ParsedFunction, parse_function
from .subset import EXPRESSIONS, STATEMENTS, check_subset

__all__ = ["build_function", "parse_function", "ParsedFunction", "check_subset",
           "STATEMENTS", "EXPRESSIONS"]
