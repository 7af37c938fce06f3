"""The adjoint rules of ``np.einsum`` and ``np.tensordot`` (same signature as
``hydra.grad.rules``): each operand's adjoint is the einsum of the result's adjoint and
the other operands, with that operand's subscripts as the output (JAX's transpose of a
contraction); a tensordot is the einsum its axes spell.  ``...`` is spelled as letters
of its own, an axis that broadcasts (size 1 against n) gets one of its own; a letter
repeated in one operand (a diagonal, ``"ii->i"``) is tied to its
first place by an identity matrix.
"""

from __future__ import annotations

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


def _fresh(used: str, n: int) -> str:
    return "".join(c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in used)[:n]


def _ellipsis(ins: list[str], result: str | None, args):
    """The subscripts with each ``...`` spelled as letters of their own (right-aligned,
    as NumPy broadcasts them)."""
    counts = [len(shape_of(v)) - (len(s) - 3) if "..." in s else 0
              for s, v in zip(ins, args)]
    width = max(counts)
    names = _fresh("".join(ins) + (result or ""), width)
    spelled = [s.replace("...", names[width - k:]) for s, k in zip(ins, counts)]
    if result is None:  # NumPy's implicit output: the ellipsis axes, then the single letters
        flat = "".join(s.replace("...", "") for s in ins)
        return spelled, names + "".join(sorted(c for c in set(flat) if flat.count(c) == 1))
    return spelled, result.replace("...", names)


def _unbroadcast(ins: list[str], result: str, args) -> list[str]:
    """An axis of size 1 that broadcasts against size n (NumPy's einsum allows it) gets a
    letter of its own in its operand: summed over one element forward, spread back
    along it in the operand's adjoint."""
    sizes: dict[str, int] = {}
    for s, v in zip(ins, args):
        for c, n in zip(s, shape_of(v)):
            sizes[c] = max(sizes.get(c, 1), n)
    spare = iter(_fresh("".join(ins) + result, 26))
    out = []
    for s, v in zip(ins, args):
        own = {c: next(spare) for c, n in zip(s, shape_of(v)) if n < sizes[c]}
        out.append("".join(own.get(c, c) for c in s))
    return out


def _eye(e, n: int, dtype: str):
    i = e.arr("arange", [], {"start": 0, "stop": n, "step": 1, "dtype": "int64"})
    rows = e.arr("reshape", [i], {"shape": (n, 1)})
    return e.arr("astype", [e.arr("eq", [rows, i])], {"dtype": dtype})


def _einsum_adjoints(e, op, spec: str, args, g):
    spec = spec.replace(" ", "")
    ins, arrow, result = spec.partition("->")
    ins = ins.split(",")
    if "." in spec:
        ins, result = _ellipsis(ins, result if arrow else None, args)
    elif not arrow:
        letters = "".join(ins)
        result = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    ins = _unbroadcast(ins, result, args)
    dtype = (g.type.dtype if is_array(g) else g.type).name
    grads = []
    for k, (sub, x) in enumerate(zip(ins, args)):
        others = [(s, v) for i, (s, v) in enumerate(zip(ins, args)) if i != k]
        operands = ([(result, g)] if is_array(g) else []) + others
        # a letter repeated in this operand (a diagonal): each later place a letter of
        # its own, tied to the first by an identity matrix
        names, spare = [], iter(_fresh("".join(ins) + result, len(sub)))
        for i, c in enumerate(sub):
            if c in sub[:i]:
                names.append(next(spare))
                operands.append((c + names[-1], _eye(e, shape_of(x)[i], dtype)))
            else:
                names.append(c)
        seen = "".join(s for s, _ in operands)
        kept = "".join(c for c in names if c in seen)
        if operands:
            t = e.arr("einsum", [v for _, v in operands],
                      {"subscripts": ",".join(s for s, _ in operands) + "->" + kept})
        else:
            t = None
        if not is_array(g):
            t = g if t is None else e.mul(t, g)
        if len(kept) != len(names):  # letters only this operand has: g spreads along them
            if is_array(t):
                t = e.arr("reshape", [t], {"shape": tuple(
                    shape_of(x)[i] if c in seen else 1 for i, c in enumerate(names))})
            t = e.mul(e.arr("ones_like", [x], {"dtype": None}), t)
        grads.append(t)
    return grads


def einsum(e, op, args, out, g):
    """Each operand's adjoint is the einsum of ``g`` and the other operands with that
    operand's subscripts as the output (spread along the letters only it has)."""
    return _einsum_adjoints(e, op, op.attrs["params"]["subscripts"], args, g)


def tensordot(e, op, args, out, g):
    """As the einsum that the axes spell."""
    return tensordot_adjoints(e, op, args, g, op.attrs["params"].get("axes", 2))


def tensordot_adjoints(e, op, args, g, axes):
    """The adjoints of ``np.tensordot(a, b, axes)`` (also np.dot of stacks)."""
    a, b = args
    spec = _tensordot_subscripts(len(shape_of(a)), len(shape_of(b)), axes)
    return _einsum_adjoints(e, op, spec, args, g)
