"""More NumPy on per-lane arrays (SPEC section 8, issue 27): each function's per-lane
definition (NumPy itself, on one lane's arrays), its batching rule (one NumPy call over
the lane axis) and its memory declaration, registered into ``hydra.batching``'s
``PER_LANE`` and ``BATCH`` tables and ``hydra.ir.core.ARRAY_MEMORY``.

Each rule gives, lane by lane, what the definition gives: cumulative sums and sorts
run along the same axis in the same order (bit for bit); ``var``/``std``/``norm``/
``trace`` sum, within the section 8 tolerance.  A rule must be safe on the rows of
inactive lanes, whose values are whatever a skipped branch left: ``take`` clips their
indices (the frontend checks the active lanes' ones first, naming the lane).

Functions that NumPy defines as views or copies of other operations (``np.ravel``,
``np.flip``, ``np.squeeze``, ``np.copy`` ...) are spelled by the frontend as those
operations (a reshape, basic indexing with negative steps, a copy), so a store through
them reaches their base exactly where NumPy's would (``SPELLINGS``).
"""

from __future__ import annotations

import numpy as np

#: the frontend spellings that are other operations: name -> the operation it becomes
SPELLINGS = {
    "ravel": "reshape", "flatten": "copy", "squeeze": "reshape", "expand_dims": "reshape",
    "flip": "getitem", "fliplr": "getitem", "flipud": "getitem", "array": "copy",
    "asarray": "copy",
}


def _shift(axis, nd):
    """A per-lane axis (or tuple of axes) as an axis of the batched array."""
    if isinstance(axis, tuple):
        return tuple(a + 1 if a >= 0 else a for a in axis)
    return axis + 1 if axis >= 0 else axis


def _flat(a, n):
    return np.asarray(a).reshape(n, -1)


# --- per-lane definitions ----------------------------------------------------------------

def cumsum(a, axis=None):
    """np.cumsum(a, axis): running sums (flattened where axis is None)."""
    return np.cumsum(a, axis=axis)


def cumprod(a, axis=None):
    """np.cumprod(a, axis): running products (flattened where axis is None)."""
    return np.cumprod(a, axis=axis)


def var(a, axis=None, ddof=0, keepdims=False):
    """np.var(a, axis, ddof=ddof, keepdims=keepdims): the variance."""
    return np.var(a, axis=axis, ddof=ddof, keepdims=keepdims)


def std(a, axis=None, ddof=0, keepdims=False):
    """np.std(a, axis, ddof=ddof, keepdims=keepdims): the standard deviation."""
    return np.std(a, axis=axis, ddof=ddof, keepdims=keepdims)


def norm(a, ord=None, axis=None, keepdims=False):
    """np.linalg.norm(a, ord, axis, keepdims): vector and matrix norms."""
    return np.linalg.norm(a, ord=ord, axis=axis, keepdims=keepdims)


def sort(a, axis=-1):
    """np.sort(a, axis, kind='stable'): sorted, NaN last."""
    return np.sort(a, axis=axis, kind="stable")


def argsort(a, axis=-1):
    """np.argsort(a, axis, kind='stable'): the indices that sort a, ties in order."""
    return np.argsort(a, axis=axis, kind="stable")


def round_(a, decimals=0):
    """np.round(a, decimals): half to even."""
    return np.round(a, decimals)


def eye(N, M=None, k=0, dtype="float64"):
    """np.eye(N, M, k, dtype): a lane's own identity-like matrix."""
    return np.eye(N, M, k, dtype=dtype)


def linspace(start, stop, num=50, endpoint=True, dtype=None):
    """np.linspace(start, stop, num, endpoint, dtype): evenly spaced numbers."""
    return np.linspace(start, stop, num, endpoint=endpoint, dtype=dtype)


def take(a, indices, axis=None):
    """np.take(a, indices, axis): elements at integer indices (negative from the end)."""
    return np.take(a, indices, axis=axis)


def roll(a, shift, axis=None):
    """np.roll(a, shift, axis): elements shifted cyclically."""
    return np.roll(a, shift, axis=axis)


def diff(a, n=1, axis=-1):
    """np.diff(a, n, axis): n-th differences."""
    return np.diff(a, n=n, axis=axis)


def tile(a, reps):
    """np.tile(a, reps): a repeated as tiles."""
    return np.tile(a, reps)


def repeat(a, repeats, axis=None):
    """np.repeat(a, repeats, axis): each element repeated."""
    return np.repeat(a, repeats, axis=axis)


def diag(v, k=0):
    """np.diag(v, k): a diagonal matrix of a vector, or a matrix's diagonal (a copy)."""
    return np.diag(v, k).copy()


def trace(a, offset=0):
    """np.trace(a, offset): the sum of a diagonal."""
    return np.trace(a, offset)


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """np.isclose(a, b, rtol, atol, equal_nan): elementwise closeness."""
    return np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """np.allclose(a, b, rtol, atol, equal_nan): all elements close (a bool)."""
    return np.bool_(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


def interp(x, xp, fp, left=None, right=None):
    """np.interp(x, xp, fp, left, right): piecewise-linear interpolation."""
    return np.interp(x, xp, fp, left=left, right=right)


def searchsorted(a, v, side="left"):
    """np.searchsorted(a, v, side): where v would go in the sorted a."""
    return np.searchsorted(a, v, side=side)


def pad(a, pad_width, mode="constant", constant_values=0):
    """np.pad(a, pad_width, mode, constant_values): constant, edge or reflect padding."""
    if mode == "constant":
        return np.pad(a, pad_width, mode=mode, constant_values=constant_values)
    return np.pad(a, pad_width, mode=mode)


# --- operations only hydra.grad's adjoint rules emit (hydra.grad.arrays.EMITTED) ------------

def scatter_add(g, idx, n, axis=0):
    """The adjoint of a gather (np.add.at): g added into n places along axis at the int
    indices idx, whose axes replaced that axis in g; repeated indices add up."""
    g, idx = np.asarray(g), np.clip(np.asarray(idx, np.int64), 0, max(n - 1, 0))
    s = g.shape
    out = np.zeros(s[:axis] + (n,) + s[axis + idx.ndim:], g.dtype)
    np.add.at(out, (slice(None),) * axis + (idx,), g)
    return out


def svd_norm_grad(x, ord, axis=None):
    """The gradient of the matrix norm of singular values ord (2: u1 v1^T of the largest,
    -2: of the smallest, 'nuc': U V^T) over the axes (rows, columns), by an SVD; NaN
    where a matrix is not finite."""
    rows, cols = (-2, -1) if axis is None else axis
    m = np.moveaxis(np.asarray(x), (rows, cols), (-2, -1))
    finite = np.isfinite(m).all(axis=(-2, -1), keepdims=True)
    u, _, vh = np.linalg.svd(np.where(finite, m, 0), full_matrices=False)
    if ord == "nuc":
        d = u @ vh
    else:
        k = slice(0, 1) if ord == 2 else slice(-1, None)
        d = u[..., :, k] @ vh[..., k, :]
    return np.moveaxis(np.where(finite, d, np.nan), (-2, -1), (rows, cols))


def max_pool2d_pick(x, h, k, stride=None):
    """The transpose of max_pool2d_grad: each window of x takes h at its first maximum in
    row-major order (the gradient of a gradient through max_pool2d)."""
    from numpy.lib.stride_tricks import sliding_window_view as windows
    s = k if stride is None else stride
    x, h = np.broadcast_arrays(x, h)
    win = windows(x, (k, k), axis=(-2, -1))[..., ::s, ::s, :, :]
    at = win.reshape(win.shape[:-2] + (k * k,)).argmax(-1)[..., None]
    hw = windows(h, (k, k), axis=(-2, -1))[..., ::s, ::s, :, :]
    return np.take_along_axis(hw.reshape(hw.shape[:-2] + (k * k,)), at, -1)[..., 0]


PER_LANE = {
    "cumsum": cumsum, "cumprod": cumprod, "var": var, "std": std, "norm": norm,
    "sort": sort, "argsort": argsort, "round": round_, "eye": eye, "linspace": linspace,
    "take": take, "roll": roll, "diff": diff, "tile": tile, "repeat": repeat, "diag": diag,
    "trace": trace, "isclose": isclose, "allclose": allclose, "interp": interp,
    "searchsorted": searchsorted, "pad": pad, "scatter_add": scatter_add,
    "svd_norm_grad": svd_norm_grad, "max_pool2d_pick": max_pool2d_pick,
}

# --- batching rules: rule(f, args, vary, n, out, params) ----------------------------------


def lane_args(args, vary, i):
    return [a[i] if v else a for a, v in zip(args, vary)]


def loop_rule(f, args, vary, n, out, params):
    """The fallback rule: the per-lane definition once per lane, stacked."""
    return np.stack([np.asarray(f(*lane_args(args, vary, i), **params)) for i in range(n)])


def along_axis_rule(f, args, vary, n, out, params):
    """An operation along one axis (cumsum, sort, roll, diff, repeat, var ...): the
    same axis of the batched array; axis None flattens each lane first."""
    (a,) = args
    params = dict(params)
    axis = params.pop("axis", None)
    if axis is None:
        res = f(_flat(a, n), axis=1, **params)
        if f in (roll,):
            res = res.reshape(a.shape)
        return res
    return f(a, axis=_shift(axis, a.ndim - 1), **params)


def reduce_rule(f, args, vary, n, out, params):
    """var, std: a reduction over the shifted axes (all of a lane's where None)."""
    (a,) = args
    axis = params.get("axis")
    axes = tuple(range(1, a.ndim)) if axis is None else _shift(axis, a.ndim - 1)
    return f(a, **{**params, "axis": axes})


def norm_rule(f, args, vary, n, out, params):
    """The 2-norm of vectors and the Frobenius norm: sqrt of the sum of squares over
    the shifted axes; other orders lane by lane."""
    (a,) = args
    nd = a.ndim - 1
    o, axis, keep = params.get("ord"), params.get("axis"), params.get("keepdims", False)
    vector = isinstance(axis, int) or axis is None and nd == 1
    if not (o is None or o == "fro" or o == 2 and vector) or np.iscomplexobj(a):
        return loop_rule(f, args, vary, n, out, params)
    x = a if a.dtype.kind == "f" else a.astype(np.float64)
    axes = tuple(range(1, nd + 1)) if axis is None else _shift(axis, nd)
    return np.sqrt(np.sum(x * x, axis=axes, keepdims=keep))


def elementwise_params_rule(f, args, vary, n, out, params):
    """round, isclose: elementwise with static parameters; varying operands aligned
    right as NumPy broadcasts them."""
    r = max(np.ndim(a) - v for a, v in zip(args, vary))
    return f(*[_align(a, r, n) if v else a for a, v in zip(args, vary)], **params)


def _align(a, r, n):
    a = np.asarray(a)
    return a.reshape((n,) + (1,) * (r - (a.ndim - 1)) + a.shape[1:])


def allclose_rule(f, args, vary, n, out, params):
    close = elementwise_params_rule(isclose, args, vary, n, out, params)
    return np.asarray(close).reshape(n, -1).all(axis=1)


def linspace_rule(f, args, vary, n, out, params):
    """NumPy's linspace of one lane's start and stop, for all lanes (its arithmetic,
    step by step: a lane whose step is 0 scales as NumPy does for it alone)."""
    num, endpoint, dtype = params["num"], params.get("endpoint", True), params.get("dtype")
    start, stop = (np.broadcast_to(np.asarray(x) * 1.0, (n,)) for x in args)
    dt = np.result_type(start, stop, float(num))
    div = num - 1 if endpoint else num
    y = np.arange(0, num, dtype=dt)[None, :]
    delta = (stop - start)[:, None]
    if div > 0:
        step = delta / div
        y = np.where(step == 0, (y / div) * delta, y * step)
    else:
        y = y * delta
    y = y + start[:, None]
    if endpoint and num > 1:
        y[:, -1] = stop
    if dtype is not None and np.issubdtype(np.dtype(dtype), np.integer):
        y = np.floor(y)
    return y.astype(dtype or dt)


def take_rule(f, args, vary, n, out, params):
    """np.take for all lanes; indices clipped into range (the active lanes' were
    checked, inactive lanes' rows are never observed)."""
    a, idx = args
    va, vi = vary
    axis = params.get("axis")
    if axis is None:
        a = _flat(a, n) if va else np.ravel(a)
        axis = 0
    nd = np.ndim(a) - va
    axis = axis % nd
    size = np.shape(a)[axis + va]
    if size == 0:  # no index is in range: every active lane fails the check
        shape = (n,) + tuple(getattr(out, "shape", ()))
        return np.zeros(shape, out.dtype.dtype if hasattr(out, "shape") else out.dtype)
    idx = np.asarray(idx, np.int64)
    idx = np.clip(np.where(idx < 0, idx + size, idx), 0, max(size - 1, 0))
    if not vi:
        return np.take(a, idx, axis=axis + va)
    if not va:
        return np.moveaxis(np.take(a, idx, axis=axis), axis, 0)
    # both vary: a gather along the lane's axis, lane by lane in one fancy index
    moved = np.moveaxis(a, axis + 1, 1)                       # [N, size, rest...]
    lanes = np.arange(n).reshape((n,) + (1,) * (idx.ndim - 1))
    res = moved[lanes, idx]                                   # [N, *ishape, rest...]
    ik = idx.ndim - 1
    # the axes before ``axis`` go back in front of the index axes
    return np.moveaxis(res, tuple(range(1 + ik, 1 + ik + axis)), tuple(range(1, 1 + axis)))


def tile_rule(f, args, vary, n, out, params):
    (a,) = args
    reps = params["reps"]
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    d = max(a.ndim - 1, len(reps))
    return np.tile(_align(a, d, n), (1,) + (1,) * (d - len(reps)) + reps)


def diag_rule(f, args, vary, n, out, params):
    (v,) = args
    k = params.get("k", 0)
    if v.ndim == 3:
        return np.diagonal(v, k, axis1=1, axis2=2).copy()
    m = v.shape[1]
    size = m + abs(k)
    res = np.zeros((n, size, size), v.dtype)
    i = np.arange(m)
    res[:, i + max(-k, 0), i + max(k, 0)] = v
    return res


def trace_rule(f, args, vary, n, out, params):
    return np.trace(args[0], params.get("offset", 0), axis1=1, axis2=2)


def interp_rule(f, args, vary, n, out, params):
    if vary[1] or vary[2]:  # per-lane tables: lane by lane
        return loop_rule(f, args, vary, n, out, params)
    return np.interp(args[0], args[1], args[2], **params)


def searchsorted_rule(f, args, vary, n, out, params):
    if vary[0]:
        return loop_rule(f, args, vary, n, out, params)
    return np.searchsorted(args[0], args[1], **params)


def pad_rule(f, args, vary, n, out, params):
    width = ((0, 0),) + tuple(params["pad_width"])
    mode = params.get("mode", "constant")
    if mode != "constant":
        return np.pad(args[0], width, mode=mode)
    cv = params.get("constant_values", 0)
    if isinstance(cv, tuple):
        cv = ((0, 0),) + tuple(cv)
    return np.pad(args[0], width, mode=mode, constant_values=cv)


def scatter_add_rule(f, args, vary, n, out, params):
    """One np.add.at for all lanes: the lane axis and the index axes first."""
    g, idx = (np.asarray(a) for a in args)
    size, axis = params["n"], params.get("axis", 0)
    idx = np.clip(idx.astype(np.int64), 0, max(size - 1, 0))
    ik = idx.ndim - vary[1]
    if not vary[0]:
        g = np.broadcast_to(g, (n,) + g.shape)
    moved = np.moveaxis(g, tuple(range(1 + axis, 1 + axis + ik)), tuple(range(1, 1 + ik)))
    res = np.zeros((n, size) + moved.shape[1 + ik:], g.dtype)
    lanes = np.arange(n).reshape((n,) + (1,) * ik)
    np.add.at(res, (lanes, idx if vary[1] else idx[None]), moved)
    return np.moveaxis(res, 1, 1 + axis)


def svd_norm_grad_rule(f, args, vary, n, out, params):
    rows, cols = params.get("axis") or (-2, -1)
    return f(args[0], params["ord"], (_shift(rows, 0), _shift(cols, 0)))


BATCH = {
    **{name: along_axis_rule for name in (
        "cumsum", "cumprod", "sort", "argsort", "roll", "diff", "repeat")},
    "var": reduce_rule, "std": reduce_rule, "norm": norm_rule,
    "round": elementwise_params_rule, "isclose": elementwise_params_rule,
    "allclose": allclose_rule, "linspace": linspace_rule, "take": take_rule,
    "tile": tile_rule, "diag": diag_rule, "trace": trace_rule, "interp": interp_rule,
    "searchsorted": searchsorted_rule, "pad": pad_rule, "scatter_add": scatter_add_rule,
    "svd_norm_grad": svd_norm_grad_rule, "max_pool2d_pick": elementwise_params_rule,
}

#: results that are a lane's own new array even from uniform operands
FRESH = frozenset({"eye", "linspace"})
#: array fns that make arrays from numbers only (they read no array)
MAKERS = frozenset({"eye", "linspace"})
#: results that carry no gradient, and why (the registry's adjoint slots)
NO_GRAD_RESULT = frozenset({"argsort", "searchsorted", "isclose", "allclose"})
NO_GRAD_STEP = frozenset({"round"})
NO_GRAD_VALUE = frozenset({"eye"})
