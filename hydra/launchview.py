"""The launch graph: recent launches, their dependencies and timings, as a picture.

``hydra.launch_graph()`` takes a snapshot of the launches ``hydra.dataflow`` keeps
(the last ``HYDRA_LAUNCH_HISTORY``, 200 by default) and draws it as SVG, with the
drawing helpers of ``irview``: one row per launch in submission order, time running
left to right; a thin bar while a launch waits (for its dependencies or for cores), a
thick one while it runs (red if it failed, hatched outline if it never ran); arrows
from each dependency's end to the dependant's start, labelled with why (``future``,
``RAW``, ``WAR``, ``WAW``).  A notebook shows it inline (``_repr_svg_``);
``.save(path)`` writes the file; ``repr`` is a text table.
"""

from __future__ import annotations

import html
import os
import time
from dataclasses import dataclass

from .irview import svg_open, svg_rect, svg_text

_ROW, _LABEL, _PLOT = 22, 250, 640
_BACKEND_COLOR = {"cpu": "#4a7bd0", "numpy": "#4aa36c", "cuda": "#8a5cc2"}
_EDGE_COLOR = {"future": "#333", "RAW": "#c0392b", "WAR": "#e08a1e", "WAW": "#7a2a9a"}


@dataclass(frozen=True)
class LaunchRecord:
    """One launch as the graph shows it (times in seconds since the first submit)."""

    id: int
    name: str
    backend: str
    where: str
    submitted: float
    started: float | None
    finished: float | None
    deps: tuple[tuple[int, str], ...]
    status: str  # "ok", "failed", "did not run", "running", "waiting"
    error: str

    @property
    def seconds(self) -> float | None:
        if self.started is None or self.finished is None:
            return None
        return self.finished - self.started


class LaunchGraph:
    """A snapshot of recent launches; shows itself as SVG in a notebook."""

    def __init__(self, records: list[LaunchRecord]) -> None:
        self.records = records

    @classmethod
    def recent(cls, last: int | None = None) -> "LaunchGraph":
        """The last ``last`` launches (all that are kept by default)."""
        from .dataflow import history
        launches = history()
        if last is not None:
            launches = launches[-last:] if last > 0 else []
        now = time.perf_counter()
        t0 = min((x.submitted for x in launches), default=now)
        records = []
        for x in launches:
            started, finished, error = x.started, x.finished, x.error
            if finished is None:
                status = "running" if started is not None else "waiting"
            elif error is None:
                status = "ok"
            else:
                status = "failed" if started is not None else "did not run"
            records.append(LaunchRecord(
                x.id, x.name, x.backend, x.where, x.submitted - t0,
                None if started is None else started - t0,
                None if finished is None else finished - t0,
                x.dep_ids, status,
                "" if error is None else f"{type(error).__name__}: {error}"))
        return cls(records)

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        lines = [f"<hydra.LaunchGraph of {len(self.records)} launch(es)>"]
        for r in self.records:
            deps = ", ".join(f"#{i} {why}" for i, why in r.deps) or "-"
            took = "" if r.seconds is None else f"{r.seconds * 1e3:.2f} ms"
            lines.append(f"  #{r.id:<5} {r.name:16} {r.backend:5} {r.status:11} {took:>10}  "
                         f"after: {deps}")
        return "\n".join(lines)

    def _repr_svg_(self) -> str:
        return self.svg()

    def save(self, path) -> None:
        """Write the picture to ``path``, an ``.svg`` file: the picture is SVG, and
        another suffix (``g.png``) would give a file that is not what its name says."""
        suffix = os.path.splitext(os.fspath(path))[1]
        if suffix.lower() != ".svg":
            raise ValueError(f"LaunchGraph.save writes SVG: give a path ending in .svg, not "
                             f"{suffix or 'one without a suffix'} ({os.fspath(path)!r})")
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.svg())

    def svg(self) -> str:
        """The picture (see the module docstring)."""
        recs = self.records
        rows = {r.id: i for i, r in enumerate(recs)}
        end = max([r.finished or r.started or r.submitted for r in recs] + [1e-6])
        scale = _PLOT / end

        def x(t: float) -> float:
            return round(_LABEL + t * scale, 1)

        def y(i: int) -> float:
            return 30 + i * _ROW

        width, height = _LABEL + _PLOT + 90, 30 + len(recs) * _ROW + 30
        parts = [svg_open(width, height),
                 '<defs><marker id="hydra-arrow" viewBox="0 0 6 6" refX="6" refY="3" '
                 'markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0 L6,3 L0,6 z" '
                 'fill="#555"/></marker></defs>',
                 svg_text(8, 16, f"{len(recs)} launch(es), {end * 1e3:.2f} ms from the first "
                          "submit", "#222", bold=True)]
        for i, r in enumerate(recs):
            top = y(i)
            parts.append("<g>" + (f"<title>{html.escape(r.error)}</title>" if r.error else ""))
            label = f"#{r.id} {r.name} [{r.backend}{', ' + r.where if r.where else ''}]"
            parts.append(svg_text(8, top + 14, label[:40], "#222"))
            wait_end = r.started if r.started is not None else (r.finished or end)
            parts.append(svg_rect(x(r.submitted), top + 9, max(x(wait_end) - x(r.submitted), 1),
                                  3, "#ccc", "#ccc", rx=1))
            if r.started is not None:
                color = "#c0392b" if r.status == "failed" else _BACKEND_COLOR.get(r.backend,
                                                                                  "#777")
                stop = r.finished if r.finished is not None else end
                parts.append(svg_rect(x(r.started), top + 3, max(x(stop) - x(r.started), 2),
                                      15, color, color, rx=2))
                took = f"{(stop - r.started) * 1e3:.2f} ms"
                parts.append(svg_text(x(stop) + 4, top + 14, took, "#555"))
            elif r.status == "did not run":
                parts.append(svg_rect(x(r.finished), top + 3, 8, 15, "#fff", "#c0392b", rx=2))
            for dep, why in r.deps:
                if dep not in rows:
                    continue  # older than the history kept
                d = recs[rows[dep]]
                x1 = x(d.finished if d.finished is not None else end)
                x2 = x(r.started if r.started is not None else (r.finished or end))
                y1, y2 = y(rows[dep]) + 18, top + 3
                color = _EDGE_COLOR.get(why, "#555")
                parts.append(f'<path d="M{x1},{y1} C{x1 + 12},{y1} {x2 - 12},{y2} {x2},{y2}" '
                             f'fill="none" stroke="{color}" stroke-width="1.2" '
                             f'marker-end="url(#hydra-arrow)"/>')
                parts.append(svg_text(x2 - 3, y2 - 1, why, color, end=True))
            parts.append("</g>")
        axis = 30 + len(recs) * _ROW + 14
        for k in range(5):
            t = end * k / 4
            parts.append(svg_text(x(t), axis, f"{t * 1e3:.1f} ms", "#777"))
        parts.append("</svg>")
        return "\n".join(parts)
