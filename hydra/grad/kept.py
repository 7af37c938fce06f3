"""The products a differentiated loop keeps on the tape (``hydra.grad.transform``).

Takes: a loop body being recorded (``products``), and the differentiated function once
its reverse is emitted (``read_kept``).
Guarantees: a product (``W @ h``, a convolution) at the top level of a loop body whose
result the reverse sweep reads (``np.maximum(W @ h, 0)``'s adjoint reads ``W @ h``;
``np.tanh``'s reads only its own result) is pushed by the forward trip on a tape of its
own and popped by the reverse trip instead of computed again: a product costs as much
as each of its adjoint's two, and its result is one row per lane-trip, as the loop
state is.  The reverse's replay stands for it as an ``undef`` marked ``kept`` until
``read_kept``, so that ``prune`` first drops it with the replayed values only it fed;
the marks that survive become ``tape_pop``s and the pushes nothing pops go.
"""

from __future__ import annotations

from ..ir.core import HEAVY_ARRAY_FNS, Function, Region
from .analysis import prune


def products(body: Region, useful: set) -> list:
    """The products at the top level of ``body`` that the differentiated value needs."""
    return [o for o in body.ops[:-1] if o.opcode == "array" and o.attrs["fn"] in
            HEAVY_ARRAY_FNS and any(r.id in useful for r in o.results)]


def read_kept(fn: Function, kept: set) -> None:
    """Turn the surviving ``kept`` marks of ``fn`` into pops of their tapes and drop the
    pushes of the tapes in ``kept`` that nothing pops (see the module docstring)."""
    if not kept:
        return
    prune(fn)
    popped = set()
    for op in fn.walk():
        if op.opcode == "undef" and "kept" in op.attrs:
            op.opcode, op.attrs = "tape_pop", {"tape": op.attrs["kept"]}
            popped.add(op.attrs["tape"])
    for region in [fn.body] + [r for o in fn.walk() for r in o.regions]:
        region.ops = [o for o in region.ops if not (
            o.opcode == "tape_push" and o.attrs["tape"] in kept - popped)]
