"""A tiny SSA builder for LLVM vector IR text, and the numeric helpers vecmath uses.

Takes: an element type ("float"/"double") and a width. Guarantees: Python operators on
`Vec` values emit one LLVM instruction each on `<W x T>` vectors (fadd/add, fcmp/icmp,
bitcasts, intrinsic calls, selects), so each algorithm in vecmath.py reads like the
NumPy code it replaces; `Builder.lines`/`decls`/`block` are the function body, the
declarations it needs and the current basic block. `Builder.rare` puts code that only
special lanes need (fix-ups, libm fallbacks) in a block behind a branch; `define` makes
the module text of the function a builder built; `load_runtime` lets the JIT resolve the
libm functions that fallbacks call.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math

import llvmlite.binding as llvm

from ...types import ScalarType
from ..machinecode.engine import init_llvm
from .vectors import const_text


@functools.cache
def load_runtime() -> None:
    """Load libm so the JIT resolves its symbols (the calls of `Builder.fallback`)."""
    init_llvm()
    llvm.load_library_permanently(ctypes.util.find_library("m") or "libm.so.6")


class Vec:
    """One SSA vector value: `ref` is its LLVM name, `ty` its element type."""

    __slots__ = ("b", "ref", "ty")

    def __init__(self, b: Builder, ref: str, ty: str):
        self.b, self.ref, self.ty = b, ref, ty

    @property
    def isf(self) -> bool:
        return self.ty in ("float", "double")

    def _lift(self, o) -> Vec:
        return o if isinstance(o, Vec) else self.b.const(o, self.ty)

    def _op(self, fop: str, iop: str, o, swap=False) -> Vec:
        o = self._lift(o)
        a, c = (o, self) if swap else (self, o)
        return self.b.emit(f"{fop if self.isf else iop} {self.b.vt(self.ty)} {a.ref}, {c.ref}",
                           self.ty)

    def __add__(self, o): return self._op("fadd", "add", o)
    def __radd__(self, o): return self._op("fadd", "add", o, True)
    def __sub__(self, o): return self._op("fsub", "sub", o)
    def __rsub__(self, o): return self._op("fsub", "sub", o, True)
    def __mul__(self, o): return self._op("fmul", "mul", o)
    def __rmul__(self, o): return self._op("fmul", "mul", o, True)
    def __truediv__(self, o): return self._op("fdiv", "sdiv", o)
    def __rtruediv__(self, o): return self._op("fdiv", "sdiv", o, True)
    def __and__(self, o): return self._op("", "and", o)
    def __or__(self, o): return self._op("", "or", o)
    def __xor__(self, o): return self._op("", "xor", o)
    def __lshift__(self, o): return self._op("", "shl", o)
    def lshr(self, o): return self._op("", "lshr", o)

    def __neg__(self):
        return self.b.emit(f"fneg {self.b.vt(self.ty)} {self.ref}", self.ty)

    def _cmp(self, fpred: str, ipred: str, o) -> Vec:
        o = self._lift(o)
        op = f"fcmp {fpred}" if self.isf else f"icmp {ipred}"
        return self.b.emit(f"{op} {self.b.vt(self.ty)} {self.ref}, {o.ref}", "i1")

    def lt(self, o): return self._cmp("olt", "slt", o)
    def le(self, o): return self._cmp("ole", "sle", o)
    def gt(self, o): return self._cmp("ogt", "sgt", o)
    def ge(self, o): return self._cmp("oge", "sge", o)
    def eq(self, o): return self._cmp("oeq", "eq", o)
    def ne(self, o): return self._cmp("une", "ne", o)

    def isnan(self) -> Vec:
        return self._cmp("uno", "", self)

    def cast(self, op: str, ty: str) -> Vec:
        return self.b.emit(f"{op} {self.b.vt(self.ty)} {self.ref} to {self.b.vt(ty)}", ty)

    def bits(self) -> Vec:
        return self.cast("bitcast", "i64" if self.ty == "double" else "i32")

    def asfloat(self) -> Vec:
        return self.cast("bitcast", "double" if self.ty == "i64" else "float")


class Builder:
    """Emits the body of one function over `<W x ft>` vectors."""

    def __init__(self, ft: str, width: int):
        self.ft, self.w = ft, width
        self.lines: list[str] = []
        self.decls: set[str] = set()
        self.n = 0
        self.block = "entry"

    def vt(self, ty: str) -> str:
        return f"<{self.w} x {ty}>"

    def emit(self, rhs: str, ty: str) -> Vec:
        self.n += 1
        ref = f"%t{self.n}"
        self.lines.append(f"  {ref} = {rhs}")
        return Vec(self, ref, ty)

    def const(self, v, ty: str | None = None) -> Vec:
        ty = ty or self.ft
        if ty in ("float", "double"):
            s = const_text(v, ScalarType("float32" if ty == "float" else "float64"))
        elif ty == "i1":
            s = "true" if v else "false"
        else:
            s = str(int(v))
        return Vec(self, "<" + ", ".join([f"{ty} {s}"] * self.w) + ">", ty)

    def call(self, name: str, *args: Vec, ty: str | None = None) -> Vec:
        """Call an overloaded LLVM intrinsic such as llvm.fma on vectors."""
        ty = ty or args[0].ty
        vt = self.vt(ty)
        sym = f"{name}.v{self.w}{'f32' if ty == 'float' else 'f64' if ty == 'double' else ty}"
        self.decls.add(f"declare {vt} @{sym}({', '.join(self.vt(a.ty) for a in args)})")
        ops = ", ".join(f"{self.vt(a.ty)} {a.ref}" for a in args)
        return self.emit(f"call {vt} @{sym}({ops})", ty)

    def select(self, c: Vec, a, b) -> Vec:
        ty = a.ty if isinstance(a, Vec) else b.ty if isinstance(b, Vec) else self.ft
        a = a if isinstance(a, Vec) else self.const(a, ty)
        b = b if isinstance(b, Vec) else self.const(b, ty)
        return self.emit(f"select {self.vt('i1')} {c.ref}, {self.vt(ty)} {a.ref}, "
                         f"{self.vt(ty)} {b.ref}", ty)

    def fma(self, a: Vec, b, c) -> Vec:
        return self.call("llvm.fma", a, a._lift(b), a._lift(c))

    def rare(self, mask: Vec, fast: Vec, slow_code) -> Vec:
        """`fast`, or `slow_code()` (emitted in a block of its own) when any lane is in
        `mask`: special-value fix-ups and libm fallbacks cost a test in the common case."""
        ty = fast.ty
        red = f"llvm.vector.reduce.or.v{self.w}i1"
        self.decls.add(f"declare i1 @{red}({self.vt('i1')})")
        anyv = self.emit(f"call i1 @{red}({self.vt('i1')} {mask.ref})", "i1")
        slow, join, here = f"slow{self.n}", f"join{self.n}", self.block
        self.lines += [f"  br i1 {anyv.ref}, label %{slow}, label %{join}", f"{slow}:"]
        self.block = slow
        picked = slow_code()
        slow = self.block  # slow_code may have opened blocks of its own
        self.lines += [f"  br label %{join}", f"{join}:"]
        self.block = join
        return self.emit(f"phi {self.vt(ty)} [ {fast.ref}, %{here} ], [ {picked.ref}, %{slow} ]",
                         ty)

    def fallback(self, mask: Vec, fast: Vec, sym: str, args: list[Vec]) -> Vec:
        """Lanes in `mask` take scalar `sym` (huge sin arguments, huge fmod quotients)."""
        return self.rare(mask, fast, lambda: self.select(mask, self.scalar_calls(sym, args),
                                                         fast))

    def scalar_calls(self, sym: str, args: list[Vec]) -> Vec:
        """Call scalar `sym` on every lane (the slow path and the scalarized fallback)."""
        ty = args[0].ty
        self.decls.add(f"declare {ty} @{sym}({', '.join(ty for _ in args)})")
        acc = Vec(self, "undef", ty)
        for i in range(self.w):
            el = [self.emit(f"extractelement {self.vt(ty)} {a.ref}, i32 {i}", ty) for a in args]
            r = self.emit(f"call {ty} @{sym}({', '.join(f'{ty} {e.ref}' for e in el)})", ty)
            acc = self.emit(f"insertelement {self.vt(ty)} {acc.ref}, {ty} {r.ref}, i32 {i}", ty)
        return acc


def define(b: Builder, sym: str, args: list[Vec], res: Vec) -> tuple[str, str]:
    """`(sym, module text)` of the function `res(args)` that `b` built, inlinable and
    mergeable across modules."""
    vt = b.vt(args[0].ty)
    params = ", ".join(f"{vt} {a.ref}" for a in args)
    text = "\n".join([
        *sorted(b.decls),
        f"define linkonce_odr {vt} @{sym}({params}) #0 {{",
        "entry:",
        *b.lines,
        f"  ret {vt} {res.ref}",
        "}",
        "attributes #0 = { alwaysinline nounwind }",
        "",
    ])
    return sym, text


def taylor(first: int, last: int, step: int = 1, sign: int = 0) -> list[float]:
    """Coefficients (-1)**((k + sign) // 2) / k! for k = last, last - step, ..., first."""
    return [(-1.0) ** ((k + sign) // 2 if step == 2 else 0) / math.factorial(k)
            for k in range(last, first - 1, -step)]


def poly(x: Vec, coeffs, exact_tail: int = 3) -> Vec:
    """Evaluate at x: the `exact_tail` lowest terms by Horner (they set the rounding
    error), the rest by Estrin's scheme, whose short dependency chains let the core
    overlap the many fmas (Horner made the long polynomials latency-bound)."""
    b = x.b
    head, tail = coeffs[: len(coeffs) - exact_tail], coeffs[len(coeffs) - exact_tail:]
    terms = [x._lift(c) for c in reversed(head)]  # lowest degree first
    if len(terms) > 1:
        terms = [b.fma(terms[i + 1], x, terms[i]) if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
        xp = x * x
        while len(terms) > 1:
            terms = [b.fma(terms[i + 1], xp, terms[i]) if i + 1 < len(terms) else terms[i]
                     for i in range(0, len(terms), 2)]
            xp = xp * xp if len(terms) > 1 else xp
    r = terms[0] if terms else b.const(0.0)
    for c in tail:
        r = b.fma(r, x, c)
    return r


def fabs(x: Vec) -> Vec:
    """|x|."""
    return x.b.call("llvm.fabs", x)


def copysign(mag: Vec, x: Vec) -> Vec:
    """mag with the sign bit of x."""
    return x.b.call("llvm.copysign", mag, x)


def clamp(x: Vec, lo: float, hi: float) -> Vec:
    """x limited to [lo, hi]; nan becomes hi (callers fix nan lanes up afterwards)."""
    return x.b.call("llvm.maxnum", x.b.call("llvm.minnum", x, x._lift(hi)), x._lift(lo))


def signbit(x: Vec) -> Vec:
    """Sign bit set (true for -0 and negative nans too)."""
    return x.bits().lt(0)


def isinf(x: Vec) -> Vec:
    """x is +inf or -inf."""
    return fabs(x).eq(math.inf)


def fast2sum(a: Vec, c: Vec) -> tuple[Vec, Vec]:
    """(s, e) with s + e = a + c exactly, for |a| >= |c| (or a = 0): Dekker's Fast2Sum."""
    s = a + c
    return s, (a - s) + c


# AVX2 has no int64 <-> double conversion nor 64-bit arithmetic shift; small integers
# go through the mantissa of MAGIC instead (bits(MAGIC + k) = bits(MAGIC) + k).
MAGIC = 6755399441055744.0  # 1.5 * 2**52
MAGIC_F = 12582912.0  # 1.5 * 2**23


def pow2(k: Vec) -> Vec:
    """2**k for integral k in the exponent range of k's type."""
    if k.ty == "float":
        return ((k + (127.0 + MAGIC_F)).bits() << 23).asfloat()
    return ((k + (1023.0 + MAGIC)).bits() << 52).asfloat()


def i2d(k: Vec) -> Vec:
    """Small int64 -> double."""
    return (k + 0x4338000000000000).asfloat() - MAGIC


def scale(p: Vec, n: Vec) -> Vec:
    """p * 2**n for integral double n in [-2000, 2000]: two exact steps, one rounding."""
    n1 = p.b.call("llvm.floor", n * 0.5)
    return p * pow2(n1) * pow2(n - n1)
