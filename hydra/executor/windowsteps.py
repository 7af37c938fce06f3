"""Native steps of the pooling layers' adjoints, where the backend compiles loops (cpu).

Takes: an ``array`` op ``max_pool2d_grad(x, g)`` (``hydra.grad``'s adjoint of
``hydra.nn.max_pool2d``, ``hydra.windowgrads``) whose images ``x`` vary, or
``avg_pool2d_grad(g)`` (``hydra.windows``) of a varying ``g``; of a float dtype shared by
the operands and the result, windows of at most ``MAX_WINDOW`` pixels a side.
Guarantees: ``pool_grad_step(op, compile_loop)`` / ``avg_pool_grad_step`` is None (the
host rule runs it) or a ``Quick`` step that puts into ``env`` what the host rule would,
bit for bit.  max: each window's ``g`` added to its first maximum in row-major order (a
NaN counts as the maximum, as ``argmax``; ``-0.0`` and ``0.0`` tie), the windows of each
image in row-major order (``np.add.at``'s order, which overlapping windows make visible).
avg: each window's ``g / (k*k)`` (NumPy's one division) added to its pixels, each
pixel's shares in the host rule's order (its passes over the window offsets).  A mask
with an inactive lane, an operand of another shape or dtype than the IR says, or a loop
that is still building goes to ``host.run_op``; so do images holding a NaN (max).

How: the max's host rule takes each window's ``argmax`` over a window view (one short
inner loop per window) and scatters with ``np.add.at``: 2.3 ms for the digits CNN's 512
lanes of ``[8, 8, 8]``, k=2 (passes of masked ufuncs over strided slices: 1.4 ms); the
loop visits each window once, unrolled, and keeps the slot of its first maximum: 0.12 ms
(about 2 ns a window on this machine's EPYC, LeNet's 24x24 images too).  The avg's host
rule is ``k*k`` strided read-modify-write passes (0.32 ms there, twice the forward
pool); the loop writes each window's pixels once (0.07 ms).  The loops are built by the
backend's ``compile_loop`` (cpu: ``machinecode.loops``, once per window shape and dtype,
kept in hydra's disk cache).
"""

from __future__ import annotations

import numpy as np

from ..ir.core import Op
from ..types import ArrayType
from .fuse import loop_ready
from .steps import Quick

#: the widest window the loop unrolls (``k*k`` compares per window)
MAX_WINDOW = 8


def source(k: int, s: int, ho: int, wo: int) -> str:
    """The ``fused(x, g, o, nan)`` loop: ``x [images, H, W]``, ``g [images, ho, wo]``,
    ``o`` (zeros like ``x``) gets each window's ``g`` at its first maximum; ``nan[0]``
    is set where ``x`` holds a NaN (whose window the caller gives to the host rule: a
    NaN test in the comparison made the loop 6x slower, a branch per pixel)."""
    lines = ["def fused(x, g, o, nan):",
             "    bad = False",
             "    for r in range(x.shape[0]):",
             f"        for a in range({ho}):",
             f"            for b in range({wo}):",
             f"                best = x[r, a * {s}, b * {s}]",
             "                bad |= best != best",
             "                m = 0"]
    for i in range(k):  # the window unrolled; its first maximum's slot m in 0..k*k-1
        for j in range(k):
            if i or j:
                lines += [f"                v = x[r, a * {s} + {i}, b * {s} + {j}]",
                          "                bad |= v != v",
                          "                if v > best:",
                          "                    best = v",
                          f"                    m = {i * k + j}"]
    # one index chosen, not two: selecting a row and a column made LLVM branch (4x slower)
    lines += [f"                o[r, a * {s} + m // {k}, b * {s} + m % {k}] += g[r, a, b]",
              "    nan[0] = bad"]
    return "\n".join(lines) + "\n"


def pool_grad_step(op: Op, compile_loop) -> Quick | None:
    """The native step of ``max_pool2d_grad`` (see the module docstring), or None."""
    if op.opcode != "array" or op.attrs["fn"] != "max_pool2d_grad" or len(op.operands) != 2:
        return None
    x, g = op.operands
    t = op.result.type
    if not (x.varying and all(isinstance(v.type, ArrayType) and v.type.shape is not None
                              and v.type.dtype == t.dtype for v in (x, g))
            and isinstance(t, ArrayType) and t.dtype.kind == "f" and x.type.ndim >= 2):
        return None
    params = op.attrs["params"]
    k = params["k"]
    s = k if params.get("stride") is None else params["stride"]
    xs, gs = tuple(x.type.shape), tuple(g.type.shape)
    h, w = xs[-2:]
    ho, wo = (h - k) // s + 1, (w - k) // s + 1
    if ho < 1 or wo < 1 or gs[-2:] != (ho, wo) or gs[:-2] != xs[:-2] or k > MAX_WINDOW:
        return None  # (a g that broadcasts: the host rule)
    loop = compile_loop(source(k, s, ho, wo), f"the native max_pool2d adjoint of line "
                        f"{op.loc.line}" if op.loc else "a native max_pool2d adjoint")
    xid, gid, rid = x.id, g.id, op.result.id
    mid = op.mask.id if op.mask is not None else None
    dtype = t.dtype.dtype
    vary_g = bool(g.varying)

    def max_pool_grad(host, env):
        lanes = host.lanes
        a, d = env[xid], env[gid]
        if not (isinstance(a, np.ndarray) and isinstance(d, np.ndarray)
                and a.dtype == dtype and d.dtype == dtype and a.shape == (lanes,) + xs
                and d.shape == ((lanes,) if vary_g else ()) + gs
                and (mid is None or np.all(env[mid]))):
            host.run_op(op, env)
            return
        if not vary_g:
            d = np.broadcast_to(d, (lanes,) + gs)
        out = np.zeros(a.shape, dtype)
        nan = np.zeros(1, np.bool_)
        args = [a.reshape(-1, h, w), d.reshape(-1, ho, wo), out.reshape(-1, h, w), nan]
        if not loop_ready(compile_loop, loop, args):
            host.run_op(op, env)
            return
        loop(*args)
        if nan[0]:  # argmax's first NaN: the host rule's
            host.run_op(op, env)
            return
        env[rid] = out
    return Quick(op, max_pool_grad)


def avg_source(k: int, s: int, ho: int, wo: int, dtype: str) -> str:
    """The ``fused(g, o)`` loop: each window's ``g [images, ho, wo] / (k*k)`` added to its
    pixels of ``o`` (zeros ``[images, H, W]``): per pixel in the host rule's order (its
    offsets' passes, row-major); windows that do not overlap take the offsets inside."""
    share = f"g[r, a, b] / np.{dtype}({k * k})"  # NumPy's g / (k*k), one division
    if s >= k:  # each pixel in at most one window: one division per window
        lines = ["def fused(g, o):", "    for r in range(g.shape[0]):",
                 f"        for a in range({ho}):", f"            for b in range({wo}):",
                 f"                v = {share}"]
        lines += [f"                o[r, a * {s} + {i}, b * {s} + {j}] += v"
                  for i in range(k) for j in range(k)]
    else:
        lines = ["def fused(g, o):", "    for r in range(g.shape[0]):",
                 f"        for i in range({k}):", f"            for j in range({k}):",
                 f"                for a in range({ho}):",
                 f"                    for b in range({wo}):",
                 f"                        o[r, a * {s} + i, b * {s} + j] += {share}"]
    return "\n".join(lines) + "\n"


def avg_pool_grad_step(op: Op, compile_loop) -> Quick | None:
    """The native step of ``avg_pool2d_grad`` (``hydra.windows``'s ``k*k`` passes of
    ``part += g / (k*k)``, the same adds in the same order: bit for bit), for a varying
    float ``g`` of the result's dtype; else None."""
    if op.opcode != "array" or op.attrs["fn"] != "avg_pool2d_grad" or len(op.operands) != 1:
        return None
    (g,), t = op.operands, op.result.type
    if not (g.varying and isinstance(g.type, ArrayType) and g.type.shape is not None
            and isinstance(t, ArrayType) and g.type.dtype == t.dtype and t.dtype.kind == "f"
            and g.type.ndim >= 2):
        return None
    params = op.attrs["params"]
    k, h, w = params["k"], params["height"], params["width"]
    s = k if params.get("stride") is None else params["stride"]
    gs = tuple(g.type.shape)
    if gs[-2:] != ((h - k) // s + 1, (w - k) // s + 1) or min(gs[-2:]) < 1 or k > MAX_WINDOW:
        return None
    ho, wo = gs[-2:]
    dtype = t.dtype.dtype
    loop = compile_loop(avg_source(k, s, ho, wo, dtype.name),
                        f"the native avg_pool2d adjoint of line {op.loc.line}" if op.loc
                        else "a native avg_pool2d adjoint")
    gid, rid = g.id, op.result.id
    mid = op.mask.id if op.mask is not None else None
    shape = gs[:-2] + (h, w)

    def avg_pool_grad(host, env):
        lanes = host.lanes
        d = env[gid]
        if not (isinstance(d, np.ndarray) and d.dtype == dtype and d.shape == (lanes,) + gs
                and (mid is None or np.all(env[mid]))):
            host.run_op(op, env)
            return
        out = np.zeros((lanes,) + shape, dtype)
        args = [d.reshape(-1, ho, wo), out.reshape(-1, h, w)]
        if not loop_ready(compile_loop, loop, args):
            host.run_op(op, env)
            return
        loop(*args)
        env[rid] = out
    return Quick(op, avg_pool_grad)
