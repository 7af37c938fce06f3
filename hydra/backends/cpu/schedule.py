"""How many threads a native phase runs with.

A thread team costs little on an idle machine (tens of microseconds) but, on a machine
whose cores other processes hold, each team start waits for a core the scheduler has
given away: a tiny kernel measured ~8 ms per call with the team against 0.02 ms on the
calling thread.  So a phase whose whole run one core finishes in well under a
millisecond never starts a team: ``threads_for`` estimates the single-core time from
the number of lanes and a per-lane cost (``lane_cost_ns``: IR ops, math functions
weighted by their vector cost) and picks one thread below ``SERIAL_BELOW_NS``.  A phase
with a loop has an unknown cost (its trip counts are known only while it runs) and
keeps the threads it was given.  The constants come from ``bench/threads_cutoff.py``
(see ``bench/RESULTS.md``), measured on one core, which a loaded machine disturbs least.
"""

from __future__ import annotations

from ...ir.core import Op
from ..cut import nested

#: single-core ns per lane of a phase's fixed work (the gang loop, loads and stores)
NS_PER_LANE = 0.25
#: single-core ns per lane of one IR op (arithmetic, compare, select, cast, load, ...)
NS_PER_OP = 0.045
#: a math function (exp, log, sin, ...) costs about this many ops (inline vector code)
MATH_OPS = 100
#: below this much single-core work a phase runs on the calling thread
SERIAL_BELOW_NS = 100_000


def lane_cost_ns(ops: list[Op]) -> float | None:
    """Estimated single-core ns per lane of ``ops``, or None where a loop makes it
    unknown.  Both arms of an ``if`` count (linearized code runs both)."""
    count = 0
    for op in (o for top in ops for o in nested(top)):
        if op.opcode == "while":
            return None
        count += MATH_OPS if op.opcode == "math" else 1
    return NS_PER_LANE + count * NS_PER_OP


def threads_for(lanes: int, threads: int, cost_ns: float | None) -> int:
    """The threads to run ``lanes`` lanes of a phase costing ``cost_ns`` per lane with,
    given ``threads`` allowed: one when the work is too small for a team to pay off."""
    if threads > 1 and cost_ns is not None and lanes * cost_ns < SERIAL_BELOW_NS:
        return 1
    return threads
