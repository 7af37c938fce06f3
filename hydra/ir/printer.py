"""The one IR printer, used by dump-ir, the notebook magics, golden tests and errors.

Each value prints as ``%name: u type`` or ``%name: v type`` (uniform / varying;
``?`` before the uniformity pass).  Names come from the Python variables where
there is one (``%x.2`` is the third version of ``x``), masks are ``%m...``; the
numbering is per function, so the text is stable from run to run.  Every op ends
in ``; file:line`` of the source it came from, and ops that are sync points say
why.
"""

from __future__ import annotations

import os

import numpy as np

from .core import Function, Op, Region, Value


class _Names:
    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.used: dict[str, int] = {}  # name -> how many values have it ("": unnamed)

    def __call__(self, v: Value) -> str:
        if v.id not in self.names:
            n = self.used.get(v.name, 0)
            self.used[v.name] = n + 1
            self.names[v.id] = f"%{n}" if not v.name else \
                f"%{v.name}" if n == 0 else f"%{v.name}.{n}"
        return self.names[v.id]


def _mark(v: Value) -> str:
    return "?" if v.varying is None else ("v" if v.varying else "u")


def _attr(key: str, value) -> str:
    if isinstance(value, np.ndarray):
        return f"{key}=<array {value.dtype} {value.shape}>"
    return f"{key}={value!r}"


#: the label each region of an op with regions prints under (the CFG picture's too)
REGION_LABELS = {"if": ("then", "else"), "while": ("before", "do")}


class Printer:
    def __init__(self, show_loc: bool = True) -> None:
        self.names = _Names()
        self.show_loc = show_loc
        self.lines: list[str] = []

    def decl(self, v: Value) -> str:
        return f"{self.names(v)}: {_mark(v)} {v.type}"

    def function(self, fn: Function) -> str:
        params = ", ".join(self.decl(p) for p in fn.params)
        self.lines.append(f"func {fn.name}({params}) {{")
        self.region_body(fn.body, 1)
        self.lines.append("}")
        return "\n".join(self.lines) + "\n"

    def region_body(self, region: Region, depth: int) -> None:
        for op in region.ops:
            self.op(op, depth)

    def header(self, op: Op) -> str:
        """The op's own line: results, opcode, attributes, operands, mask, sync, loc."""
        lhs = ", ".join(self.decl(r) for r in op.results)
        lhs = f"{lhs} = " if lhs else ""
        args = ", ".join(self.names(v) for v in op.operands)
        attrs = [
            _attr(k, v) for k, v in op.attrs.items()
            if k not in ("sync", "array") and not k.startswith("_")
        ]
        text = f"{lhs}{op.opcode}"
        if attrs:
            text += "[" + ", ".join(attrs) + "]"
        if args:
            text += f" {args}"
        if op.mask is not None:
            text += f" if {self.names(op.mask)}"
        if op.attrs.get("sync"):
            text += f"  !sync({op.attrs['sync']})"
        if self.show_loc and op.loc.line > 0:
            text += f"  ; {os.path.basename(op.loc.file)}:{op.loc.line}"
        return text

    def op(self, op: Op, depth: int) -> None:
        pad = "  " * depth
        self.lines.append(pad + self.header(op) + (" {" if op.regions else ""))
        if op.regions:
            for region, label in zip(op.regions, REGION_LABELS[op.opcode]):
                args = ", ".join(self.decl(a) for a in region.args)
                self.lines.append(f"{pad}  {label}({args}):" if args else f"{pad}  {label}:")
                self.region_body(region, depth + 2)
            self.lines.append(pad + "}")


def print_function(fn: Function, show_loc: bool = True) -> str:
    """The text of a function, the same for every tool."""
    return Printer(show_loc).function(fn)
