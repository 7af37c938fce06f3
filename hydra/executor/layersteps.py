"""Layer steps (where the backend compiles loops: cpu): a convolution or a dense layer
with its bias and relu, or a hand-written pooling, as one planned host step.

Takes: the kernel's top-level steps (ops and native phases, in program order, before
``planner.schedule``) and ``users`` (value id -> the ops that read it).
Guarantees: ``fold`` returns the same steps with each of these runs of consecutive
ops replaced by one ``Layer`` step:

- ``conv2d(x, w[, b])`` (x varying, the weights uniform), then optionally relu (the
  frontend's ``where(le(y, 0.0), 0.0, y)``, ``hydra.nn.relu`` of an array), and after
  ``hydra.nn.relu`` optionally ``max_pool2d(., 2)`` (even height and width);
- ``matmul(W, x)`` (a uniform matrix, a per-lane vector), ``add`` of a uniform vector
  (either operand order), then optionally relu;

- ``reshape(x, (..., H // s, s, W // s, s))`` then ``max`` or ``mean`` over the two
  window axes (``Pool``: ``hydra.windows``' pools);

where every value inside the run is read by the run's own ops only.  The step puts
into ``env`` the run's last value, the value its ops' host rules would give: the
convolution is ``hydra.windows.conv2d`` with the bias and the relu applied to each
chunk of the GEMM's output while it is in the cache (the same elementwise operations,
so the same bits; a pool takes each chunk's 2x2 maxima before the bias and the relu,
which commute with it: the same bits again, and the full-size activation is never
written), the dense layer the GEMM ``products`` runs (``X @ W.T``) and the
bias and relu in place.  Why: the relu and the bias would otherwise be a fused
elementwise loop each, a numba compile of 0.1-0.3 s at the kernel's first call
(LeNet-5's forward had five) and one more pass over the activations at every call.
Where the step cannot take its inputs as planned (an operand not yet defined, a mask
that leaves most lanes out), it runs its ops' host rules one by one.
"""

from __future__ import annotations

import numpy as np

from .. import windows
from ..batching import matmul_rule
from ..ir.core import Op, Value
from ..types import ArrayType
from .policy import current as current_policy
from .steps import Step


def _float_array(v: Value) -> bool:
    t = v.type
    return isinstance(t, ArrayType) and t.shape is not None and t.dtype.kind == "f"


def _only_read_by(v: Value, ops: list[Op], users: dict) -> bool:
    mine = {id(o) for o in ops}
    readers = users.get(v.id, [])
    return bool(readers) and all(id(u) in mine for u in readers)


def _relu_at(steps: list, k: int, y: Value, zeros: set[int]):
    """(the ops, the zero's place) of a relu of ``y`` at ``steps[k]``, or None: the
    frontend's ``where(le(y, 0.0), 0.0, y)`` (``hydra.nn.relu``: place None), or
    ``np.maximum(y, 0.0)`` / ``np.maximum(0.0, y)`` (place 1 / 0)."""
    first = steps[k] if k < len(steps) else None
    if not (isinstance(first, Op) and first.opcode == "array" and first.mask is None):
        return None
    if first.attrs["fn"] == "maximum":
        a, z = first.operands
        place = 1
        if a.id != y.id:
            a, z, place = z, a, 0
        if a.id == y.id and z.id in zeros and first.result.type == y.type:
            return [first], place
        return None
    wh = steps[k + 1] if k + 1 < len(steps) else None
    if not (first.attrs["fn"] == "le" and isinstance(wh, Op) and wh.opcode == "array"
            and wh.attrs["fn"] == "where" and wh.mask is None):
        return None
    a, z = first.operands
    c, z2, y2 = wh.operands
    if a.id != y.id or y2.id != y.id or c.id != first.result.id or z.id != z2.id \
            or z.id not in zeros or wh.result.type != y.type:
        return None
    return [first, wh], None


def _zeros(steps: list) -> set[int]:
    """Ids of the constants +0.0 among ``steps``."""
    return {s.result.id for s in steps if isinstance(s, Op) and s.opcode == "const"
            and isinstance(s.attrs["value"], float) and s.attrs["value"] == 0.0
            and not np.signbit(s.attrs["value"])}


def fold(steps: list, users: dict) -> list:
    """``steps`` with the layer runs replaced by ``Layer`` steps (module docstring)."""
    zeros = _zeros(steps)
    out: list = []
    k = 0
    while k < len(steps):
        layer = _match(steps, k, users, zeros) or _pool(steps, k, users)
        if layer is None:
            out.append(steps[k])
            k += 1
        elif isinstance(layer, Pool):  # the reshape (a view) stays: others may read it
            out += [steps[k], layer]
            k += 2
        else:
            out.append(layer)
            k += len(layer.ops)
    return out


def _match(steps: list, k: int, users: dict, zeros: set[int]):
    op = steps[k]
    if not (isinstance(op, Op) and op.opcode == "array" and len(op.results) == 1
            and op.attrs["fn"] in ("conv2d", "matmul") and op.result.varying
            and _float_array(op.result)):
        return None
    y = op.result
    if op.attrs["fn"] == "conv2d":
        x, *ws = op.operands
        if not x.varying or any(w.varying for w in ws):
            return None
        ops, bias = [op], None
    else:
        w, x = op.operands
        if w.varying or not x.varying or w.type.ndim != 2 or x.type.ndim != 1 \
                or not all(_float_array(v) and v.type.dtype == y.type.dtype for v in (w, x)):
            return None
        add = steps[k + 1] if k + 1 < len(steps) else None
        if not (isinstance(add, Op) and add.opcode == "array" and add.attrs["fn"] == "add"
                and add.mask is None and y.id in [v.id for v in add.operands]):
            return None
        bias = next((v for v in add.operands if v.id != y.id), None)
        if bias is None or bias.varying or not _float_array(bias) \
                or bias.type.dtype != y.type.dtype or bias.type.shape != y.type.shape \
                or add.result.type != y.type:
            return None
        ops = [op, add]
        y = add.result
    relu = _relu_at(steps, k + len(ops), y, zeros)
    pool = None
    if relu is not None:
        ops += relu[0]
        pool = _pool_at(steps, k + len(ops), ops[-1].result, op.mask) \
            if op.attrs["fn"] == "conv2d" and relu[1] is None else None
        if pool is not None and _only_read_by(ops[-1].result, [pool], users):
            ops.append(pool)
        else:
            pool = None
    if len(ops) == 1:
        return None  # a lone convolution: its host rule is the same work
    if not all(_only_read_by(o.result, ops, users) for o in ops[:-1]):
        return None
    return Layer(ops, bias, relu and (relu[1], relu[0][0].operands[relu[1]].id
                                      if relu[1] is not None else None), pool and 2)


def _pool_at(steps: list, k: int, y: Value, mask: Value | None):
    """The ``max_pool2d(y, 2)`` op at ``steps[k]`` (stride 2, even height and width,
    under the convolution's mask), or None."""
    op = steps[k] if k < len(steps) else None
    if not (isinstance(op, Op) and op.opcode == "array" and op.attrs["fn"] == "max_pool2d"
            and op.operands[0].id == y.id
            and (op.mask is None or mask is not None and op.mask.id == mask.id)):
        return None
    params, shape = op.attrs["params"], y.type.shape
    if params.get("k") != 2 or params.get("stride") not in (None, 2) \
            or shape[-1] % 2 or shape[-2] % 2:
        return None
    return op


def _pool(steps: list, k: int, users: dict):
    """A hand-written pooling: ``x.reshape(..., H // s, s, W // s, s)`` then ``max`` or
    ``mean`` over the two window axes, as a ``Pool`` step, or None."""
    r = steps[k]
    q = steps[k + 1] if k + 1 < len(steps) else None
    if not (isinstance(r, Op) and isinstance(q, Op) and r.opcode == q.opcode == "array"
            and r.attrs["fn"] == "reshape" and q.attrs["fn"] in ("max", "mean")
            and r.mask is None and q.operands[0].id == r.result.id
            and r.operands[0].varying):
        return None
    src, win = r.operands[0].type, r.result.type
    if not (isinstance(src, ArrayType) and isinstance(win, ArrayType) and src.shape
            and win.shape and src.ndim >= 2 and win.ndim == src.ndim + 2):
        return None
    lead, (h, w) = tuple(src.shape[:-2]), tuple(src.shape[-2:])
    a, s, b, s2 = win.shape[-4:]
    axis = q.attrs["params"].get("axis")
    axes = {x % win.ndim for x in axis} if isinstance(axis, tuple) else None
    if tuple(win.shape[:-4]) != lead or s != s2 or a * s != h or b * s != w \
            or axes != {win.ndim - 3, win.ndim - 1} or q.attrs["params"].get("keepdims") \
            or q.attrs["params"].get("dtype") is not None:
        return None
    return Pool(r.operands[0], q, s)


class Pool(Step):
    """``x.reshape(..., H // s, s, W // s, s).max(axis=(-3, -1))`` (or ``.mean``) as
    ``hydra.windows.max_pool2d(x, s)`` (``avg_pool2d``) over all lanes: the same maxima
    (a ufunc reduce over the window axes runs its inner loop once per window); the mean
    adds in the window's row-major order (the summation-order tolerance, SPEC section
    8)."""

    def __init__(self, x: Value, op: Op, size: int) -> None:
        self.ops = [op]  # right after the reshape of ``x``, which stays a step
        self.size = size
        self.fn = windows.max_pool2d if op.attrs["fn"] == "max" else windows.avg_pool2d
        self.x = x.id
        self.shape = tuple(x.type.shape)
        self.dtype = op.result.type.dtype.dtype
        self.rid = op.result.id

    def describe(self) -> str:
        line = self.ops[0].loc.line if self.ops[0].loc else 0
        return (f"pool step ({self.fn.__name__}, {self.size}x{self.size} windows): "
                f"{self.ops[0].attrs['fn']} over the windows of a reshape (line {line})")

    @property
    def writes(self) -> list[Value]:
        return [self.ops[0].result]

    def run(self, host, env: dict) -> None:
        x = env[self.x]
        if type(x) is not np.ndarray or x.shape != (host.lanes,) + self.shape:
            for op in self.ops:
                host.run_op(op, env)
            return
        out = self.fn(x, self.size)
        env[self.rid] = out if out.dtype == self.dtype else out.astype(self.dtype)


class Layer(Step):
    """A convolution or a dense layer with its bias and relu (module docstring)."""

    def __init__(self, ops: list[Op], bias: Value | None, relu, pool=None) -> None:
        self.ops = ops
        #: a 2x2 max pool after the relu, taken from each chunk of the convolution
        self.pool = pool
        head = ops[0]
        self.conv = head.attrs["fn"] == "conv2d"
        self.params = head.attrs["params"]
        self.ins = [v.id for v in head.operands] + ([bias.id] if bias is not None else [])
        self.want = [tuple(v.type.shape) for v in head.operands] + (
            [tuple(bias.type.shape)] if bias is not None else [])
        self.vary = [bool(v.varying) for v in head.operands] + [False] * (bias is not None)
        self.dtype = head.result.type.dtype.dtype
        #: None: no relu; (None, None): where(y <= 0, 0, y); (place, zero's id): np.maximum
        self.relu = relu
        self.mask = head.mask.id if head.mask is not None else None
        self.rid = ops[-1].result.id
        self.type = head.result.type

    def describe(self) -> str:
        what = "convolution" if self.conv else "dense layer"
        if self.pool:
            what += ", 2x2 max pool of each chunk"
        fns = ", ".join(o.attrs["fn"] for o in self.ops)
        line = self.ops[0].loc.line if self.ops[0].loc else 0
        return f"layer step ({what}, bias and relu in one pass): {fns} (line {line})"

    def _planned(self, env: dict, lanes: int) -> list | None:
        if self.mask is not None and \
                np.count_nonzero(env[self.mask]) < current_policy().op_below * lanes:
            return None
        args = [env[i] for i in self.ins]
        for a, v, shape in zip(args, self.vary, self.want):
            if type(a) is not np.ndarray or a.dtype != self.dtype \
                    or a.shape != ((lanes,) + shape if v else shape):
                return None
        return args

    @property
    def writes(self) -> list[Value]:
        return [self.ops[-1].result]  # the values inside the run only its own ops read

    def run(self, host, env: dict) -> None:
        lanes = host.lanes
        args = self._planned(env, lanes)
        if args is None:
            for op in self.ops:
                host.run_op(op, env)
            return
        relu = None
        if self.relu is not None:
            place, zid = self.relu
            relu = windows.relu_ if place is None else _maximum(env[zid], place)
        if self.conv:
            env[self.rid] = windows.conv2d(*args, **self.params, relu=relu, pool=self.pool)
            return
        w, x, b = args
        out = matmul_rule(np.matmul, [w, x], [False, True], lanes, self.type, {})
        np.add(out, b, out=out)
        if relu is not None:
            relu(out)
        env[self.rid] = out


def _maximum(zero, place: int):
    """``np.maximum`` of an array with ``zero`` (its operand at ``place``), in place:
    the elementwise op itself, so the bits of NaNs and zeros are NumPy's."""
    if place == 1:
        return lambda a: np.maximum(a, zero, out=a)
    return lambda a: np.maximum(zero, a, out=a)
