"""Precomputed steps of per-lane matrix products: small ones as one native loop over
all lanes, the one-GEMM ones as that GEMM.

Takes: a ``matmul`` or ``dot`` array op (``np.matmul``, ``@``, ``np.dot``) whose operands
have static per-lane shapes of rank 1 or 2 and the result's dtype (float32, float64,
int32, int64), at least one of them per-lane, and that NumPy would run as one small
product per lane (``batching.matmul_rule`` calls ``np.matmul`` on a stack of lanes:
uniform ``[m, k] @`` per-lane ``[k, p]``, per-lane ``@`` per-lane), each lane's product at
most ``SMALL`` multiply-adds; the backend's native loop compiler (``planner``).
Guarantees: ``product_step(op, compile_loop)`` is None or a ``steps.Quick`` step that
puts the op's value into ``env``.  The one-GEMM cases (``batching.one_gemm``: ``U @ x``
and ``x @ U`` of per-lane vectors) are ``batching.lane_product``'s one ``np.matmul``
minus the rule's dispatch (~5 us a product).  A small product is a fresh C-ordered
``[N, *out]`` array: np.matmul on a stack of lanes makes one tiny BLAS call per lane
(~0.2-0.3 us each); the generated loop, specialized on the per-lane shapes and strides
(like ``fuse.Fused``, at most ``SPECIALIZE`` layouts per op), runs ~2x faster
(tests/test_cpu_products.py checks its asm for packed instructions); like the fused
chains' loops it is a ``machinecode.loops.Loop``, in the disk cache with ``cache=True``
(on the cpu backend).  Two loop shapes, picked from the operands' strides at run time:

- **rows** (``b``'s rows unit-stride, ``k <= ROWS_K``): ``out[i, :] = a[i, 0] * b[0, :] +
  a[i, 1] * b[1, :] + ...``, added in the order of ``k`` (the naive dot product's order,
  each product rounded: no FMA), vectorized over ``j``.
- **dots** (``a``'s rows and ``b``'s columns unit-stride: ``a @ b.T``, ``x @ y``): each
  ``out[i, j]`` is a dot product over ``k`` that LLVM vectorizes with reassociation
  allowed on that sum alone (``fastmath={"reassoc"}``): partial sums per vector slot
  (and per unrolled copy of the loop), added in a tree at the end; up to ``DOTS_P``
  columns, a row's dot products share one loop over ``k``.  The order is fixed
  by the kernel: the same inputs give the same bits on every call, at every lane count.

Under a mask with few active lanes (the policy's ``op_below``) the host rule computes
the active rows only; otherwise every lane's row is computed (inactive lanes' rows are
never read).  Any other layout, an empty dimension, or a lane count or rank the step
does not expect (an undefined value, a uniform array passed through a select) goes to
the host rule.
Integer products wrap as NumPy's do, so they are exact in either order; float products
agree with the per-example function within the summation-order tolerance (SPEC section
8, docs/guide.md "Per-lane arrays").
"""

from __future__ import annotations

import numpy as np

from ..batching import lane_product, one_gemm
from ..ir.core import Op
from ..types import ArrayType
from .steps import Quick

#: per-lane multiply-adds above which the product stays with BLAS (one call per lane)
SMALL = 1 << 15
#: rows loops spell out the sum over ``k`` (one term per ``k``) up to this length
ROWS_K = 32
#: dots loops with at most this many columns compute a row's dot products together
DOTS_P = 16
#: per op, at most this many operand layouts get a kernel of their own
SPECIALIZE = 4
_DTYPES = frozenset({"float32", "float64", "int32", "int64"})


def product_step(op: Op, compile_loop=None) -> Quick | None:
    """The step of a product ``op`` (``matmul`` or ``dot``), or None (see the module
    docstring): operands and result of static shapes in one dtype, a per-lane result."""
    r = op.result
    if len(op.operands) != 2 or not r.varying or not all(
            isinstance(v.type, ArrayType) and v.type.shape is not None
            and v.type.dtype == r.type.dtype for v in (*op.operands, r)):
        return None
    a, b = op.operands
    if one_gemm(bool(a.varying), bool(b.varying), a.type.ndim, b.type.ndim):
        return _gemm(op)
    return small_product(op, compile_loop) if compile_loop is not None else None


def small_product(op: Op, compile_loop) -> Quick | None:
    """The native step of a small per-lane product, or None."""
    a, b = op.operands
    sa, sb = tuple(a.type.shape), tuple(b.type.shape)
    if not (1 <= len(sa) <= 2 and 1 <= len(sb) <= 2) or sa[-1] != sb[0] \
            or op.result.type.dtype.name not in _DTYPES:
        return None
    m = sa[0] if len(sa) == 2 else 1
    k = sa[-1]
    p = sb[1] if len(sb) == 2 else 1
    if m * k * p > SMALL or 0 in (m, k, p):
        return None
    return Quick(op, _Product(op, sa, sb, compile_loop).run)


class _Product:
    """The run of one product step: the layout check, the kernel, the host fallback."""

    def __init__(self, op: Op, sa: tuple, sb: tuple, compile_loop) -> None:
        self.op = op
        self.compile_loop = compile_loop
        self.sa, self.sb = sa, sb
        self.vary = tuple(bool(v.varying) for v in op.operands)
        self.ids = [v.id for v in op.operands]
        self.rid = op.result.id
        self.mid = op.mask.id if op.mask is not None else None
        self.out = tuple(op.result.type.shape)
        self.dtype = op.result.type.dtype.dtype
        self.kernels: dict[tuple, object] = {}

    def run(self, host, env: dict) -> None:
        lanes = host.lanes
        x, y = (env[i] for i in self.ids)
        kern = self._kernel(x, y, lanes)
        if kern is None or self.mid is not None and \
                np.count_nonzero(env[self.mid]) < host.policy.op_below * lanes:
            host.run_op(self.op, env)
            return
        out = np.empty((lanes,) + self.out, self.dtype)
        kern(lanes, out, x, y)
        env[self.rid] = out

    def _kernel(self, x, y, lanes: int):
        for arr, v, s in ((x, self.vary[0], self.sa), (y, self.vary[1], self.sb)):
            if not isinstance(arr, np.ndarray) or arr.dtype != self.dtype \
                    or arr.shape != ((lanes,) if v else ()) + s:
                return None
        key = (x.strides[self.vary[0]:], y.strides[self.vary[1]:])
        kern = self.kernels.get(key, False)
        if kern is False:
            size = self.dtype.itemsize
            if len(self.kernels) >= SPECIALIZE or any(st % size for s in key for st in s):
                return None
            sa, sb = (tuple(st // size for st in s) for s in key)
            source, fast = generate(self.sa, self.sb, sa, sb, self.vary, self.dtype)
            label = (f"the native product of line {self.op.loc.line}" if self.op.loc
                     else "a native product")
            kern = self.kernels[key] = None if source is None else \
                self.compile_loop(source, label, fast)
        return kern


def generate(sa: tuple, sb: tuple, ta: tuple, tb: tuple, vary: tuple,
             dtype: np.dtype) -> tuple[str | None, bool]:
    """(The source of the ``fused(n, out, a, b)`` loop of ``a @ b`` with per-lane shapes
    ``sa``, ``sb`` and per-lane element strides ``ta``, ``tb``, whether it needs
    reassociation), or (None, False) where neither loop shape fits the layout."""
    m, k = (sa if len(sa) == 2 else (1,) + sa)
    p = sb[1] if len(sb) == 2 else 1
    ai, ak = ta if len(sa) == 2 else (0,) + ta
    bk, bj = tb if len(sb) == 2 else tb + (0,)
    lines = ["def fused(n, o, a, b):"]
    for name, v in (("a", vary[0]), ("b", vary[1])):
        lines.append(f"    {name}l = {name}.strides[0] // {dtype.itemsize}" if v
                     else f"    {name}l = 0")
    lines += ["    for l in range(n):", "        ab = l * al", "        bb = l * bl",
              f"        ob = l * {m * p}", f"        for i in range({m}):"]
    ind = " " * 12
    if len(sb) == 2 and bj == 1 and p > 1 and k <= ROWS_K:
        lines += [f"{ind}x{q} = _ld(a, ab + i * {ai} + {q * ak})" for q in range(k)]
        terms = " + ".join(f"x{q} * _ld(b, bb + {q * bk} + j)" for q in range(k))
        lines += [f"{ind}for j in range({p}):", f"{ind}    _st(o, ob + i * {p} + j, {terms})"]
        return "\n".join(lines) + "\n", False
    if ak == 1 and bk == 1 and p <= DOTS_P:
        # the row's dot products in one loop over k: a[i, k] is loaded once for all
        # of them (37 -> 24 us for the digits CNN's [8, 64] @ [64, 9] at 256 lanes)
        lines += [f"{ind}s{j} = np.{dtype.name}(0)" for j in range(p)]
        lines += [f"{ind}for q in range({k}):", f"{ind}    x = _ld(a, ab + i * {ai} + q)"]
        lines += [f"{ind}    s{j} += x * _ld(b, bb + {j * bj} + q)" for j in range(p)]
        lines += [f"{ind}_st(o, ob + i * {p} + {j}, s{j})" for j in range(p)]
        return "\n".join(lines) + "\n", dtype.kind == "f"
    if ak == 1 and bk == 1:
        lines += [f"{ind}for j in range({p}):",
                  f"{ind}    s = np.{dtype.name}(0)",
                  f"{ind}    for q in range({k}):",
                  f"{ind}        s += _ld(a, ab + i * {ai} + q) * _ld(b, bb + j * {bj} + q)",
                  f"{ind}    _st(o, ob + i * {p} + j, s)"]
        return "\n".join(lines) + "\n", dtype.kind == "f"
    return None, False


def _gemm(op: Op) -> Quick:
    """The one GEMM of ``batching.one_gemm``'s cases."""
    a, b = op.operands
    r = op.result
    vary = [bool(a.varying), bool(b.varying)]
    da, db = a.type.ndim, b.type.ndim
    want = [((0,) if v else ()) + tuple(t.type.shape) for v, t in zip(vary, (a, b))]
    ids = [a.id, b.id]
    rid = r.id
    dtype = r.type.dtype.dtype
    mid = op.mask.id if op.mask is not None else None

    def step(host, env):
        lanes = host.lanes
        args = [env[i] for i in ids]
        if mid is not None and np.count_nonzero(env[mid]) < host.policy.op_below * lanes:
            host.run_op(op, env)
            return
        for x, v, w in zip(args, vary, want):
            if type(x) is not np.ndarray or x.dtype != dtype \
                    or x.shape != ((lanes,) + w[1:] if v else w):
                host.run_op(op, env)
                return
        value = lane_product(np, *args, *vary, da, db)  # (np.dot is np.matmul here)
        env[rid] = value if value.dtype == dtype else value.astype(dtype)
    return Quick(op, step)
