"""JIT'd array driver for the cpu backend's vector math, and its benchmark.

    python -m bench.vecmath [names]   # ns per element: inline, libm, libmvec, NumPy

Takes: a vecmath function name, dtype, width and variant ("inline": hydra's own code,
``vecmath.llvm_ir``; "libm": one libm call per lane; "libmvec": glibc's vector
variants, for comparison only).  Guarantees: `array_function` returns
`f(*arrays, out=None)` that applies the function `width` lanes at a time over
broadcast, padded arrays (a loop in LLVM IR, compiled with MCJIT for the host CPU);
`benchmark` prints ns per element for each variant next to NumPy.  tests/test_vecmath.py
uses the driver.
"""

from __future__ import annotations

import ctypes
import functools
import math

import llvmlite.binding as llvm

from hydra.backends.cpu.vecbuild import Builder, Vec
from hydra.backends.cpu.vecmath import _ARITY, _FT, define, llvm_ir, load_runtime

# Max error in ulp of glibc 2.36's libmvec vs NumPy, measured as vecmath.ULP is; fmod
# has none.
ULP_LIBMVEC: dict[str, float] = {
    "exp": 4, "exp2": 2, "expm1": 3, "log": 7, "log2": 2, "log10": 3, "log1p": 2, "pow": 1,
    "sin": 3, "cos": 3, "tan": 3, "asin": 2, "acos": 2, "atan": 2, "atan2": 3, "sinh": 3,
    "cosh": 2, "tanh": 2, "erf": 2, "erfc": 4, "cbrt": 4, "hypot": 1,
}


@functools.cache
def _load_libmvec() -> bool:
    load_runtime()
    try:
        llvm.load_library_permanently("libmvec.so.1")
    except RuntimeError:
        return False
    return bool(llvm.address_of_symbol("_ZGVdN4v_exp"))


def _libmvec_symbol(name: str, ft: str) -> str:
    lanes = 8 if ft == "float" else 4  # the AVX2 ("d") variants
    return f"_ZGVdN{lanes}{'v' * _ARITY[name]}_{name}{'f' * (ft == 'float')}"


def _libmvec(b: Builder, name: str, args: list[Vec]) -> Vec:
    """glibc's vector variant on width/lanes slices."""
    ty, sym = args[0].ty, _libmvec_symbol(name, b.ft)
    lanes = 8 if ty == "float" else 4
    lt = f"<{lanes} x {ty}>"
    b.decls.add(f"declare {lt} @{sym}({', '.join([lt] * len(args))})")
    parts = []
    for start in range(0, b.w, lanes):
        mask = ", ".join(f"i32 {start + i}" for i in range(lanes))
        sl = [b.emit(f"shufflevector {b.vt(ty)} {a.ref}, {b.vt(ty)} poison, <{lanes} x i32> "
                     f"<{mask}>", ty) for a in args]
        parts.append(b.emit(f"call {lt} @{sym}({', '.join(f'{lt} {v.ref}' for v in sl)})", ty))
    while len(parts) > 1:  # concatenate pairwise
        n = 2 * lanes
        mask = ", ".join(f"i32 {i}" for i in range(n))
        parts = [b.emit(f"shufflevector <{lanes} x {ty}> {parts[i].ref}, <{lanes} x {ty}> "
                        f"{parts[i + 1].ref}, <{n} x i32> <{mask}>", ty)
                 for i in range(0, len(parts), 2)]
        lanes = n
    return parts[0]


def libmvec_ir(name: str, dtype: str, width: int) -> tuple[str, str] | None:
    """Like `vecmath.llvm_ir` but calling glibc's libmvec (AVX2 variants), or None where
    this process has no such symbol or width is not a multiple of its lanes.  Often
    1.5-4x faster than the inline code, but less accurate (`ULP_LIBMVEC`)."""
    ft = _FT[dtype]
    if width % (8 if ft == "float" else 4) or name not in ULP_LIBMVEC:
        return None
    if not _load_libmvec() or not llvm.address_of_symbol(_libmvec_symbol(name, ft)):
        return None
    return _variant(name, dtype, width, "libmvec")


@functools.cache
def _variant(name: str, dtype: str, width: int, variant: str) -> tuple[str, str]:
    if variant == "inline":
        return llvm_ir(name, dtype, width)
    ft = _FT[dtype]
    load_runtime()
    b = Builder(ft, width)
    args = [Vec(b, f"%a{i}", ft) for i in range(_ARITY[name])]
    if variant == "libm":
        res = b.scalar_calls(name + ("f" if ft == "float" else ""), args)
    else:
        res = _libmvec(b, name, args)
    return define(b, f"bench_vm_{name}_{ft}x{width}_{variant}", args, res)


def _target_machine():
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                        features=llvm.get_host_cpu_features().flatten(),
                                        opt=3, jit=True)


@functools.cache
def array_function(name: str, dtype: str, width: int, variant: str = "inline"):
    """JIT `name` into `f(*arrays, out=None) -> ndarray`, width lanes at a time."""
    import numpy as np

    sym, text = _variant(name, dtype, width, variant)
    ft = _FT[dtype]
    vt = f"<{width} x {ft}>"
    k = _ARITY[name]
    # element-typed addressing: <3 x double> would stride by its padded alloc size
    ins = "".join(f"  %p{i} = getelementptr {ft}, ptr %in{i}, i64 %off\n"
                  f"  %v{i} = load {vt}, ptr %p{i}, align 1\n" for i in range(k))
    driver = f"""{text}
define void @drive({", ".join(f"ptr %in{i}" for i in range(k))}, ptr %out, i64 %n) {{
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i2, %loop]
  %off = mul i64 %i, {width}
{ins}  %r = call {vt} @{sym}({", ".join(f"{vt} %v{i}" for i in range(k))})
  %po = getelementptr {ft}, ptr %out, i64 %off
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

    def run(*arrays, out=None):
        xs = [np.ascontiguousarray(a, dtype=np_dt).ravel() for a in np.broadcast_arrays(*arrays)]
        n = xs[0].size
        pad = -n % width
        xs = [np.concatenate([x, np.zeros(pad, np_dt)]) if pad else x for x in xs]
        if out is None or pad:
            out = np.empty(n + pad, np_dt)
        if n:
            cfn(*[x.ctypes.data for x in xs], out.ctypes.data, (n + pad) // width)
        return out[:n].reshape(np.broadcast_shapes(*[np.shape(a) for a in arrays]))

    run.engine = engine  # keeps the machine code alive
    return run


def benchmark(names, n: int = 1 << 20) -> None:
    """Print ns per element: inline vector code (width 8), libm per lane, glibc's
    libmvec (AVX2 variants; '-' where absent), NumPy (math.erf per element for erf)."""
    import time

    import numpy as np

    def best(f, *a, **kw):
        f(*a, **kw)
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            f(*a, **kw)
            times.append(time.perf_counter() - t0)
        return min(times) / n * 1e9

    rng = np.random.default_rng(0)
    _load_libmvec()
    print(f"ns/element over {n} elements; width 8; 'libm' = one libm call per lane")
    heads = ("libm", "libmvec", "numpy")
    print(f"{'':8}" + "".join(f"{h:>8}" for d in ("f32", "f64") for h in (d, *heads)))
    for name in names:
        row = []
        for dtype in ("float32", "float64"):
            lo, hi = {"asin": (-1, 1), "acos": (-1, 1), "sin": (-100, 100), "cos": (-100, 100),
                      "tan": (-100, 100), "exp": (-80, 80), "erf": (-4, 4)}.get(name, (0.1, 3))
            args = [rng.uniform(lo, hi, n).astype(dtype) for _ in range(_ARITY[name])]
            npf = getattr(np, {"atan2": "arctan2", "pow": "power", "asin": "arcsin",
                               "acos": "arccos", "atan": "arctan"}.get(name, name), None)
            if npf is None:  # erf, erfc: NumPy has none; math.erf per element via vectorize
                npf = functools.partial(lambda f, *a, out: f(*a), np.vectorize(
                    getattr(math, name), otypes=[dtype]))
            out = np.empty(n, dtype)  # preallocated: page faults would swamp the timings
            vec = (llvm.address_of_symbol(_libmvec_symbol(name, _FT[dtype]))
                   and best(array_function(name, dtype, 8, "libmvec"), *args, out=out))
            row += [best(array_function(name, dtype, 8), *args, out=out),
                    best(array_function(name, dtype, 8, "libm"), *args, out=out), vec,
                    best(npf, *args, out=out)]
        print(f"{name:8}" + "".join(f"{v:8.2f}" if v else f"{'-':>8}" for v in row))


if __name__ == "__main__":
    import sys

    from hydra.backends.cpu.vecmath import SUPPORTED

    benchmark(sys.argv[1:] or sorted(SUPPORTED))
