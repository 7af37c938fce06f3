"""Pictures of the IR for people: highlighted HTML text and an SVG of the predicated CFG.

Both read the text of the one printer (``hydra.ir.print_function``) or walk the IR
itself; neither invents its own notation.  The SVG draws the structured control
flow as nested boxes: a uniform ``if`` as a branch box with its two arms, a
varying loop as a box labelled "repeat while any lane is active", masks in blue,
uniform/varying marks, and sync points in red with their reason.
"""

from __future__ import annotations

import html
import re

from .ir.core import Function, Op, Region
from .ir.printer import REGION_LABELS, Printer

_TOKEN = re.compile(
    r"(?P<sync>!sync\([^)]*\))|(?P<loc>;\s\S+:\d+)|(?P<mask>%m(?:\.\w+)*(?![\w.]))|(?P<value>%[\w.]+)"
    r"|(?P<mark>: [uv?] )|(?P<kw>\b(?:func|before|do|then|else|yield|condition|if|while)\b)")

_CSS = """<style>
.hydra-ir { font-family: monospace; font-size: 12px; line-height: 1.35; white-space: pre; }
.hydra-ir .mask { color: #1f5fbf; font-weight: bold; }
.hydra-ir .value { color: #444; }
.hydra-ir .u { color: #2a7a2a; } .hydra-ir .v { color: #b35900; font-weight: bold; }
.hydra-ir .kw { color: #7a2a9a; font-weight: bold; }
.hydra-ir .sync { color: #fff; background: #c0392b; padding: 0 2px; }
.hydra-ir .loc { color: #999; }
</style>"""


def highlight_html(text: str) -> str:
    """The printer's text as HTML: masks, u/v marks, keywords and sync points coloured."""
    out = []
    pos = 0
    for m in _TOKEN.finditer(text):
        out.append(html.escape(text[pos:m.start()]))
        kind = m.lastgroup
        if kind == "mark":  # ": u ": the mark alone gets its class
            mark = m.group().strip(": ")
            out.append(f': <span class="{mark}">{mark}</span> ')
        else:
            out.append(f'<span class="{kind}">{html.escape(m.group())}</span>')
        pos = m.end()
    out.append(html.escape(text[pos:]))
    return _CSS + '<div class="hydra-ir">' + "".join(out) + "</div>"


# --- the CFG picture -------------------------------------------------------------------

_ROW, _INDENT, _CHAR = 16, 18, 6.6


class _Layout:
    def __init__(self, fn: Function) -> None:
        self.printer = Printer(show_loc=False)
        self.printer.function(fn)  # name every value in text order, so both views agree
        self.rows: list[tuple[int, str, str]] = []  # (depth, text, css class)
        self.boxes: list[tuple[int, int, int, str, str]] = []  # (depth, first, last, label, class)

    def region(self, region: Region, depth: int) -> None:
        for op in region.ops:
            self.op(op, depth)

    def box(self, op: Op, depth: int, text: str, label: str, kind: str) -> None:
        """An if or while: its header, its non-empty regions, and a box around them."""
        first = len(self.rows)
        self.rows.append((depth, text, "head"))
        for region, arm in zip(op.regions, REGION_LABELS[op.opcode]):
            if len(region.ops) <= 1 and op.opcode == "if":
                continue  # an arm that only yields: nothing to draw
            self.rows.append((depth + 1, arm + ":", "arm"))
            self.region(region, depth + 2)
        self.boxes.append((depth, first, len(self.rows) - 1, label, kind))

    def op(self, op: Op, depth: int) -> None:
        if op.opcode in ("const", "undef"):
            return  # constants clutter the picture; the text view has them
        text = self.printer.header(op)
        css = "sync" if op.attrs.get("sync") else ("mask" if _is_mask(op) else "op")
        if op.opcode == "if":
            label = "skip unless any lane is on" if op.attrs.get("guard") else "uniform branch"
            self.box(op, depth, text, label, "ifbox")
        elif op.opcode == "while":
            varying = op.attrs.get("varying")
            label = "repeat while any lane is active" if varying else "uniform loop"
            self.box(op, depth, text, label, "anyloop" if varying else "loop")
        else:
            self.rows.append((depth, text, css))


def _is_mask(op: Op) -> bool:
    """Masks are the values linearization names m, m.then, m.loop, ..."""
    return bool(op.results) and (op.results[0].name == "m" or op.results[0].name.startswith("m."))


def svg_open(width: float, height: float) -> str:
    """The opening tag of a picture (the CFG here, the launch graph in ``launchview``)."""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{int(width)}" height="{int(height)}" '
            f'font-family="monospace" font-size="11">')


def svg_rect(x: float, y: float, w: float, h: float, fill: str, stroke: str,
             rx: int = 5) -> str:
    return (f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" rx="{rx}" '
            f'fill="{fill}" stroke="{stroke}"/>')


def svg_text(x: float, y: float, text: str, fill: str, bold: bool = False,
             italic: bool = False, end: bool = False) -> str:
    attrs = (' text-anchor="end"' if end else "") + f' fill="{fill}"'
    attrs += (' font-weight="bold"' if bold else "") + (' font-style="italic"' if italic else "")
    return f'<text x="{x:g}" y="{y:g}"{attrs}>{html.escape(text)}</text>'


def cfg_svg(fn: Function) -> str:
    """An SVG picture of the function's (predicated) control flow."""
    lay = _Layout(fn)
    lay.rows.append((0, f"func {fn.name}", "head"))
    lay.region(fn.body, 1)
    width = int(max(d * _INDENT + len(t) * _CHAR for d, t, _ in lay.rows)) + 60
    height = len(lay.rows) * _ROW + 20
    colors = {"ifbox": ("#eef4ff", "#7a9cd6"), "loop": ("#f2f2f2", "#999"),
              "anyloop": ("#fff4e6", "#e08a1e")}
    parts = [svg_open(width, height)]
    for depth, first, last, label, kind in sorted(lay.boxes, key=lambda b: b[0]):
        fill, stroke = colors[kind]
        x = 6 + depth * _INDENT
        y = 8 + first * _ROW
        h = (last - first + 1) * _ROW + 4
        parts.append(svg_rect(x, y, width - x - 8, h, fill, stroke))
        parts.append(svg_text(width - 12, y + h - 5, label, stroke, italic=True, end=True))
    styles = {"sync": "#c0392b", "mask": "#1f5fbf", "head": "#7a2a9a", "arm": "#7a2a9a",
              "op": "#222"}
    for i, (depth, text, css) in enumerate(lay.rows):
        x = 12 + depth * _INDENT
        y = 20 + i * _ROW
        parts.append(svg_text(x, y, text, styles[css], bold=css in ("sync", "head", "arm")))
    parts.append("</svg>")
    return "\n".join(parts)
