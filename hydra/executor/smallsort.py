"""Per-lane ``np.sort`` / ``np.argsort`` of short rows as one native loop (where the
backend compiles loops: cpu).

Takes: an ``array`` op ``sort`` or ``argsort`` along the last axis (``axis=-1`` or the
last one named) of a varying float or int array whose rows have at most ``SMALL``
elements.
Guarantees: ``sort_step(op, compile_loop)`` is None (the host rule runs it: longer rows,
another axis, ``axis=None``, a uniform operand) or a ``Quick`` step that puts into ``env`` what
the host rule would, bit for bit: NumPy's stable sort along each lane's last axis, ties
in their order (``-0.0`` and ``0.0`` are ties), NaN last in their order.

How: NumPy sorts each row of the batch by a call of its own (~240 ns a row of 8 on this
machine's EPYC); here each row's elements go through Batcher's odd-even merge network
with their places, one compare-exchange per comparator, branch-free (selects).  A pair
is ordered by value (NaN after every number), then by place: a total order whose sorted
sequence is exactly the stable sort's, whatever order the network compares in.  The
loop is built by the backend's ``compile_loop`` (cpu: ``machinecode.loops``, numba source
compiled once per row length and dtype, kept in hydra's disk cache with ``cache=True``).
"""

from __future__ import annotations

import numpy as np

from ..ir.core import Op
from ..types import ArrayType
from .steps import Quick

#: the longest row the network sorts (measured: bench/RESULTS.md, "small sorts")
SMALL = 16


def network(m: int) -> list[tuple[int, int]]:
    """Batcher's odd-even merge sort of ``m`` places as (i, j) comparators, i < j: the
    network of the next power of two with the comparators past ``m`` dropped (the places
    past ``m`` behave as +inf, which no comparator moves down)."""
    n = 1
    while n < m:
        n *= 2
    pairs, p = [], 1
    while p < n:
        k = p
        while k >= 1:
            for j in range(k % p, n - k, 2 * k):
                for i in range(min(k, n - j - k)):
                    if (i + j) // (2 * p) == (i + j + k) // (2 * p):
                        pairs.append((i + j, i + j + k))
            k //= 2
        p *= 2
    return [(i, j) for i, j in pairs if j < m]


def source(m: int, floats: bool, places: bool) -> str:
    """The ``fused(a, o)`` loop: each row of ``a`` ([rows, m]) sorted into ``o``, its
    values or (``places``) the places they came from."""
    lines = ["def fused(a, o):", "    for r in range(a.shape[0]):"]
    ind = " " * 8
    lines += [f"{ind}v{k} = a[r, {k}]" for k in range(m)]
    lines += [f"{ind}p{k} = {k}" for k in range(m)]
    for i, j in network(m):
        if floats:  # j before i: a smaller value, a number before a NaN, a tie's place
            lines += [f"{ind}ni = v{i} != v{i}", f"{ind}nj = v{j} != v{j}",
                      f"{ind}s = (v{j} < v{i}) | (ni & ~nj) | "
                      f"(((v{j} == v{i}) | (ni & nj)) & (p{j} < p{i}))"]
        else:
            lines.append(f"{ind}s = (v{j} < v{i}) | ((v{j} == v{i}) & (p{j} < p{i}))")
        lines += [f"{ind}v{i}, v{j} = _sel(s, v{j}, v{i}), _sel(s, v{i}, v{j})",
                  f"{ind}p{i}, p{j} = _sel(s, p{j}, p{i}), _sel(s, p{i}, p{j})"]
    lines += [f"{ind}o[r, {k}] = {'p' if places else 'v'}{k}" for k in range(m)]
    return "\n".join(lines) + "\n"


def sort_step(op: Op, compile_loop) -> Quick | None:
    """The native step of a sort or argsort of short rows (see the module docstring),
    its loop built by the backend's ``compile_loop``."""
    (x,), t = op.operands, op.result.type
    xt = x.type
    axis = op.attrs["params"].get("axis", -1)
    if not (x.varying and isinstance(xt, ArrayType) and xt.shape and len(xt.shape) >= 1
            and axis is not None and axis % len(xt.shape) == len(xt.shape) - 1
            and 1 < xt.shape[-1] <= SMALL and xt.dtype.kind in "fi"
            and isinstance(t, ArrayType)):
        return None
    m = xt.shape[-1]
    places = op.attrs["fn"] == "argsort"
    loop = compile_loop(source(m, xt.dtype.kind == "f", places),
                    f"the native sort of line {op.loc.line}" if op.loc else "a native sort")
    xid, rid = x.id, op.result.id
    out_dtype = t.dtype.dtype

    def small_sort(host, env):
        a = np.asarray(env[xid])
        rows = a.reshape(-1, m)  # a copy only where the lanes' rows are not evenly strided
        out = np.empty(rows.shape, out_dtype)
        loop(rows, out)
        env[rid] = out.reshape(a.shape)
    return Quick(op, small_sort)
