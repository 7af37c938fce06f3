"""LLVM functions called from Python with NumPy arrays: their wrappers, compiled and loaded.

Takes: an LLVM function's text (the cpu backend's phase kernels: ``codegen``), the
vector-math modules it calls, its symbol, and what each parameter is: "scalar" (passed
as is), "buf" (a NumPy array: its data pointer) or "array" (its data pointer, then its
shape and strides: the parameters named ``<data>.s<k>`` that follow).
Guarantees: ``load(key, ...)`` returns a ctypes function over the same arguments, with
arrays as Python objects, that runs the function with the GIL released: a small
generated wrapper, ``@<symbol>_call``, reads each array's data pointer, shape and
strides from NumPy's array struct (``PyArrayObject_fields``: ``DATA``, ``DIMS``,
``STRIDES``), so a call costs what numba's dispatcher cost (reading ``arr.ctypes.data``
in Python costs 0.75 us per array).  The function and its wrapper are one object file
(``engine.optimize``'s pipeline), loaded by ``engine.load_native`` under ``key``: once
per process, from the disk cache with ``cache``.  ``BUILT`` lists the symbols this
process compiled (a cache hit compiles none).
"""

from __future__ import annotations

import ctypes
import re

import llvmlite.binding as llvm

from ...progress import stage
from . import engine

#: the symbols of the functions this process compiled (a cache hit compiles none)
BUILT: list[str] = []
_CTYPES = {"double": ctypes.c_double, "float": ctypes.c_float, "i64": ctypes.c_int64,
           "i32": ctypes.c_int32, "i16": ctypes.c_int16, "i8": ctypes.c_int8}
#: NumPy's ``PyArrayObject_fields``: byte offsets of data, dimensions, strides
DATA, DIMS, STRIDES = 16, 32, 40
#: the one helper a wrapper reads the array struct with (inlined away)
FIELD = """
define internal ptr @hydra_field(ptr %obj, i64 %off) alwaysinline {
  %p = getelementptr i8, ptr %obj, i64 %off
  %v = load ptr, ptr %p
  ret ptr %v
}
"""


def array_fields(arg: str, nd: int) -> tuple[list[str], list[str], list[str]]:
    """(the wrapper's lines that read the ``PyArrayObject*`` ``%<arg>``: its data pointer
    ``%<arg>.d``, then its ``nd`` extents and strides; the extents' and strides' i64
    operands)."""
    body = [f"  %{arg}.d = call ptr @hydra_field(ptr %{arg}, i64 {DATA})"]
    fields = {}
    for f, off in (("s", DIMS), ("t", STRIDES)):
        body.append(f"  %{arg}.{f} = call ptr @hydra_field(ptr %{arg}, i64 {off})")
        for k in range(nd):
            body.append(f"  %{arg}.{f}{k}.p = getelementptr i64, ptr %{arg}.{f}, i64 {k}")
            body.append(f"  %{arg}.{f}{k} = load i64, ptr %{arg}.{f}{k}.p")
        fields[f] = [f"i64 %{arg}.{f}{k}" for k in range(nd)]
    return body, fields["s"], fields["t"]


class _Param:
    def __init__(self, text: str) -> None:
        self.type, name = text.rsplit(" ", 1)
        self.name = name.lstrip("%")


def wrapper(text: str, symbol: str, kinds: list[str]) -> tuple[str, list]:
    """The LLVM text of ``@<symbol>_call`` (see the module docstring) and its ctypes
    argument types, from the function's signature in its LLVM ``text``."""
    head = re.search(rf"^define void @{symbol}\((.*)\)", text, re.M)
    params = [_Param(p) for p in head.group(1).split(", ")]
    rest = params
    sig, body, call, argtypes = [], [], [], []
    for kind in kinds:  # the wrapper's parameters keep the function's names
        first, rest = rest[0], rest[1:]
        if kind == "scalar":
            sig.append(f"{first.type} %{first.name}")
            argtypes.append(_CTYPES[first.type])
            call.append(f"{first.type} %{first.name}")
            continue
        sig.append(f"ptr %{first.name}")
        argtypes.append(ctypes.py_object)
        nd = sum(1 for p in rest if p.name.startswith(f"{first.name}.s")) \
            if kind == "array" else 0
        lines, shape, strides = array_fields(first.name, nd)
        body += lines if nd else lines[:1]
        call += [f"ptr %{first.name}.d", *shape, *strides]
        rest = rest[2 * nd:]
    assert not rest and len(call) == len(params), (symbol, kinds)
    types = ", ".join(p.type for p in params)
    text = f"""{FIELD}
define void @{symbol}_call({", ".join(sig)}) {{
{chr(10).join(body)}
  call void @{symbol}({", ".join(call)})
  ret void
}}

declare void @{symbol}({types})
"""
    return text, argtypes


def compile_object(text: str, modules: list[str], symbol: str, kinds: list[str]) -> bytes:
    """The object file of the function and its wrapper (``build`` of ``load_native``:
    the caller holds the compile lock)."""
    stage(f"LLVM: optimizing and compiling the kernel ({text.count(chr(10))} lines of "
          f"LLVM IR) to machine code")
    mod = engine.kernel_module(text, modules, symbol)
    # the function stays one function (not inlined into its wrapper): its machine code
    # is its alone, as ``dump-ir asm`` shows it
    mod.get_function(symbol).add_function_attribute("noinline")
    mod.link_in(llvm.parse_assembly(wrapper(text, symbol, kinds)[0]))
    mod.verify()
    mod = engine.optimize(mod)
    BUILT.append(symbol)
    return engine.target()[0].emit_object(mod)


def load(key: str, text: str, modules: list[str], symbol: str, kinds: list[str],
         cache: bool):
    """The function's ctypes function (see the module docstring), compiled or loaded
    from the disk cache once per process."""
    return engine.load_native(key, f"{symbol}_call", wrapper(text, symbol, kinds)[1],
                              lambda: (compile_object(text, modules, symbol, kinds), True),
                              cache)
