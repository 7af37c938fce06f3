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
from .vectors import BOOL, Uni, Unsupported, Var, const_text, lty, vty

_INT_BIN = {"add": "add", "sub": "sub", "mul": "mul", "bitand": "and", "bitor": "or",
            "bitxor": "xor"}
_FLOAT_BIN = {"add": "fadd", "sub": "fsub", "mul": "fmul", "truediv": "fdiv"}
_FCMP = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}
_ICMP = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq", "ne": "ne"}
_UCMP = {"lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge", "eq": "eq", "ne": "ne"}
#: math functions that are LLVM intrinsics of the same name (vectorized by LLVM itself)
_LLVM_MATH = {"sqrt", "fabs", "floor", "ceil", "trunc", "rint", "copysign"}


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

    def binop(self, name: str, t: ScalarType, a, b, w: int | None = None):
        """The instruction ``name`` (``add``, ``icmp slt``...) of ``a`` and ``b``."""
        return self.apply(name + " {0} {1}, {2}", t, a, b, w=w)

    def call(self, name: str, t: ScalarType, *reps, w: int | None = None):
        """A call of the LLVM intrinsic ``llvm.<name>`` on type ``t``."""
        w = w or self.b.geo.width(t)
        m = mangle(t, w if self.varying else None)
        ty = vty(t, w) if self.varying else lty(t)
        params = ", ".join([ty] * len(reps))
        self.b.declare(f"declare {ty} @llvm.{name}.{m}({params})")
        return self.apply(f"call {{0}} @llvm.{name}.{m}({_operands(reps)})", t, *reps, w=w)

    def sel(self, c, a, b, t: ScalarType, w: int | None = None):
        """select c ? a : b, where c is a bool (uniform or varying)."""
        w = w or self.b.geo.width(t)
        if not self.varying:
            return Uni(self.b.emit(f"select i1 {c.ref}, {lty(t)} {a.ref}, {lty(t)} {b.ref}"))
        if isinstance(c, Var):
            ct, cs = f"<{w} x i1>", self.b.parts(c, BOOL, w)
        else:
            ct, cs = "i1", [c.ref] * (self.b.geo.lanes // w)
        ap, bp = self.b.parts(a, t, w), self.b.parts(b, t, w)
        return Var([self.b.emit(f"select {ct} {k}, {vty(t, w)} {x}, {vty(t, w)} {y}")
                    for k, x, y in zip(cs, ap, bp)], w)


_ZERO, _ONE = Uni("0"), Uni("1")


def _operands(reps) -> str:
    """A call's operand list for ``apply``/``each``: ``{0} {1}, {0} {2}, ...``."""
    return ", ".join("{0} {%d}" % (i + 1) for i in range(len(reps)))


def compare(lz: Lanes, name: str, t: ScalarType, a, b):
    w = lz.b.geo.width(t)
    if t.kind == "f":
        return lz.binop(f"fcmp {_FCMP[name]}", t, a, b, w=w)
    table = _ICMP if t.kind == "i" else _UCMP
    return lz.binop(f"icmp {table[name]}", t, a, b, w=w)


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
            return lz.binop(_INT_BIN[name], t, a, b)
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
    ok = lz.binop("icmp ult", t, b, Uni(str(t.bits)))
    zero = Uni("0")
    count = lz.sel(ok, b, zero, t)
    if name == "lshift":
        return lz.sel(ok, lz.binop("shl", t, a, count), zero, t)
    if t.kind == "u":
        return lz.sel(ok, lz.binop("lshr", t, a, count), zero, t)
    big = lz.binop("ashr", t, a, Uni(str(t.bits - 1)))  # 0 or -1
    return lz.sel(ok, lz.binop("ashr", t, a, count), big, t)


def int_divmod(lz: Lanes, name: str, t: ScalarType, a, b):
    """Python's // and % on integers whose divisor is known non-zero where it matters.
    b == 0 lanes (inactive or checked) and MIN // -1 divide by 1: the latter gives MIN,
    as wrapping NumPy does, instead of a hardware trap."""
    signed = t.kind == "i"
    zero = compare(lz, "eq", t, b, Uni("0"))
    if signed:
        lo = Uni(const_text(-(1 << (t.bits - 1)), t))
        ovf = lz.binop("and", BOOL,
                       compare(lz, "eq", t, a, lo), compare(lz, "eq", t, b, Uni("-1")))
        zero = lz.binop("or", BOOL, zero, ovf)
    safe = lz.sel(zero, Uni("1"), b, t)
    if not signed:
        return lz.binop("udiv" if name == "floordiv" else "urem", t, a, safe)
    q = lz.binop("sdiv", t, a, safe)
    r = lz.binop("srem", t, a, safe)
    # r != 0 and sign(r) != sign(b): step toward -inf
    fix = lz.binop("and", BOOL, compare(lz, "ne", t, r, Uni("0")),
                   lz.binop("icmp slt", t, lz.binop("xor", t, r, safe), _ZERO))
    if name == "floordiv":
        return lz.sel(fix, lz.binop("sub", t, q, _ONE), q, t)
    return lz.sel(fix, lz.binop("add", t, r, safe), r, t)


def float_divmod(lz: Lanes, name: str, t: ScalarType, a, b):
    """NumPy's npy_divmod for floats (floor_divide and remainder)."""
    mod = lz.binop("frem", t, a, b)
    zero = Uni(const_text(0.0, t))
    bzero = compare(lz, "eq", t, b, zero)
    if name == "mod":
        # mod != 0 and (b < 0) != (mod < 0): mod += b; mod == 0: copysign(0, b)
        diff = lz.binop("xor", BOOL, compare(lz, "lt", t, b, zero),
                        compare(lz, "lt", t, mod, zero))
        nz = compare(lz, "ne", t, mod, zero)
        fixed = lz.sel(lz.binop("and", BOOL, nz, diff), lz.binop("fadd", t, mod, b), mod, t)
        signed0 = lz.call("copysign", t, zero, b)
        out = lz.sel(nz, fixed, signed0, t)
        return lz.sel(bzero, mod, out, t)
    div = lz.binop("fdiv", t, lz.binop("fsub", t, a, mod), b)
    nz = compare(lz, "ne", t, mod, zero)
    diff = lz.binop("xor", BOOL, compare(lz, "lt", t, b, zero),
                    compare(lz, "lt", t, mod, zero))
    div = lz.sel(lz.binop("and", BOOL, nz, diff),
                 lz.binop("fsub", t, div, Uni(const_text(1.0, t))), div, t)
    fl = lz.call("floor", t, div)
    up = compare(lz, "gt", t, lz.binop("fsub", t, div, fl), Uni(const_text(0.5, t)))
    fl = lz.sel(up, lz.binop("fadd", t, fl, Uni(const_text(1.0, t))), fl, t)
    q = lz.binop("fdiv", t, a, b)
    out = lz.sel(compare(lz, "ne", t, div, zero), fl, lz.call("copysign", t, zero, q), t)
    return lz.sel(bzero, q, out, t)


def int_pow(lz: Lanes, t: ScalarType, a, b):
    """a ** b by squaring, unrolled over the exponent's bits (negative b counts as 0)."""
    e = lz.sel(lz.binop("icmp slt", t, b, _ZERO) if t.kind == "i" else Uni("false"),
               Uni("0"), b, t)
    r, base = Uni("1"), a
    for _ in range(t.bits):
        odd = lz.apply("trunc {0} {1} to " + ("<%d x i1>" % lz.b.geo.width(t)
                                              if lz.varying else "i1"), t, e)
        r = lz.sel(odd, lz.binop("mul", t, r, base), r, t)
        base = lz.binop("mul", t, base, base)
        e = lz.binop("lshr", t, e, _ONE)
    return r


def unary(lz: Lanes, name: str, t: ScalarType, a):
    if name == "neg":
        if t.kind == "f":
            return lz.apply("fneg {0} {1}", t, a)
        return lz.binop("sub", t, _ZERO, a)
    if name in ("invert", "not"):
        return lz.binop("xor", t, a, Uni("-1" if t.kind != "b" else "true"))
    if name == "abs":
        if t.kind == "f":
            return lz.call("fabs", t, a)
        if t.kind in "ub":
            return a
        neg = lz.binop("sub", t, _ZERO, a)
        return lz.sel(lz.binop("icmp slt", t, a, _ZERO), neg, a, t)
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
        return lz.binop("fcmp une" if src.kind == "f" else "icmp ne", src, a, Uni(z), w=w)
    if src.kind == "f" and dst.kind == "f":
        op = "fpext" if dst.bits > src.bits else "fptrunc"
    elif src.kind == "f" and (dst.kind == "i" or dst.bits < 32):
        return x86_float_to_int(lz, src, dst, a, w)
    elif src.kind == "f":  # to uint32, uint64
        return x86_float_to_unsigned(lz, src, dst, a, w)
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
    inside = lz.binop("and", BOOL,
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
    return fn in _LLVM_MATH or fn in ("isnan", "isinf", "isfinite") or (
        fn in vecmath.SUPPORTED and t.kind == "f")


def x86_float_to_unsigned(lz: Lanes, src: ScalarType, dst: ScalarType, a, w: int):
    """float -> uint32/uint64 as ``host.float_to_unsigned`` spells it (NumPy on
    x86-64): x < 2**(B-1) truncates signed; otherwise x - 2**(B-1), with the top bit
    flipped.  (fptoui would give poison for NaN and out-of-range values.)"""
    via = ScalarType(f"int{dst.bits}")
    half = Uni(const_text(float(2 ** (dst.bits - 1)), src))
    big = compare(lz, "ge", src, a, half)
    low = x86_float_to_int(lz, src, via, a, w)
    high = x86_float_to_int(lz, src, via, lz.binop("fsub", src, a, half, w=w), w)
    high = lz.binop("xor", via, high, Uni(const_text(-(2 ** (dst.bits - 1)), via)), w=w)
    return lz.sel(big, high, low, via, w=w)


def math_call(lz: Lanes, fn: str, t: ScalarType, args):
    """A math function on floats (ints were cast by the frontend)."""
    if fn in _LLVM_MATH:
        return lz.call(fn, t, *args)
    if fn == "isnan":
        return lz.apply("fcmp uno {0} {1}, {1}", t, args[0])
    if fn in ("isinf", "isfinite"):
        inf = "0x7FF0000000000000"
        mag = lz.call("fabs", t, args[0])
        return lz.binop("fcmp oeq" if fn == "isinf" else "fcmp olt", t, mag, Uni(inf))
    if fn not in vecmath.SUPPORTED or t.kind != "f":
        raise Unsupported(f"math.{fn} on {t}")
    w = lz.b.geo.width(t)
    if lz.b.exact_math and not lz.b.fflags and (fn, t.name) not in _NO_EXACT:
        return libm_lanes(lz, fn, t, args)
    sym, text = vecmath.llvm_ir(fn, t.name, w)
    lz.b.modules.add(text)
    ty = vty(t, w)
    lz.b.declare(f"declare {ty} @{sym}(" + ", ".join([ty] * len(args)) + ")")
    res = lz.b.each(f"call {{0}} @{sym}({_operands(args)})", t, *args, w=w)
    if lz.varying:
        return res
    return Uni(lz.b.emit(f"extractelement {ty} {res.parts[0]}, i32 0"))


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
