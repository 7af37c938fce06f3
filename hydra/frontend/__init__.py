"""The frontend: Python source -> AST -> typed structured SSA."""

from .build import build_function, build_specialized
from .source import ParsedFunction, parse_function
from .subset import EXPRESSIONS, STATEMENTS, check_subset

__all__ = ["build_function", "build_specialized", "parse_function", "ParsedFunction",
           "check_subset", "STATEMENTS", "EXPRESSIONS"]
