"""The guide's table of the NumPy that kernels take on per-lane arrays (docs/regen.py
generates it from the operation registry and the frontend's tables): every array
operation, how it is spelled, whether it runs as one call over the lanes or lane by
lane, what it does to memory, whether it has a gradient rule, and its notes (what its
arguments may be, where hydra differs from a first guess about NumPy).
"""

from __future__ import annotations

from .arraylib import SPELLINGS

_AXIS = "axis= an int or a tuple (NumPy refuses a list), keepdims="
#: per array operation: what a user should know beyond "NumPy's semantics"
NOTES = {
    "getitem": "integers (uniform or varying: a gather), constant slices, `None`, `...`; "
               "integer arrays or constant lists (`a[idx]`, `a[:, [0, 2]]`, `a[i, j]` "
               "with arrays that broadcast, in adjacent axes: a take, indices checked); a "
               "bool mask known when the kernel compiles (a "
               "module-level array: `a[MASK]`); any other mask is a CompileError (hint: "
               "`np.where`); `np.flip`/`fliplr`/`flipud` are views (negative steps)",
    "reshape": "constant sizes; `np.ravel`, `a.ravel()`, `np.squeeze`, `np.expand_dims` are "
               "reshapes: views where NumPy's are, so writes reach the base",
    "copy": "`a.copy()` is C-ordered; `np.copy(a)` and `np.array(a)` keep `a`'s axis order "
            "(order K); `a.flatten()` copies; `np.asarray(a)` is `a` itself; "
            "`np.array((x, y))` stacks numbers",
    "transpose": "`.T`, or `np.transpose` with all axes reversed",
    "astype": "a dtype hydra computes in; `copy=False` keeps the array when it fits",
    "matmul": "`U @ x` with a uniform matrix: one GEMM over the lanes",
    "einsum": "a constant subscripts string", "tensordot": "constant axes",
    "pad": "constant pad widths; mode 'constant' (with `constant_values`), 'edge' or "
           "'reflect'; other modes are a CompileError",
    "full": "`np.full(shape, x)` with a computed fill",
    "cumsum": "axis= (None flattens); NumPy's running order: exact",
    "var": f"{_AXIS}, ddof=; sums: within the tolerance",
    "norm": "`np.linalg.norm`; ord None, 'fro' or 2 (vectors) batched, other orders lane "
            "by lane; axis=, keepdims=",
    "sort": "along axis= (default the last, None flattens); always stable "
            "(kind='stable'), NaN last; `a.sort()` (in place) is a CompileError: "
            "`a = np.sort(a)`; on cpu, rows of at most 16 along the last axis go through "
            "a native sorting network (bit-exact)",
    "round": "decimals=; half to even; of a number, `rint`",
    "eye": "N, M, k and dtype constants: each lane its own array",
    "linspace": "start and stop numbers (per-lane or uniform); num, endpoint, dtype "
                "constants; NumPy's arithmetic lane by lane: exact",
    "take": "an int, an int array (per-lane or uniform) or a constant list; axis=; an "
            "index out of range is an IndexError naming the lane (mode='raise' only)",
    "roll": "constant shift and axis (ints or tuples)",
    "diff": "constant n and axis; prepend/append are a CompileError",
    "tile": "constant reps", "repeat": "constant repeats (an int or a tuple), axis=",
    "diag": "of a vector, a matrix; of a matrix, its diagonal (NumPy's read-only view: a "
            "store into it, or a view of it, is a CompileError)",
    "trace": "offset=; axis1=0, axis2=1 only",
    "isclose": "constant rtol, atol, equal_nan", "allclose": "constant rtol, atol, equal_nan",
    "interp": "constant left, right; per-lane tables xp, fp run lane by lane",
    "searchsorted": "side='left' or 'right'; a per-lane sorted array runs lane by lane",
    "conv2d": "one image `[C, H, W]`, uniform weights", "max_pool2d": "stride k by default",
    "avg_pool2d": "stride k by default, no padding",
    "where": "`np.where(c, a, b)`; `np.where(c)` (indices) is a CompileError",
    **dict.fromkeys(("conv2d_grad_input", "conv2d_grad_weight", "max_pool2d_grad",
                     "max_pool2d_pick", "scatter_add", "svd_norm_grad"),
                    "emitted by `hydra.grad`'s adjoint rules only (docs/gradients.md)"),
}
for _name in ("sum", "max", "min", "mean", "prod", "argmax", "argmin", "any", "all"):
    NOTES[_name] = _AXIS
for _same, _as in (("cumprod", "cumsum"), ("std", "var"), ("argsort", "sort"),
                   ("dot", "matmul")):
    NOTES[_same] = NOTES[_as]

#: spellings that are neither ``np.NAME`` nor a method of the same name
_SPECIAL = {"getitem": ["`a[...]`"], "transpose": ["`a.T`"], "astype": ["`a.astype()`"],
            "copy": ["`a.copy()`", "`a.flatten()`", "`np.copy`"], "matmul": ["`a @ b`"],
            "neg": ["`-a`"], "invert": ["`~a`"], "not": ["`~a` of bools"],
            "full": ["`np.full`"], "conv2d": ["`hydra.nn.conv2d`"],
            "max_pool2d": ["`hydra.nn.max_pool2d`"], "avg_pool2d": ["`hydra.nn.avg_pool2d`"]}
#: methods that are refused with a hint (``a.sort()`` sorts in place)
_REFUSED_METHODS = ("sort", "copy", "flatten")


def spellings(name: str, aliases) -> list[str]:
    """How a user writes operation ``name`` (its record's aliases included)."""
    import numpy as np

    from .batching import MATH_UFUNCS, UFUNCS
    from .frontend.arrayops import ALIASES, ARRAY_FUNCTIONS, METHODS, SYMBOLS
    out = list(_SPECIAL.get(name, []))
    if name in SYMBOLS and name != "matmul":
        out.append(f"`{SYMBOLS[name]}`")
    for n in (name, *aliases):
        if n.startswith("np."):
            out.append(f"`{n}`")
        elif hasattr(np, n) and (n in ARRAY_FUNCTIONS or n in MATH_UFUNCS or n in ALIASES
                                 or SPELLINGS.get(n) == name or n in UFUNCS
                                 and isinstance(getattr(np, n), np.ufunc)):
            out.append(f"`np.{n}`")
        if n in METHODS and n not in _REFUSED_METHODS:
            out.append(f"`a.{n}()`")
    return list(dict.fromkeys(out))


def batched(name: str) -> str:
    """How the lanes run: one NumPy call over the lane axis, or lane by lane."""
    from .batching import BATCH, FRESH
    if name in BATCH or name == "getitem":  # getitem: the host's one indexing
        return "one call"
    return "once, copied per lane" if name in FRESH else "lane by lane"
