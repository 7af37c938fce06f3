"""Uniform values that only mean something inside one gang (cpu backend).

Takes: a function or a region of predicated IR.  Guarantees: ``gang_local_values``
gives the ids of the uniform values a gang computes from its own lanes: ``any``
results and whatever depends on them (guarded ``if``s and loops).  Inside a native
phase each gang uses its own; ``phases`` keeps them from crossing to a later step
(where they would mean all lanes) and ``persistent`` from a refilled gang.
"""

from __future__ import annotations

from ...ir.core import Function, Region


def gang_local_values(fn: Function | Region) -> set[int]:
    """The values of the module docstring (a fixpoint over the ops that read them)."""
    dep: set[int] = set()
    changed = True
    while changed:
        changed = False
        for op in fn.walk():
            inside = [v for r in op.regions for v in r.args] + [
                v for r in op.regions for o in r.walk() for v in o.results + o.inputs()]
            if (op.opcode == "any" or any(v.id in dep for v in op.inputs())
                    or any(v.id in dep for v in inside)):
                for v in op.results + [a for r in op.regions for a in r.args]:
                    if not v.varying and v.id not in dep:
                        dep.add(v.id)
                        changed = True
    return dep
