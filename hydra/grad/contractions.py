"""The adjoint rules of ``np.einsum`` and ``np.tensordot`` (same signature as
``hydra.grad.rules``): each operand's adjoint is the einsum of the result's adjoint and
the other operands, with that operand's subscripts as the output (JAX's transpose of a
contraction); a tensordot is the einsum its axes spell.
"""

from __future__ import annotations

from ..errors import CompileError
from .arrays import shape_of
from .emit import is_array


def letters(n: int, skip: str = "") -> str:
    return "".join(c for c in "abcdefghijklmnopqrstuvw" if c not in skip)[:n]


def _tensordot_subscripts(na: int, nb: int, axes) -> str:
    if isinstance(axes, int):
        axes = (tuple(range(na - axes, na)), tuple(range(axes)))
    ax_a, ax_b = ((x,) if isinstance(x, int) else tuple(x) for x in axes)
    ax_a, ax_b = tuple(a % na for a in ax_a), tuple(b % nb for b in ax_b)
    la = letters(na)
    lb = list(letters(nb, la))
    for i, j in zip(ax_a, ax_b):
        lb[j] = la[i]
    lb = "".join(lb)
    result = "".join(c for k, c in enumerate(la) if k not in ax_a) + \
        "".join(c for k, c in enumerate(lb) if k not in ax_b)
    return f"{la},{lb}->{result}"


def _einsum_adjoints(e, op, spec: str, args, g):
    spec = spec.replace(" ", "")
    ins, arrow, result = spec.partition("->")
    ins = ins.split(",")
    if not arrow:
        letters = "".join(ins)
        result = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    if "." in spec or any(len(set(s)) != len(s) for s in ins):
        raise CompileError("hydra.grad: the adjoint of np.einsum with '...' or a letter "
                           "repeated in one operand is not written yet", op.loc)
    grads = []
    for k, (sub, x) in enumerate(zip(ins, args)):
        others = [(s, v) for i, (s, v) in enumerate(zip(ins, args)) if i != k]
        operands = ([(result, g)] if is_array(g) else []) + others
        seen = "".join(s for s, _ in operands)
        kept = "".join(c for c in sub if c in seen)
        if operands:
            t = e.arr("einsum", [v for _, v in operands],
                      {"subscripts": ",".join(s for s, _ in operands) + "->" + kept})
        else:
            t = None
        if not is_array(g):
            t = g if t is None else e.mul(t, g)
        if kept != sub:  # letters only this operand has: g spreads along them
            if is_array(t):
                t = e.arr("reshape", [t], {"shape": tuple(
                    shape_of(x)[i] if c in seen else 1 for i, c in enumerate(sub))})
            t = e.mul(e.arr("ones_like", [x], {"dtype": None}), t)
        grads.append(t)
    return grads


def einsum(e, op, args, out, g):
    """Each operand's adjoint is the einsum of ``g`` and the other operands with that
    operand's subscripts as the output (spread along the letters only it has)."""
    return _einsum_adjoints(e, op, op.attrs["params"]["subscripts"], args, g)


def tensordot(e, op, args, out, g):
    """As the einsum that the axes spell."""
    a, b = args
    spec = _tensordot_subscripts(len(shape_of(a)), len(shape_of(b)),
                                 op.attrs["params"].get("axes", 2))
    return _einsum_adjoints(e, op, spec, args, g)
