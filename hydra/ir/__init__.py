"""Hydra's IR: data structures (core), the printer and the verifier."""

from .core import OPCODES, Function, Op, OpInfo, Region, Value
from .printer import print_function
from .verifier import VerifyError, verify

__all__ = ["OPCODES", "Function", "Op", "OpInfo", "Region", "Value", "print_function",
           "verify", "VerifyError"]
