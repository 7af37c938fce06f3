"""The numba half of the executor's generated loops (``hydra.executor.fuse``): the loads,
stores and selects its generated loops call, and their lowering (imported when a
generated loop is not in the disk cache, so that ``import hydra`` and cached kernels
never import numba).

Takes: the source of a generated ``fused`` function (``hydra.executor.fuse.Fused``,
``loops``).
Guarantees: the function is compiled with ``_ld``/``_st`` (element access by element
offset), ``_sel`` (a branch-free select) and ``_max``/``_min`` (NumPy's NaN rules) in
scope; ``llvm_ir(source, signature, reassoc)`` is the LLVM of its native function for
one signature (``loops``: what hydra's own pipeline turns into a cached object
file).
"""

from __future__ import annotations

import numba
import numpy as np
from numba.core import compiler, registry, types
from numba.core.dispatcher import _FunctionCompiler
from numba.extending import intrinsic


# --- the loads and stores of the generated loops ---------------------------------------

@intrinsic
def _ld(typingctx, arr, off):
    """``arr``'s element at ``off`` elements from its data pointer (any sign, no
    wraparound, no bounds check: the generated loop computes offsets from strides)."""
    def codegen(context, builder, sig, args):
        a = context.make_array(sig.args[0])(context, builder, args[0])
        return context.unpack_value(builder, sig.return_type, builder.gep(a.data, [args[1]]))
    return arr.dtype(arr, types.intp), codegen


@intrinsic
def _st(typingctx, arr, off, value):
    """Store ``value`` at ``off`` elements from ``arr``'s data pointer."""
    def codegen(context, builder, sig, args):
        a = context.make_array(sig.args[0])(context, builder, args[0])
        v = context.cast(builder, args[2], sig.args[2], sig.args[0].dtype)
        context.pack_value(builder, sig.args[0].dtype, v, builder.gep(a.data, [args[1]]))
        return context.get_dummy_value()
    return types.void(arr, types.intp, value), codegen


@intrinsic
def _sel(typingctx, c, a, b):
    """``a if c else b`` as one LLVM select (a branch would stop vectorization)."""
    def codegen(context, builder, sig, args):
        return builder.select(args[0], args[1], args[2])
    return a(types.boolean, a, a), codegen


def _minmax(pred: str):
    def typer(typingctx, a, b):
        def codegen(context, builder, sig, args):
            x, y = args
            if isinstance(sig.args[0], types.Float):  # NumPy: a NaN in a, then in b
                c = builder.or_(builder.fcmp_ordered(pred, x, y),
                                builder.fcmp_unordered("uno", x, x))
            elif sig.args[0].signed:
                c = builder.icmp_signed(pred, x, y)
            else:
                c = builder.icmp_unsigned(pred, x, y)
            return builder.select(c, x, y)  # of equal values (+0.0, -0.0): b, as NumPy
        return a(a, a), codegen
    return typer


_max = intrinsic(_minmax(">"))
_min = intrinsic(_minmax("<"))


def _function(source: str):
    scope = {"np": np, "_ld": _ld, "_st": _st, "_sel": _sel, "_max": _max, "_min": _min}
    exec(compile(source, "<hydra fused chain>", "exec"), scope)
    return scope["fused"]


class _LoweringOnly(_FunctionCompiler):
    """numba's compiler stopped after lowering (as ``@cfunc``'s is): no Python wrapper,
    no optimization of the whole module and no machine code, which hydra's pipeline
    makes instead (``engine.optimize``: the passes numba's finalization would run)."""

    def _customize_flags(self, flags):
        flags.no_cpython_wrapper = True
        flags.no_cfunc_wrapper = True
        flags.no_compile = True
        return flags


def llvm_ir(source: str, signature: tuple, reassoc: bool = False) -> tuple[str, str]:
    """(the LLVM module numba lowers ``fused`` to for ``signature``, its functions
    optimized one by one, with the numba libraries it calls linked in; the symbol of its
    native function).  ``signature``: per argument ``("s", dtype)`` (a scalar) or
    ``("a", dtype, ndim)`` (an array, any layout: the loops index by strides);
    ``reassoc``: compiled with numba's ``fastmath={"reassoc"}`` (``hydra.executor.products``' dot
    loops, whose sums LLVM may then vectorize in an order the kernel fixes)."""
    options = {"nogil": True, "error_model": "numpy"}
    if reassoc:
        options["fastmath"] = {"reassoc"}
    sig = tuple(types.Array(numba.from_dtype(np.dtype(t[1])), t[2], "A") if t[0] == "a"
                else numba.from_dtype(np.dtype(t[1])) for t in signature)
    comp = _LoweringOnly(_function(source), registry.cpu_target,
                         options, {}, compiler.Compiler)
    cres = comp.compile(sig, None)
    lib = cres.library
    mod = lib._final_module
    for linked in dict.fromkeys(lib._linking_libraries):  # as numba's ``finalize`` does
        mod.link_in(linked._get_module_for_linking(), preserve=True)
    return str(mod), cres.fndesc.llvm_func_name
