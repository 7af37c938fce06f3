"""Instrumentation for ``hydra.profile``: one lane counter per region.

Takes: a function marked by ``analyze_uniformity`` (structured: before ``linearize``).
Guarantees: the function computes what it computed; at the top of every region that
holds an op of some source line it has one ``count`` op, which adds, each time the
region runs, the number of lanes that run it (``lane_steps``), one (``issues``) and the
lanes an issue could have run (``slots``: the gang width on cpu, N on numpy) to its
row of a counters array captured by the function (a ``global_array``).  Linearize gives
each ``count`` the mask of its region, so a varying loop's body counts its active lanes
per trip, an arm of a varying ``if`` the lanes that take it.

Every op of a region runs under the region's one mask, so one counter per region
counts every line in it: per line, the counter of the region it belongs to
(``Sites.line_sites``).  A line belongs to the shallowest region holding one of its
ops, except a loop's own line, which belongs to its test (``before``: it runs once per
trip).  The test itself has no counter: every lane that runs the loop's region enters
it (the loop mask starts as that region's) and tests once more than it runs the body,
so the test's counts are the body's plus the enclosing region's (``Sites.totals``).
That is exact on every backend, also where persistent lanes re-test waiting slots at a
refill, and a loop trip pays for one counter, not two.  The plain kernel is built
without this pass: it pays nothing.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np

from ..ir.core import Function, Op, Region, Value
from ..types import INT64, ArrayType

#: the counters' columns
LANE_STEPS, ISSUES, SLOTS = 0, 1, 2


@dataclass
class Site:
    """One counted region: its kind ("body", "loop test", "loop body", "then",
    "else"), the source line of the op that owns it, its depth, and the (file, line)
    of the lines it counts, with how many ops of each it holds."""

    index: int
    kind: str
    owner: tuple[str, int] | None
    depth: int
    lines: dict[tuple[str, int], int] = field(default_factory=dict)
    #: a loop test's (body site, enclosing region's site): its counts are their sum
    derived: tuple[int, int] | None = None


@dataclass
class Sites:
    """The sites of one instrumented specialization and the counters they add into
    (shared by the predicated and the structured build of one specialization, which
    number their regions alike)."""

    sites: list[Site] = field(default_factory=list)
    counters: np.ndarray | None = None
    #: (file, line) -> the site whose counter is the line's
    line_sites: dict[tuple[str, int], int] = field(default_factory=dict)
    #: (file, line) -> how many ops of the line (all regions): a weight for estimates
    line_ops: dict[tuple[str, int], int] = field(default_factory=dict)
    #: the loops: (file, line) of each ``while``, varying or not
    loops: dict[tuple[str, int], bool] = field(default_factory=dict)
    #: (loop body site, lanes) -> each lane's trips, where the host runs the loop over
    #: all lanes (numpy; the host rule of ``count`` adds them: ``note_trips``)
    lane_trips: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)

    def snapshot(self) -> np.ndarray:
        return self.counters.copy()

    def note_trips(self, site: int, mask: np.ndarray) -> None:
        if self.sites[site].kind == "loop body":
            trips = self.lane_trips.get((site, mask.size))
            if trips is None:
                trips = self.lane_trips[(site, mask.size)] = np.zeros(mask.size, np.int64)
            trips += mask

    def totals(self, counts: np.ndarray) -> np.ndarray:
        """The counts with each loop test's filled in: its body's plus its region's
        (the deepest first: a loop's region may be an outer loop's body, never its
        test)."""
        out = counts.copy()
        for site in sorted(self.sites, key=lambda s: -s.depth):
            if site.derived is not None:
                body, parent = site.derived
                out[site.index] = out[body] + out[parent]
        return out


_STRUCTURAL = ("yield", "condition", "if", "while")


def _key(op: Op) -> tuple[str, int] | None:
    loc = op.loc
    return (loc.file, loc.line) if loc is not None and loc.line > 0 else None


def instrument(fn: Function, sites: Sites | None = None) -> Function:
    sites = sites if sites is not None else Sites()
    regions: list[tuple[Region, str, tuple | None, int]] = []
    loop_test: dict[tuple, int] = {}  # a loop's line -> index of its test region
    line_ops: dict[tuple, int] = {}

    tests: dict[int, tuple[int, int]] = {}  # test region -> (body region, its region)

    def visit(region: Region, kind: str, owner, depth: int) -> None:
        here = len(regions)
        regions.append((region, kind, owner, depth))
        for op in region.ops:
            key = _key(op)
            if key is not None and op.opcode not in _STRUCTURAL:
                line_ops[key] = line_ops.get(key, 0) + 1
            if op.opcode == "while":
                if key is not None:
                    loop_test.setdefault(key, len(regions))
                    sites.loops[key] = bool(op.regions[0].terminator.operands[0].varying)
                test = len(regions)
                visit(op.regions[0], "loop test", key, depth + 1)
                tests[test] = (len(regions), here)
                visit(op.regions[1], "loop body", key, depth + 1)
            elif op.opcode == "if":
                visit(op.regions[0], "then", key, depth + 1)
                visit(op.regions[1], "else", key, depth + 1)
    visit(fn.body, "body", None, 0)
    # each line's region: its loop test, else the shallowest region holding its ops
    home: dict[tuple, int] = dict(loop_test)
    for k, (region, _, _, depth) in enumerate(regions):
        for op in region.ops:
            key = _key(op)
            if key is None or op.opcode in _STRUCTURAL:
                continue
            if key not in home or regions[home[key]][3] > depth and key not in loop_test:
                home[key] = k
    counted = set(home.values())
    for test in counted & set(tests):
        counted |= set(tests[test])  # what a test's counts are made of
    counted = sorted(counted)
    derived = {test: (counted.index(tests[test][0]), counted.index(tests[test][1]))
               for test in counted if test in tests}
    fresh = sites.counters is None
    if fresh:
        sites.counters = np.zeros((len(counted), 3), np.int64)
        for index, k in enumerate(counted):
            _, kind, owner, depth = regions[k]
            lines = {key: line_ops.get(key, 0) for key, h in home.items() if h == k}
            sites.sites.append(Site(index, kind, owner, depth, lines, derived.get(k)))
            sites.line_sites.update((key, index) for key in lines)
        sites.line_ops = line_ops
    elif len(sites.sites) != len(counted):
        raise AssertionError("the two builds of one specialization count different regions")
    store = Value(ArrayType(INT64, 2), fn.loc, "profile", varying=False)
    fn.body.ops.insert(0, Op("global_array", [], [store], fn.loc,
                             {"array": sites.counters, "name": "hydra_profile"}))
    for index, k in enumerate(counted):
        if k in derived:
            continue
        region = regions[k][0]
        at = 1 if region is fn.body else 0
        region.ops.insert(at, Op("count", [store], [], region.ops[0].loc if region.ops
                                 else fn.loc, {"site": index}))
    fn.notes["profile"] = sites
    BY_COUNTERS[id(sites.counters)] = sites
    return fn


#: id of a counters array -> its sites (the host rule of ``count`` finds them here)
BY_COUNTERS: "weakref.WeakValueDictionary[int, Sites]" = weakref.WeakValueDictionary()
