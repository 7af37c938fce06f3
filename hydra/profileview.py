"""The views of a ``hydra.Profile``: a terminal table, an HTML report and a Chrome trace.

- ``table(p)``: per kernel, its hottest lines (time, utilization, lane steps, issues x
  width), the steps it ran (native phases, host steps, fused chains, GEMMs,
  compactions: how many, how long) and the advice.
- ``html_report(p)``: one self-contained page (no script, no external resource): per
  kernel its source, every line shaded by its share of the time and marked with its
  utilization, the phases and host steps as a timeline, and the predicated control
  flow graph ``%hydra_ir`` draws (``irview.cfg_svg``).
- ``trace_events(p)``: the Chrome trace event format (JSON object with
  ``traceEvents``; what PyTorch's profiler exports, Perfetto opens): complete events
  (``X``) for kernel runs, native phases, host steps and GEMMs on the threads that ran
  them, instants (``i``) for compaction gathers and shrinks, the profile itself as a
  ``B``/``E`` pair, the launches on a track of their own with their dependencies as flow
  events (``s`` at the dependency's end, ``f`` at the dependant's start).
"""

from __future__ import annotations

import html
import os

from .irview import cfg_svg, svg_open, svg_rect, svg_text

_COLORS = {"phase": "#4a7bd0", "step": "#4aa36c", "host": "#e08a1e", "gemm": "#8a5cc2",
           "kernel": "#999999"}


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


def _pct(x) -> str:
    return "-" if x is None else f"{x:.0%}"


def _steps(p) -> list[tuple[str, str, int, float]]:
    """(kind, name, how many, seconds) of the executor's events, longest first."""
    agg: dict[tuple[str, str], list] = {}
    for e in p.events:
        if e.kind == "kernel":
            continue
        key = (e.kind, e.name if e.kind != "compaction" else e.args.get("what", e.name))
        entry = agg.setdefault(key, [0, 0.0])
        entry[0] += 1
        entry[1] += e.seconds
    return sorted(((k, n, c, s) for (k, n), (c, s) in agg.items()), key=lambda t: -t[3])


def table(p, top: int = 15) -> str:
    out = [f"hydra profile: {len(p.kernels)} kernel(s), {_ms(p.seconds)} ms in all"]
    for k in p.kernels:
        widths = sorted({ln.width for ln in k.lines if ln.issues})
        out.append(f"\n{k.name} ({k.backend}, {k.lanes} lanes, width "
                   f"{'/'.join(map(str, widths)) or '-'}): {k.runs} run(s), "
                   f"{_ms(k.seconds)} ms")
        out.append(f"{'line':>6} {'time ms':>10} {'time':>5} {'util':>5} {'lane steps':>12} "
                   f"{'issues':>9} {'width':>6}  source")
        hot = sorted(k.lines, key=lambda ln: (-ln.seconds, -ln.lane_steps))[:top]
        for ln in sorted(hot, key=lambda ln: -ln.seconds):
            share = ln.seconds / k.seconds if k.seconds else 0
            mark = "~" if ln.estimated else " "
            out.append(f"{ln.line:>6} {mark}{_ms(ln.seconds):>9} {share:>5.0%} "
                       f"{_pct(ln.utilization):>5} {ln.lane_steps:>12} {ln.issues:>9} "
                       f"{ln.width:>6}  {ln.source.strip()[:60]}")
        if any(ln.estimated for ln in k.lines):
            out.append("  (~: estimated: a native phase's measured time shared among its "
                       "lines by their work)")
    steps = _steps(p)
    if steps:
        out.append("\nsteps (the executor's events):")
        for kind, name, count, seconds in steps[:12]:
            out.append(f"  {kind:<10} {count:>6}x {_ms(seconds):>10} ms  {name[:80]}")
    if p.advice:
        out.append("\nadvice:")
        out += [f"  {a}" for a in p.advice]
    return "\n".join(out)


# --- HTML ------------------------------------------------------------------------------

_STYLE = """
body { font-family: sans-serif; margin: 1em; }
table.src { border-collapse: collapse; font-family: monospace; font-size: 13px; }
table.src td { padding: 1px 6px; white-space: pre; }
td.num { text-align: right; color: #444; }
td.util { text-align: right; font-weight: bold; }
.low { color: #c0392b; } .mid { color: #e08a1e; } .high { color: #2e7d32; }
.advice { background: #fff4e6; border-left: 4px solid #e08a1e; padding: 4px 8px; }
"""


def _util_class(u) -> str:
    return "" if u is None else "low" if u < 0.3 else "mid" if u < 0.7 else "high"


def _source_table(k) -> str:
    by_line = {(ln.file, ln.line): ln for ln in k.lines}
    files = sorted({ln.file for ln in k.lines})
    rows = ['<table class="src"><tr><th>line</th><th>util</th><th>time ms</th>'
            '<th>lane steps</th><th>issues</th><th>width</th><th>source</th></tr>']
    for f in files:
        numbers = [ln.line for ln in k.lines if ln.file == f]
        lo, hi = min(numbers), max(numbers)
        text = _read(f)
        for n in range(lo, hi + 1):
            ln = by_line.get((f, n))
            src = html.escape(text[n - 1] if n - 1 < len(text) else "")
            if ln is None:
                rows.append(f'<tr><td class="num">{n}</td><td></td><td></td><td></td>'
                            f'<td></td><td></td><td>{src}</td></tr>')
                continue
            share = ln.seconds / k.seconds if k.seconds else 0
            shade = f"rgba(220, 60, 40, {min(share, 1.0) * 0.8:.3f})"
            est = "~" if ln.estimated else ""
            rows.append(
                f'<tr style="background:{shade}" data-line="{n}" '
                f'data-util="{_pct(ln.utilization)}"><td class="num">{n}</td>'
                f'<td class="util {_util_class(ln.utilization)}">{_pct(ln.utilization)}</td>'
                f'<td class="num">{est}{_ms(ln.seconds)}</td><td class="num">'
                f'{ln.lane_steps}</td><td class="num">{ln.issues}</td><td class="num">'
                f'{ln.width}</td><td>{src}</td></tr>')
    rows.append("</table>")
    return "\n".join(rows)


def _read(path: str) -> list[str]:
    import linecache
    return [x.rstrip("\n") for x in linecache.getlines(path)] if os.path.exists(path) \
        or linecache.getlines(path) else []


def _timeline(p) -> str:
    spans = [e for e in p.events if e.kind in _COLORS and e.end > e.start]
    if not spans:
        return "<p>(no timed steps)</p>"
    threads = sorted({e.tid for e in spans})
    t0, t1 = p.start, max(e.end for e in spans)
    width, row = 900, 18
    scale = (width - 20) / max(t1 - t0, 1e-9)
    parts = [svg_open(width, row * len(threads) + 30)]
    for e in spans:
        y = 8 + threads.index(e.tid) * row + (0 if e.kind == "kernel" else 3)
        x = 10 + (e.start - t0) * scale
        parts.append(svg_rect(x, y, max((e.end - e.start) * scale, 1), row - 4,
                              _COLORS[e.kind], "none", rx=1))
    parts.append(svg_text(10, row * len(threads) + 24,
                          f"0 .. {_ms(t1 - t0)} ms: kernel runs (grey), native phases "
                          f"(blue), host steps (orange), fused and precomputed steps "
                          f"(green), GEMMs (purple)", "#333"))
    parts.append("</svg>")
    return "\n".join(parts)


def _histogram(hist: list, lanes: int) -> str:
    """Bars of how many lanes ran a loop 0, 1, 2, ... times (at most 60 bars: trip
    counts binned)."""
    bins = max(1, -(-len(hist) // 60))
    bars = [sum(hist[i:i + bins]) for i in range(0, len(hist), bins)]
    width, height, top = 900, 90, max(bars) or 1
    step = (width - 20) / len(bars)
    parts = [svg_open(width, height + 30)]
    for i, b in enumerate(bars):
        h = height * b / top
        parts.append(svg_rect(10 + i * step, 10 + height - h, max(step - 1, 1), h,
                              "#4a7bd0", "none", rx=0))
    mean = sum(k * c for k, c in enumerate(hist)) / max(sum(hist), 1)
    parts.append(svg_text(10, height + 25, f"0 .. {len(hist) - 1} trips "
                          f"({bins} per bar); {lanes} lanes, mean {mean:.1f}, "
                          f"max {len(hist) - 1}", "#333"))
    parts.append("</svg>")
    return "\n".join(parts)


def html_report(p, fragment: bool = False) -> str:
    body = [f"<h2>hydra profile: {_ms(p.seconds)} ms</h2>"]
    for a in p.advice:
        body.append(f'<p class="advice">{html.escape(a)}</p>')
    for k in p.kernels:
        body.append(f"<h3>{html.escape(k.name)} ({k.backend}, {k.lanes} lanes): "
                    f"{k.runs} run(s), {_ms(k.seconds)} ms</h3>")
        body.append("<p>Each line is shaded by its share of the kernel's time; util is "
                    "lane steps / (issues &times; width); ~ marks a time estimated inside "
                    "a native phase.</p>")
        body.append(_source_table(k))
        for line, hist in sorted((k.trips or {}).items()):
            body.append(f"<h4>loop at line {line}: trips per lane</h4>")
            body.append(_histogram(hist, k.lanes))
        fn = getattr(k, "fn", None)
        if fn is not None:
            body.append("<h4>predicated control flow (with the profile's count ops)</h4>")
            body.append(cfg_svg(fn))
    body.append("<h3>timeline</h3>")
    body.append(_timeline(p))
    rows = "".join(f"<tr><td>{html.escape(kind)}</td><td>{count}</td><td>{_ms(s)}</td>"
                   f"<td>{html.escape(name)}</td></tr>" for kind, name, count, s in _steps(p))
    body.append(f"<h3>steps</h3><table><tr><th>kind</th><th>count</th><th>ms</th>"
                f"<th>what</th></tr>{rows}</table>")
    inner = "\n".join(body)
    if fragment:
        return f'<div class="hydra-profile"><style>{_STYLE}</style>{inner}</div>'
    return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>hydra profile'
            f'</title><style>{_STYLE}</style></head><body>\n{inner}\n</body></html>\n')


# --- Chrome trace ------------------------------------------------------------------------

_LAUNCH_TID = 1_000_000  # the launches' track: far from real thread ids' small indices


def trace_events(p) -> dict:
    """The profile in the Chrome trace event format (timestamps in microseconds)."""
    pid = os.getpid()
    us = lambda t: round((t - p.start) * 1e6, 3)  # noqa: E731
    tids = {}
    out = []
    for e in p.events:
        tid = tids.setdefault(e.tid, len(tids) + 1)
        args = {k: v for k, v in e.args.items() if isinstance(v, (int, float, str, list))}
        if e.end > e.start or e.kind != "compaction":
            out.append({"name": e.name, "cat": e.kind, "ph": "X", "ts": us(e.start),
                        "dur": max(round((e.end - e.start) * 1e6, 3), 0.001), "pid": pid,
                        "tid": tid, "args": args})
        else:
            out.append({"name": e.name, "cat": e.kind, "ph": "i", "s": "t",
                        "ts": us(e.start), "pid": pid, "tid": tid, "args": args})
    names = {e.tid: e.thread for e in p.events}
    main = tids.setdefault("main", len(tids) + 1)
    out.append({"name": "hydra.profile", "cat": "profile", "ph": "B", "ts": 0.0, "pid": pid,
                "tid": main})
    out.append({"name": "hydra.profile", "cat": "profile", "ph": "E",
                "ts": round(p.seconds * 1e6, 3), "pid": pid, "tid": main})
    for real, tid in tids.items():
        out.append({"name": "thread_name", "ph": "M", "ts": 0.0, "pid": pid, "tid": tid,
                    "args": {"name": names.get(real, "hydra.profile")}})
    out += _launch_events(p, pid)
    return {"traceEvents": out, "displayTimeUnit": "ms",
            "otherData": {"advice": list(p.advice)}}


def _launch_events(p, pid: int) -> list[dict]:
    out = []
    ran = {x["id"]: x for x in p.launches if x["started"] is not None
           and x["finished"] is not None}
    for x in ran.values():
        out.append({"name": f"launch #{x['id']} {x['name']}", "cat": "launch", "ph": "X",
                    "ts": round(x["started"] * 1e6, 3),
                    "dur": max(round((x["finished"] - x["started"]) * 1e6, 3), 0.001),
                    "pid": pid, "tid": _LAUNCH_TID + x["id"],
                    "args": {"backend": x["backend"], "deps": x["deps"]}})
        out.append({"name": "thread_name", "ph": "M", "ts": 0.0, "pid": pid,
                    "tid": _LAUNCH_TID + x["id"], "args": {"name": f"launch #{x['id']}"}})
    flow = 0
    for x in ran.values():
        for src_id, why in x["deps"]:
            src = ran.get(src_id)
            if src is None:
                continue
            flow += 1
            end = round(src["finished"] * 1e6, 3)
            out.append({"name": why, "cat": "dependency", "ph": "s", "id": flow,
                        "ts": max(end - 0.001, round(src["started"] * 1e6, 3)), "pid": pid,
                        "tid": _LAUNCH_TID + src_id})
            out.append({"name": why, "cat": "dependency", "ph": "f", "bp": "e", "id": flow,
                        "ts": round(x["started"] * 1e6, 3), "pid": pid,
                        "tid": _LAUNCH_TID + x["id"]})
    return out
