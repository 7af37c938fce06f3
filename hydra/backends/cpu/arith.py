"""Pure per-lane ops of the cpu code generator: arithmetic, compares, casts, math.

Each rule reproduces the host rules (``host.py``) bit for bit (without ``fastmath``): Python's
floor division and modulo (NumPy's ``divmod`` algorithm for floats), NumPy's shifts
(0 or -1 for out-of-range counts), min/max as ``where(b < a, b, a)``, wrapping integer
arithmetic.  A rule works on uniform scalars and on varying parts alike: ``apply``
formats one instruction template for either.  Transcendental functions come from
``vecmath`` (inline vector code linked into the kernel module).
"""

from __future__ import annotations

from ...types import ScalarType
from . import vecmath
from .emit import Builder
from .vectors import Uni, Unsupported, Var, const_text, lty, vty

_INT_BIN = {"add": "add", "sub": "sub", "mul": "mul", "bitand": "and", "bitor": "or",
            "bitxor": "xor"}
_FLOAT_BIN = {"add": "fadd", "sub": "fsub", "mul": "fmul", "truediv": "fdiv"}
_FCMP = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}
_ICMP = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq", "ne": "ne"}
_UCMP = {"lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge", "eq": "eq", "ne": "ne"}
#: math functions that are LLVM intrinsics (vectorized by LLVM itself)
_LLVM_MATH = {"sqrt": "sqrt", "fabs": "fabs", "floor": "floor", "ceil": "ceil",
              "trunc": "trunc", "rint": "rint"}


def mangle(t: ScalarType, w: int | None) -> str:
    s = {"float": "f32", "double": "f64"}.get(lty(t), lty(t))
    return f"v{w}{s}" if w else s


class Lanes:
    """Emits one op for a result that is varying (parts) or uniform (a scalar)."""

    def __init__(self, b: Builder, varying: bool) -> None:
        self.b, self.varying = b, varying

    def apply(self, fmt: str, t: ScalarType, *reps, w: int | None = None):
        """``fmt.format(type, *operands)`` on scalars or on each part."""
        if self.varying:
            return self.b.each(fmt, t, *reps, w=w or self.b.geo.width(t))
        return Uni(self.b.emit(fmt.format(lty(t), *(r.ref for r in reps))))

    def call(self, name: str, t: ScalarType, *reps, w: int | None = None):
        """A call of the LLVM intrinsic ``llvm.<name>`` on type ``t``."""
        w = w or self.b.geo.width(t)
        m = mangle(t, w if self.varying else None)
        ty = vty(t, w) if self.varying else lty(t)
        params = ", ".join([ty] * len(reps))
        self.b.declare(f"declare {ty} @llvm.{name}.{m}({params})")
        args = ", ".join("{0} {%d}" % (i + 1) for i in range(len(reps)))
        return self.apply(f"call {{0}} @llvm.{name}.{m}({args})", t, *reps, w=w)

    def const(self, value, t: ScalarType):
        return Uni(const_text(value, t))

    def sel(self, c, a, b, t: ScalarType, w: int | None = None):
        """select c ? a : b, where c is a bool (uniform or varying)."""
        w = w or self.b.geo.width(t)
        if not self.varying:
            return Uni(self.b.emit(f"select i1 {c.ref}, {lty(t)} {a.ref}, {lty(t)} {b.ref}"))
        cs = self.b.parts(c, _BOOL, w) if isinstance(c, Var) else None
        ap, bp = self.b.parts(a, t, w), self.b.parts(b, t, w)
        out = []
        for i, (x, y) in enumerate(zip(ap, bp)):
            if cs is None:
                out.append(self.b.emit(f"select i1 {c.ref}, {vty(t, w)} {x}, {vty(t, w)} {y}"))
            else:
                out.append(self.b.emit(f"select <{w} x i1> {cs[i]}, {vty(t, w)} {x}, "
                                       f"{vty(t, w)} {y}"))
        return Var(out, w)


_BOOL = ScalarType("bool")
_ZERO, _ONE = Uni("0"), Uni("1")


def compare(lz: Lanes, name: str, t: ScalarType, a, b):
    w = lz.b.geo.width(t)
    if t.kind == "f":
        return lz.apply(f"fcmp {_FCMP[name]} {{0}} {{1}}, {{2}}", t, a, b, w=w)
    table = _ICMP if t.kind == "i" else _UCMP
    return lz.apply(f"icmp {table[name]} {{0}} {{1}}, {{2}}", t, a, b, w=w)


def binary(lz: Lanes, name: str, t: ScalarType, a, b, rt: ScalarType):
    """A pure binary op ``name`` on operands of type ``t`` with result type ``rt``."""
    ff = lz.b.fflags
    if name in ("lt", "le", "gt", "ge", "eq", "ne"):
        return compare(lz, name, t, a, b)
    if name in ("min", "max"):
        first = compare(lz, "lt" if name == "min" else "gt", t, b, a)
        return lz.sel(first, b, a, t)
    if t.kind == "f":
        if name in _FLOAT_BIN:
            return lz.apply(f"{_FLOAT_BIN[name]} {ff}{{0}} {{1}}, {{2}}", t, a, b)
        if name == "pow":
            return math_call(lz, "pow", t, [a, b])
        if name in ("floordiv", "mod"):
            return float_divmod(lz, name, t, a, b)
    else:
        if name in _INT_BIN:
            return lz.apply(f"{_INT_BIN[name]} {{0}} {{1}}, {{2}}", t, a, b)
        if name in ("lshift", "rshift"):
            return shift(lz, name, t, a, b)
        if name == "pow":
            return int_pow(lz, t, a, b)
    raise Unsupported(f"{name} on {t}")


def contract(lz: Lanes, op, defs: dict, env: dict):
    """With ``fastmath``: ``x * y + c``, ``x * y - c`` and ``c - x * y`` (op an add or
    sub of floats, ``defs`` the defining op of each value of the phase) as one
    ``llvm.fma``, or None.  LLVM contracts only a product with no other use; this fuses
    also a product used twice, as hand-written FMA code does: mandelbrot's ``zr * zr``
    feeds both ``|z|^2`` and ``re(z^2)``, and fusing it into both makes the multiply
    itself dead (7 vector ops a trip instead of 8, the FMA C peers' arithmetic)."""
    t = op.result.type
    for k in (0, 1):
        m = defs.get(op.operands[k].id)
        if m is None or m.opcode != "mul" or any(v.type != t for v in m.operands + m.results):
            continue
        x, y = (env[v.id] for v in m.operands)
        c = env[op.operands[1 - k].id]
        if op.opcode == "sub" and k == 0:
            c = lz.apply("fneg {0} {1}", t, c)  # x * y - c
        elif op.opcode == "sub":
            x = lz.apply("fneg {0} {1}", t, x)  # c - x * y
        return lz.call("fma", t, x, y, c)
    return None


def shift(lz: Lanes, name: str, t: ScalarType, a, b):
    """NumPy: a shift by >= bits (or a negative count) gives 0, or -1 for a negative a
    shifted right arithmetically."""
    ok = lz.apply("icmp ult {0} {1}, {2}", t, b, Uni(str(t.bits)))
    zero = Uni("0")
    count = lz.sel(ok, b, zero, t)
    if name == "lshift":
        return lz.sel(ok, lz.apply("shl {0} {1}, {2}", t, a, count), zero, t)
    if t.kind == "u":
        return lz.sel(ok, lz.apply("lshr {0} {1}, {2}", t, a, count), zero, t)
    big = lz.apply("ashr {0} {1}, {2}", t, a, Uni(str(t.bits - 1)))  # 0 or -1
    return lz.sel(ok, lz.apply("ashr {0} {1}, {2}", t, a, count), big, t)


def int_divmod(lz: Lanes, name: str, t: ScalarType, a, b):
    """Python's // and % on integers whose divisor is known non-zero where it matters.
    b == 0 lanes (inactive or checked) and MIN // -1 divide by 1: the latter gives MIN,
    as wrapping NumPy does, instead of a hardware trap."""
    signed = t.kind == "i"
    zero = compare(lz, "eq", t, b, Uni("0"))
    if signed:
        lo = Uni(const_text(-(1 << (t.bits - 1)), t))
        ovf = lz.apply("and {0} {1}, {2}", _BOOL,
                       compare(lz, "eq", t, a, lo), compare(lz, "eq", t, b, Uni("-1")))
        zero = lz.apply("or {0} {1}, {2}", _BOOL, zero, ovf)
    safe = lz.sel(zero, Uni("1"), b, t)
    if not signed:
        return lz.apply(("udiv" if name == "floordiv" else "urem") + " {0} {1}, {2}", t, a, safe)
    q = lz.apply("sdiv {0} {1}, {2}", t, a, safe)
    r = lz.apply("srem {0} {1}, {2}", t, a, safe)
    # r != 0 and sign(r) != sign(b): step toward -inf
    fix = lz.apply("and {0} {1}, {2}", _BOOL, compare(lz, "ne", t, r, Uni("0")),
                   lz.apply("icmp slt {0} {1}, {2}", t,
                            lz.apply("xor {0} {1}, {2}", t, r, safe), _ZERO))
    if name == "floordiv":
        return lz.sel(fix, lz.apply("sub {0} {1}, {2}", t, q, _ONE), q, t)
    return lz.sel(fix, lz.apply("add {0} {1}, {2}", t, r, safe), r, t)


def float_divmod(lz: Lanes, name: str, t: ScalarType, a, b):
    """NumPy's npy_divmod for floats (floor_divide and remainder)."""
    mod = lz.apply("frem {0} {1}, {2}", t, a, b)
    bzero = compare(lz, "eq", t, b, Uni(const_text(0.0, t)))
    zero = Uni(const_text(0.0, t))
    if name == "mod":
        # mod != 0 and (b < 0) != (mod < 0): mod += b; mod == 0: copysign(0, b)
        diff = lz.apply("xor {0} {1}, {2}", _BOOL, compare(lz, "lt", t, b, zero),
                        compare(lz, "lt", t, mod, zero))
        nz = compare(lz, "ne", t, mod, zero)
        fixed = lz.sel(lz.apply("and {0} {1}, {2}", _BOOL, nz, diff),
                       lz.apply("fadd {0} {1}, {2}", t, mod, b), mod, t)
        signed0 = lz.call("copysign", t, zero, b)
        out = lz.sel(nz, fixed, signed0, t)
        return lz.sel(bzero, mod, out, t)
    div = lz.apply("fdiv {0} {1}, {2}", t, lz.apply("fsub {0} {1}, {2}", t, a, mod), b)
    nz = compare(lz, "ne", t, mod, zero)
    diff = lz.apply("xor {0} {1}, {2}", _BOOL, compare(lz, "lt", t, b, zero),
                    compare(lz, "lt", t, mod, zero))
    div = lz.sel(lz.apply("and {0} {1}, {2}", _BOOL, nz, diff),
                 lz.apply("fsub {0} {1}, {2}", t, div, Uni(const_text(1.0, t))), div, t)
    fl = lz.call("floor", t, div)
    up = compare(lz, "gt", t, lz.apply("fsub {0} {1}, {2}", t, div, fl),
                 Uni(const_text(0.5, t)))
    fl = lz.sel(up, lz.apply("fadd {0} {1}, {2}", t, fl, Uni(const_text(1.0, t))), fl, t)
    q = lz.apply("fdiv {0} {1}, {2}", t, a, b)
    out = lz.sel(compare(lz, "ne", t, div, zero), fl, lz.call("copysign", t, zero, q), t)
    return lz.sel(bzero, q, out, t)


def int_pow(lz: Lanes, t: ScalarType, a, b):
    """a ** b by squaring, unrolled over the exponent's bits (negative b counts as 0)."""
    e = lz.sel(lz.apply("icmp slt {0} {1}, {2}", t, b, _ZERO) if t.kind == "i" else Uni("false"),
               Uni("0"), b, t)
    r, base = Uni("1"), a
    for _ in range(t.bits):
        odd = lz.apply("trunc {0} {1} to " + ("<%d x i1>" % lz.b.geo.width(t)
                                              if lz.varying else "i1"), t, e)
        r = lz.sel(odd, lz.apply("mul {0} {1}, {2}", t, r, base), r, t)
        base = lz.apply("mul {0} {1}, {2}", t, base, base)
        e = lz.apply("lshr {0} {1}, {2}", t, e, _ONE)
    return r


def unary(lz: Lanes, name: str, t: ScalarType, a):
    if name == "neg":
        if t.kind == "f":
            return lz.apply("fneg {0} {1}", t, a)
        return lz.apply("sub {0} {1}, {2}", t, _ZERO, a)
    if name in ("invert", "not"):
        return lz.apply("xor {0} {1}, {2}", t, a, Uni("-1" if t.kind != "b" else "true"))
    if name == "abs":
        if t.kind == "f":
            return lz.call("fabs", t, a)
        if t.kind in "ub":
            return a
        neg = lz.apply("sub {0} {1}, {2}", t, _ZERO, a)
        return lz.sel(lz.apply("icmp slt {0} {1}, {2}", t, a, _ZERO), neg, a, t)
    raise Unsupported(name)


def cast(lz: Lanes, src: ScalarType, dst: ScalarType, a):
    """NumPy's astype: float -> int truncates (out-of-range lanes give what x86 gives,
    frozen so LLVM cannot exploit the poison), int -> bool is != 0."""
    if src.name == dst.name:
        return a
    w = lz.b.geo.width(dst) if src.kind == "b" else lz.b.geo.width(src)
    target = (f"<{w} x {lty(dst)}>" if lz.varying else lty(dst))
    if dst.kind == "b":
        z = "0.0" if src.kind == "f" else "0"
        return lz.apply(("fcmp une" if src.kind == "f" else "icmp ne") + " {0} {1}, {2}",
                        src, a, Uni(z), w=w)
    if src.kind == "f" and dst.kind == "f":
        op = "fpext" if dst.bits > src.bits else "fptrunc"
    elif src.kind == "f" and (dst.kind == "i" or dst.bits < 32):
        return x86_float_to_int(lz, src, dst, a, w)
    elif src.kind == "f" and dst.kind == "u":
        return x86_float_to_unsigned(lz, src, dst, a, w)
    elif src.kind == "f":
        wide = ScalarType("int64") if dst.kind == "i" or dst.bits < 64 else dst
        conv = "fptoui" if wide.kind == "u" else "fptosi"
        wt = f"<{w} x i64>" if lz.varying else "i64"
        x = lz.apply(f"{conv} {{0}} {{1}} to {wt}", src, a, w=w)
        x = lz.apply("freeze {0} {1}", ScalarType("int64"), x, w=w)
        return x if dst.bits == 64 else lz.apply(f"trunc {{0}} {{1}} to {target}", wide, x, w=w)
    elif dst.kind == "f":
        op = "sitofp" if src.kind == "i" else "uitofp"
    elif dst.bits > src.bits:
        op = "sext" if src.kind == "i" else "zext"
    elif dst.bits < src.bits:
        op = "trunc"
    else:
        return a  # same width, other signedness: the bits are the value
    return lz.apply(f"{op} {{0}} {{1}} to {target}", src, a, w=w)


def x86_float_to_int(lz: Lanes, src: ScalarType, dst: ScalarType, a, w: int):
    """NumPy's float -> signed int (and narrow unsigned) cast on x86: cvtt to int32 (int64
    for int64), whose out-of-range and NaN result is the minimum, then truncation."""
    via = ScalarType("int64" if dst.bits == 64 else "int32")
    lo, hi = float(-(2 ** (via.bits - 1))), float(2 ** (via.bits - 1))
    inside = lz.apply("and {0} {1}, {2}", _BOOL,
                      compare(lz, "ge", src, a, Uni(const_text(lo, src))),
                      compare(lz, "lt", src, a, Uni(const_text(hi, src))))
    vt = f"<{w} x {lty(via)}>" if lz.varying else lty(via)
    x = lz.apply("freeze {0} {1}", via, lz.apply(f"fptosi {{0}} {{1}} to {vt}", src, a, w=w), w=w)
    x = lz.sel(inside, x, Uni(const_text(lo, via)), via, w=w)
    if dst.bits == via.bits:
        return x
    target = f"<{w} x {lty(dst)}>" if lz.varying else lty(dst)
    return lz.apply(f"trunc {{0}} {{1}} to {target}", via, x, w=w)


def native_math(fn: str, t: ScalarType) -> bool:
    """Does ``math_call`` lower ``fn`` on ``t``?"""
    return fn in _LLVM_MATH or fn in ("copysign", "isnan", "isinf", "isfinite") or (
        fn in vecmath.SUPPORTED and t.kind == "f")


def x86_float_to_unsigned(lz: Lanes, src: ScalarType, dst: ScalarType, a, w: int):
    """float -> uint32/uint64 as ``host.float_to_unsigned`` spells it (NumPy on
    x86-64): x < 2**(B-1) truncates signed; otherwise x - 2**(B-1), with the top bit
    flipped.  (fptoui would give poison for NaN and out-of-range values.)"""
    via = ScalarType(f"int{dst.bits}")
    half = Uni(const_text(float(2 ** (dst.bits - 1)), src))
    big = compare(lz, "ge", src, a, half)
    low = x86_float_to_int(lz, src, via, a, w)
    high = x86_float_to_int(lz, src, via, lz.apply("fsub {0} {1}, {2}", src, a, half, w=w), w)
    high = lz.apply("xor {0} {1}, {2}", via, high, Uni(const_text(-(2 ** (dst.bits - 1)), via)),
                    w=w)
    return lz.sel(big, high, low, via, w=w)


def math_call(lz: Lanes, fn: str, t: ScalarType, args):
    """A math function on floats (ints were cast by the frontend)."""
    if fn in _LLVM_MATH:
        return lz.call(_LLVM_MATH[fn], t, *args)
    if fn == "copysign":
        return lz.call("copysign", t, *args)
    if fn == "isnan":
        return lz.apply("fcmp uno {0} {1}, {1}", t, args[0])
    if fn in ("isinf", "isfinite"):
        inf = "0x7FF0000000000000"
        mag = lz.call("fabs", t, args[0])
        return lz.apply(("fcmp oeq" if fn == "isinf" else "fcmp olt") + " {0} {1}, {2}",
                        t, mag, Uni(inf))
    if fn not in vecmath.SUPPORTED or t.kind != "f":
        raise Unsupported(f"math.{fn} on {t}")
    w = lz.b.geo.width(t)
    if lz.b.exact_math and not lz.b.fflags and (fn, t.name) not in _NO_EXACT:
        return libm_lanes(lz, fn, t, args)
    sym, text = vecmath.llvm_ir(fn, t.name, w)
    lz.b.modules.add(text)
    ty = vty(t, w)
    args_v = [lz.b.parts(a, t, w) for a in args]
    out = []
    for ps in zip(*args_v):
        out.append(lz.b.emit(f"call {ty} @{sym}(" + ", ".join(f"{ty} {p}" for p in ps) + ")"))
    lz.b.declare(f"declare {ty} @{sym}(" + ", ".join([ty] * len(args)) + ")")
    res = Var(out, w)
    if lz.varying:
        return res
    return Uni(lz.b.emit(f"extractelement {ty} {out[0]}, i32 0"))


#: NumPy's own SIMD loops, not libm, compute these: no libm call matches them bit for
#: bit, so vecmath's inline code (within vecmath.ULP) is used even without fastmath
_NO_EXACT = {("exp", "float32"), ("log", "float32"), ("sin", "float32"), ("cos", "float32"),
             ("tanh", "float32"), ("tanh", "float64")}


def libm_lanes(lz: Lanes, fn: str, t: ScalarType, args):
    """One libm call per lane: what NumPy computes, bit for bit.  erf/erfc of float32
    go through double, as the reference does (math.erf)."""
    vecmath.load_runtime()  # makes libm's symbols visible to the JIT
    wide = fn in ("erf", "erfc") and t.name == "float32"
    st = "double" if wide or t.name == "float64" else "float"
    sym = fn + ("f" if st == "float" else "")
    b = lz.b
    b.declare(f"declare {st} @{sym}({', '.join([st] * len(args))}) nounwind readnone")

    def one(refs):
        if wide:
            refs = [b.emit(f"fpext float {r} to double") for r in refs]
        r = b.emit(f"call {st} @{sym}(" + ", ".join(f"{st} {x}" for x in refs) + ")")
        return b.emit(f"fptrunc double {r} to float") if wide else r
    if not lz.varying:
        return Uni(one([a.ref for a in args]))
    w = b.geo.width(t)
    cols = [b.parts(a, t, w) for a in args]
    out = []
    for ps in zip(*cols):
        acc = "poison"
        for i in range(w):
            r = one([b.emit(f"extractelement {vty(t, w)} {p}, i32 {i}") for p in ps])
            acc = b.emit(f"insertelement {vty(t, w)} {acc}, {lty(t)} {r}, i32 {i}")
        out.append(acc)
    return Var(out, w)
