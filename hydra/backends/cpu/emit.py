"""The LLVM text builder under the cpu code generator: names, blocks, parts, splats.

``Builder`` appends instructions to the current block and hands out fresh names (and
``hole``s for phis whose incoming values come later, ``fill_phi``).  Its helpers hide
the gang layout of ``vectors``: ``parts`` gives a value as ``<w x T>`` parts of any
width (splatting uniforms, reshuffling between widths), ``each`` emits an instruction
once per part, ``bits`` packs a gang's mask into an i64 (bit i = lane i) for error
checks and ``any``.
"""

from __future__ import annotations

from ...types import ScalarType
from .vectors import Geometry, Uni, Unsupported, Var, lty, vty


class Builder:
    def __init__(self, geo: Geometry, fastmath: bool, exact_math: bool = False) -> None:
        self.geo = geo
        #: math functions as one libm call per lane (NumPy's bits) instead of vecmath
        self.exact_math = exact_math
        self.lines: list[str] = []
        self.decls: set[str] = set()
        self.modules: set[str] = set()  # vecmath modules to link in
        self.block = "entry"
        self.n = 0
        self.fflags = "contract reassoc " if fastmath else ""

    # --- text -------------------------------------------------------------------------

    def tmp(self, hint: str = "t") -> str:
        self.n += 1
        return f"%{hint}{self.n}"

    def label(self, hint: str = "b") -> str:
        self.n += 1
        return f"{hint}{self.n}"

    def emit(self, text: str, hint: str = "t") -> str:
        r = self.tmp(hint)
        self.lines.append(f"  {r} = {text}")
        return r

    def do(self, text: str) -> None:
        self.lines.append(f"  {text}")

    def start(self, label: str) -> None:
        self.lines.append(f"{label}:")
        self.block = label

    def br(self, label: str) -> None:
        self.do(f"br label %{label}")

    def cbr(self, cond: str, yes: str, no: str) -> None:
        self.do(f"br i1 {cond}, label %{yes}, label %{no}")

    def declare(self, text: str) -> None:
        self.decls.add(text)

    def branch(self, cond: str, names: tuple[str, str, str], arm) -> list[tuple[object, str]]:
        """``arm(False)`` in a block taken where ``cond`` holds, ``arm(True)`` in one
        where it does not, both going on to a join block (started here): ``[(result,
        the arm's last block)]`` of the two, for the join's phis."""
        yes, no, join = (self.label(n) for n in names)
        self.cbr(cond, yes, no)
        out = []
        for label, other in ((yes, False), (no, True)):
            self.start(label)
            out.append((arm(other), self.block))
            self.br(join)
        self.start(join)
        return out

    def hole(self, hint: str) -> tuple[str, int]:
        """A fresh name and an empty line for its phi, filled in (``fill_phi``) once the
        loop's latch block is known."""
        self.lines.append(None)
        return self.tmp(hint), len(self.lines) - 1

    def fill_phi(self, hole: tuple[str, int], ty: str, *arms: tuple[str, str]) -> None:
        """The phi of ``hole``: ``arms`` are (value, block) pairs."""
        name, at = hole
        self.lines[at] = f"  {name} = phi {ty} " + ", ".join(f"[{v}, %{blk}]" for v, blk in arms)

    # --- gang values ------------------------------------------------------------------

    def splat(self, ref: str, ty: str, w: int) -> str:
        one = self.emit(f"insertelement <{w} x {ty}> poison, {ty} {ref}, i32 0", "s")
        return self.emit(f"shufflevector <{w} x {ty}> {one}, <{w} x {ty}> poison, "
                         f"<{w} x i32> zeroinitializer", "s")

    def parts(self, rep, t: ScalarType, w: int | None = None) -> list[str]:
        """``rep`` (a Uni or Var of type ``t``) as G / w parts ``<w x T>``."""
        w = w or self.geo.width(t)
        ty = lty(t)
        if isinstance(rep, Uni):
            s = self.splat(rep.ref, ty, w)
            return [s] * (self.geo.lanes // w)
        if not isinstance(rep, Var):
            raise Unsupported(f"a {type(rep).__name__} where a number was expected")
        parts, have = rep.parts, rep.w
        while have < w:  # join neighbours
            idx = ", ".join(f"i32 {i}" for i in range(2 * have))
            pairs = zip(parts[::2], parts[1::2])
            parts = [self.emit(f"shufflevector {vty(ty, have)} {a}, {vty(ty, have)} {b}, "
                               f"<{2 * have} x i32> <{idx}>") for a, b in pairs]
            have *= 2
        while have > w:  # split in halves
            half = have // 2
            out = []
            for p in parts:
                for lo in (0, half):
                    idx = ", ".join(f"i32 {i}" for i in range(lo, lo + half))
                    out.append(self.emit(f"shufflevector {vty(ty, have)} {p}, {vty(ty, have)} "
                                         f"poison, <{half} x i32> <{idx}>"))
            parts, have = out, half
        return parts

    def each(self, fmt: str, t: ScalarType, *reps, w: int | None = None) -> Var:
        """Emit ``fmt.format(vt, *part_refs)`` for each part; ``vt`` is the operand
        vector type (element type ``t``)."""
        w = w or self.geo.width(t)
        cols = [self.parts(r, t, w) for r in reps]
        out = [self.emit(fmt.format(vty(t, w), *ps)) for ps in zip(*cols)]
        return Var(out, w)

    def bits(self, rep) -> str:
        """An i64 whose bit i is the mask's lane i (rep: a Uni or Var of bools)."""
        if isinstance(rep, Uni):
            return self.emit(f"select i1 {rep.ref}, i64 -1, i64 0")
        acc = None
        for k, p in enumerate(rep.parts):
            b = self.emit(f"bitcast <{rep.w} x i1> {p} to i{rep.w}")
            if rep.w < 64:
                b = self.emit(f"zext i{rep.w} {b} to i64")
            if k:
                b = self.emit(f"shl i64 {b}, {k * rep.w}")
                b = self.emit(f"or i64 {acc}, {b}")
            acc = b
        return acc

    def any(self, rep) -> str:
        if isinstance(rep, Uni):
            return rep.ref
        acc = None
        for p in rep.parts:
            self.declare(f"declare i1 @llvm.vector.reduce.or.v{rep.w}i1(<{rep.w} x i1>)")
            r = self.emit(f"call i1 @llvm.vector.reduce.or.v{rep.w}i1(<{rep.w} x i1> {p})")
            acc = r if acc is None else self.emit(f"or i1 {acc}, {r}")
        return acc

    def lane_ids(self, base: str, w: int) -> list[str]:
        """The gang's lane indices as i64 parts of width w."""
        b = self.splat(base, "i64", w)
        out = []
        for k in range(self.geo.lanes // w):
            iota = ", ".join(f"i64 {k * w + i}" for i in range(w))
            out.append(self.emit(f"add <{w} x i64> {b}, <{iota}>"))
        return out
