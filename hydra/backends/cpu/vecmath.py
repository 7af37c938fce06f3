"""Vector math functions as textual LLVM IR, for linking into cpu-backend kernels.

Takes: a function name, a dtype ("float32"/"float64") and a vector width.
Guarantees: `llvm_ir` returns `(symbol, module_text)`; the module defines
`<W x T> @symbol(<W x T> %x[, <W x T> %y])` as `linkonce_odr` + `alwaysinline`, so any
number of kernel modules may link the same function without clashing, and the
inliner removes the call. Results agree with NumPy within `ULP[name]` ulp (measured by
tests/test_vecmath.py) and special values (nan, +-inf, +-0, subnormals, overflow,
domain errors) come out as NumPy's do.

Functions without an inline vector implementation yet are scalarized: each lane calls
the libm symbol (`erff`, `erf`, ...). `load_runtime()` makes those symbols visible to
llvmlite's JIT (llvmlite does not search the process by default); `llvm_ir` calls it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import struct

import llvmlite.binding as llvm

# name -> number of arguments; every name has a libm counterpart (name + "f" for float32).
_ARITY = {
    "exp": 1, "log": 1, "sin": 1, "cos": 1, "tan": 1, "atan2": 2, "pow": 2, "erf": 1,
    "erfc": 1, "exp2": 1, "log2": 1, "log10": 1, "expm1": 1, "log1p": 1, "asin": 1,
    "acos": 1, "atan": 1, "sinh": 1, "cosh": 1, "tanh": 1, "cbrt": 1, "hypot": 2,
    "fmod": 2,
}
SUPPORTED: frozenset[str] = frozenset(_ARITY)

# Max error in ulp vs NumPy (math.erf for erf/erfc), as measured by tests/test_vecmath.py.
# Scalarized functions call the same libm NumPy calls for float64; NumPy's own float32
# SIMD loops (exp, log, sin, cos) may differ from libm's by an ulp.
ULP: dict[str, float] = {name: 1.0 for name in _ARITY} | {"erfc": 2.0, "exp": 2.0, "log": 3.0,
                                                          "tanh": 3.0}

_FT = {"float32": "float", "float64": "double"}


@functools.cache
def load_runtime() -> bool:
    """Load libm (and libmvec if present) so the JIT resolves their symbols.

    Returns whether libmvec is available.
    """
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()
    llvm.load_library_permanently(ctypes.util.find_library("m") or "libm.so.6")
    try:
        llvm.load_library_permanently("libmvec.so.1")
    except RuntimeError:
        return False
    return bool(llvm.address_of_symbol("_ZGVdN4v_exp"))


# ---------------------------------------------------------------------------------
# A tiny SSA builder: Python operators on `_V` emit LLVM instructions on W-lane
# vectors, so each algorithm below reads like the NumPy code it replaces.


def _fconst(v: float, ft: str) -> str:
    if ft == "float":
        v = struct.unpack("<f", struct.pack("<f", v))[0]
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", v))[0]


class _V:
    """One SSA vector value: `ref` is its LLVM name, `ty` its element type."""

    __slots__ = ("b", "ref", "ty")

    def __init__(self, b: _B, ref: str, ty: str):
        self.b, self.ref, self.ty = b, ref, ty

    @property
    def isf(self) -> bool:
        return self.ty in ("float", "double")

    def _lift(self, o) -> _V:
        return o if isinstance(o, _V) else self.b.const(o, self.ty)

    def _op(self, fop: str, iop: str, o, swap=False) -> _V:
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
    def __rshift__(self, o): return self._op("", "ashr", o)

    def __neg__(self):
        return self.b.emit(f"fneg {self.b.vt(self.ty)} {self.ref}", self.ty)

    def _cmp(self, fpred: str, ipred: str, o) -> _V:
        o = self._lift(o)
        op = f"fcmp {fpred}" if self.isf else f"icmp {ipred}"
        return self.b.emit(f"{op} {self.b.vt(self.ty)} {self.ref}, {o.ref}", "i1")

    def lt(self, o): return self._cmp("olt", "slt", o)
    def le(self, o): return self._cmp("ole", "sle", o)
    def gt(self, o): return self._cmp("ogt", "sgt", o)
    def ge(self, o): return self._cmp("oge", "sge", o)
    def eq(self, o): return self._cmp("oeq", "eq", o)
    def ne(self, o): return self._cmp("une", "ne", o)

    def isnan(self) -> _V:
        return self._cmp("uno", "", self)

    def cast(self, op: str, ty: str) -> _V:
        return self.b.emit(f"{op} {self.b.vt(self.ty)} {self.ref} to {self.b.vt(ty)}", ty)

    def bits(self) -> _V:
        return self.cast("bitcast", "i64" if self.ty == "double" else "i32")

    def asfloat(self) -> _V:
        return self.cast("bitcast", "double" if self.ty == "i64" else "float")


class _B:
    """Emits the body of one function over `<W x ft>` vectors."""

    def __init__(self, ft: str, width: int):
        self.ft, self.w = ft, width
        self.lines: list[str] = []
        self.decls: set[str] = set()
        self.n = 0
        self.block = "entry"

    def vt(self, ty: str) -> str:
        return f"<{self.w} x {ty}>"

    def emit(self, rhs: str, ty: str) -> _V:
        self.n += 1
        ref = f"%t{self.n}"
        self.lines.append(f"  {ref} = {rhs}")
        return _V(self, ref, ty)

    def const(self, v, ty: str | None = None) -> _V:
        ty = ty or self.ft
        if ty in ("float", "double"):
            s = _fconst(float(v), ty)
        elif ty == "i1":
            s = "true" if v else "false"
        else:
            s = str(int(v))
        return _V(self, "<" + ", ".join([f"{ty} {s}"] * self.w) + ">", ty)

    def call(self, name: str, *args: _V, ty: str | None = None) -> _V:
        """Call an overloaded LLVM intrinsic such as llvm.fma on vectors."""
        ty = ty or args[0].ty
        vt = self.vt(ty)
        sym = f"{name}.v{self.w}{'f32' if ty == 'float' else 'f64' if ty == 'double' else ty}"
        self.decls.add(f"declare {vt} @{sym}({', '.join(self.vt(a.ty) for a in args)})")
        ops = ", ".join(f"{self.vt(a.ty)} {a.ref}" for a in args)
        return self.emit(f"call {vt} @{sym}({ops})", ty)

    def select(self, c: _V, a, b) -> _V:
        ty = a.ty if isinstance(a, _V) else b.ty
        a = a if isinstance(a, _V) else self.const(a, ty)
        b = b if isinstance(b, _V) else self.const(b, ty)
        return self.emit(f"select {self.vt('i1')} {c.ref}, {self.vt(ty)} {a.ref}, "
                         f"{self.vt(ty)} {b.ref}", ty)

    def fma(self, a: _V, b, c) -> _V:
        return self.call("llvm.fma", a, a._lift(b), a._lift(c))

    def scalar_calls(self, sym: str, args: list[_V]) -> _V:
        """Call scalar `sym` on every lane (the slow path and the scalarized fallback)."""
        ty = args[0].ty
        self.decls.add(f"declare {ty} @{sym}({', '.join(ty for _ in args)})")
        acc = _V(self, "undef", ty)
        for i in range(self.w):
            el = [self.emit(f"extractelement {self.vt(ty)} {a.ref}, i32 {i}", ty) for a in args]
            r = self.emit(f"call {ty} @{sym}({', '.join(f'{ty} {e.ref}' for e in el)})", ty)
            acc = self.emit(f"insertelement {self.vt(ty)} {acc.ref}, {ty} {r.ref}, i32 {i}", ty)
        return acc


def _scalarized(b: _B, name: str, args: list[_V]) -> _V:
    return b.scalar_calls(name + ("f" if b.ft == "float" else ""), args)


@functools.cache
def llvm_ir(name: str, dtype: str, width: int) -> tuple[str, str]:
    """Return `(symbol, module_text)` defining `name` on `<width x dtype>` vectors."""
    if name not in SUPPORTED:
        raise KeyError(f"vecmath has no function {name!r}")
    ft = _FT[dtype]
    load_runtime()
    b = _B(ft, width)
    args = [_V(b, f"%a{i}", ft) for i in range(_ARITY[name])]
    res = _scalarized(b, name, args)
    sym = f"hydra_vm_{name}_{'f32' if ft == 'float' else 'f64'}x{width}"
    vt = b.vt(ft)
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


# ---------------------------------------------------------------------------------
# Array driver: used by the tests and the benchmark (`python -m hydra.backends.cpu.vecmath`).


def _target_machine():
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                        features=llvm.get_host_cpu_features().flatten(),
                                        opt=3, jit=True)


@functools.cache
def array_function(name: str, dtype: str, width: int):
    """JIT `name` into `f(*arrays) -> ndarray` applying it width lanes at a time."""
    import numpy as np

    sym, text = llvm_ir(name, dtype, width)
    ft = _FT[dtype]
    vt = f"<{width} x {ft}>"
    k = _ARITY[name]
    ins = "".join(f"  %p{i} = getelementptr {vt}, ptr %in{i}, i64 %i\n"
                  f"  %v{i} = load {vt}, ptr %p{i}, align 1\n" for i in range(k))
    driver = f"""{text}
define void @drive({", ".join(f"ptr %in{i}" for i in range(k))}, ptr %out, i64 %n) {{
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i2, %loop]
{ins}  %r = call {vt} @{sym}({", ".join(f"{vt} %v{i}" for i in range(k))})
  %po = getelementptr {vt}, ptr %out, i64 %i
  store {vt} %r, ptr %po, align 1
  %i2 = add i64 %i, 1
  %c = icmp ult i64 %i2, %n
  br i1 %c, label %loop, label %exit
exit:
  ret void
}}
"""
    mod = llvm.parse_assembly(driver)
    mod.verify()
    tm = _target_machine()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    cfn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * (k + 1), ctypes.c_int64)(
        engine.get_function_address("drive"))
    np_dt = np.dtype(dtype)

    def run(*arrays):
        xs = [np.ascontiguousarray(a, dtype=np_dt).ravel() for a in np.broadcast_arrays(*arrays)]
        n = xs[0].size
        pad = -n % width
        xs = [np.concatenate([x, np.zeros(pad, np_dt)]) if pad else x for x in xs]
        out = np.empty(n + pad, np_dt)
        if n:
            cfn(*[x.ctypes.data for x in xs], out.ctypes.data, (n + pad) // width)
        return out[:n].reshape(np.broadcast_shapes(*[np.shape(a) for a in arrays]))

    run.engine = engine  # keeps the machine code alive
    return run
