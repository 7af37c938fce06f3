"""How many vectors of 32-bit lanes a gang holds (its independent chains), per kernel.

Each op of a gang is emitted once per part (``vectors``), so a gang of K vectors gives
the core K independent dependency chains.  A loop whose trips are one long chain (the
mandelbrot recurrence: multiply, subtract, add, ~9 cycles a trip) runs at the latency of
that chain unless enough chains are in flight: hand-written AVX-512 code uses 3, and
hydra measured 1.25x faster with 4 than with 2 on mandelbrot.  More chains cost
registers: every varying value live in the loop takes K vector registers (K x 2 for
64-bit elements), and every mask K k registers (of the 7 usable).  Measured on one
core (bench/RESULTS.md, "Issue 15b"): with 4, collatz (int64) ran 1.28x, aobench
(float64, many live values) 1.12x and mc-pi-block (int64) 1.2x slower than with 2;
float32 loops with 7 live values ran 1.33x faster with 4, with 9 live values 1.12x
faster with 3 but 1.28x slower with 4, with 13 live values 1.47x slower with 3.

``gang_vectors(fn, vbits)`` decides: 4 (or 3) where the extra chains hide latency and
fit (AVX-512, elements of at most 32 bits so a mask is one k register per vector, a
varying loop, and K x the loop's live varying values at most 28 of the 32 vector
registers); 2 otherwise, which was the measured best of the loop-free and the 64-bit
kernels.  ``HYDRA_CPU_GANG_VECTORS`` overrides it for every kernel.
"""

from __future__ import annotations

import os

from ...ir.core import Function, Op, Value
from ...types import ScalarType

#: of the 32 vector registers, those the loop's long-lived values may take (the rest
#: hold the trip's temporaries and constants): measured, see the docstring
_LIVE_REGISTERS = 28
DEFAULT = 2


def _counted(v: Value) -> bool:
    return v.varying and isinstance(v.type, ScalarType) and v.type.name != "bool"


def loop_live_values(op: Op) -> int:
    """Varying non-mask values a varying ``while`` keeps live across its trips: what it
    carries and what its regions read from outside it."""
    inner: set[int] = {a.id for r in op.regions for a in r.args}
    used: set[int] = set()
    for r in op.regions:
        for o in r.walk():
            inner.update(x.id for x in o.results)
            inner.update(a.id for rr in o.regions for a in rr.args)
            used.update(x.id for x in o.operands if _counted(x))
    carried = [a for a in op.regions[0].args if _counted(a)]
    return len(carried) + len(used - inner)


def gang_vectors(fn: Function | None, vbits: int) -> int:
    """K for ``fn`` (see the module docstring)."""
    forced = os.environ.get("HYDRA_CPU_GANG_VECTORS")
    if forced:
        return int(forced)
    if fn is None or vbits != 512:
        return DEFAULT
    ops = list(fn.walk())
    values = [*fn.params, *(r for op in ops for r in op.results)]
    widest = max([v.type.bits for v in values if _counted(v)], default=0)
    loops = [op for op in ops if op.opcode == "while" and op.attrs.get("varying")]
    if widest > 32 or not loops:
        return DEFAULT
    live = max(loop_live_values(op) for op in loops)
    for k in (4, 3):
        if live * k <= _LIVE_REGISTERS:
            return k
    return DEFAULT
