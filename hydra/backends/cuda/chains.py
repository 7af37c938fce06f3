"""Fused elementwise chains of the cuda backend's host side as one generated
``numba.cuda`` kernel each.

Takes: a chain the executor's fusion found (``hydra.executor.fuse.Fused``:
``planner.schedule`` with ``fuse.fusable``'s rule; its ``inputs``, the ``outputs`` an
op outside the chain reads, the broadcast per-lane ``shape``) and, at run time, its
inputs as the launch's namespace holds them (device arrays of it, uniform numbers).
Guarantees: ``ChainKernel.run(xp, lanes, args, memory)`` computes the chain's
``outputs`` (fresh C-ordered ``[N, *s]`` arrays of ``xp``) by ONE kernel launch, one
thread per element of ``[N, *shape]``; each input is read through its own strides
(views, transposes and broadcast operands cost no copy), values that die inside the
chain live in registers.  Each element computes exactly what the ops' NumPy calls
compute: the expressions are the cpu fused loop's (``fuse.element_expr``: NumPy's
dtype resolution per op, the IR's dtype after it), float ``+ - *`` spelled as
separately rounded operations (``device.add_rn64`` ...: NVVM contracts a product and a
sum into an FMA by default), ``sqrt``/``floor``/... by ``device``'s helpers (NumPy's
special values), ``maximum``/``minimum`` with NumPy's NaN rule.  The kernel is built
once per chain and per input layout kind (array ranks, dtypes: ``key``) and kept.

Where it runs: ``wanted(xp)``: on a device namespace (CuPy on a GPU), or wherever
``HYDRA_CUDA_CHAIN_KERNELS=1`` forces it (the simulator's one test of this path: a
simulator kernel costs ~10 us per element, so there the chain otherwise runs as the
ops' NumPy expressions); ``HYDRA_CUDA_CHAIN_KERNELS=0`` turns it off.
"""

from __future__ import annotations

import os

import numpy as np
from numba import cuda

from ...arraynamespace import Strict
from ...executor.fuse import Fused, element_expr, shape_of
from ...types import ArrayType, ScalarType
from . import launch
from .structured import PRELUDE


def wanted(xp) -> bool:
    """Does a chain run as one generated kernel on namespace ``xp``?"""
    switch = os.environ.get("HYDRA_CUDA_CHAIN_KERNELS")
    if switch in ("0", "1"):
        return switch == "1"
    return xp is not np and not isinstance(xp, Strict)


# --- device functions the generated kernels call ----------------------------------------

@cuda.jit(device=True)
def select(c, a, b):
    return a if c else b


@cuda.jit(device=True)
def maximum(a, b):
    """``np.maximum``: a NaN in ``a``, then in ``b``, wins; of equal values, ``b``."""
    return a if a > b or a != a else b


@cuda.jit(device=True)
def minimum(a, b):
    return a if a < b or a != a else b


_HEADER = PRELUDE + ("from hydra.backends.cuda.chains import maximum as _max, "
                     "minimum as _min, select as _sel\n")
_ROUNDED = {"add", "sub", "mul", "square"}
_DEV_MATH = {"sqrt", "floor", "ceil", "trunc"}


def _spell(fn: str, dtype: np.dtype, args: list[str]) -> str | None:
    """cuda's own spelling of an op on floats (``fuse.element_expr``'s hook)."""
    t = f"np.{dtype.name}"
    if fn in _ROUNDED:
        a = args[0]
        b = a if fn == "square" else args[1]
        return f"{t}(dev.{'mul' if fn == 'square' else fn}_rn{dtype.itemsize * 8}({a}, {b}))"
    if fn in _DEV_MATH:
        return f"{t}(dev.{fn}({args[0]}))"
    if fn in ("isinf", "isfinite"):
        return f"math.{fn}({args[0]})"
    return None


#: generated source -> its kernel (one build per distinct chain and layout)
_KERNELS: dict[str, object] = {}


def _dtype(v) -> np.dtype:
    return v.type.dtype.dtype if isinstance(v.type, ArrayType) else v.type.dtype


def _number(a) -> bool:
    """Is ``a`` a number on the host (not a device array: that would be a transfer)?"""
    return isinstance(a, (int, float, bool, np.generic)) or \
        isinstance(a, np.ndarray) and a.ndim == 0


def _contiguous(m):
    return np.ascontiguousarray(m) if isinstance(m, np.ndarray) else m


class ChainKernel:
    """The generated kernels of one chain (module docstring)."""

    def __init__(self, chain: Fused) -> None:
        self.ops = chain.ops
        self.inputs = chain.inputs
        self.outputs = chain.outputs
        self.shape = chain.shape
        self.label = chain.label()

    def key(self, args: list) -> tuple | None:
        """Per input: ``("s",)`` a number, ``("a", ndim)`` an array (its lane axis
        counted); None where a value is not as the chain's types say (an undefined
        arm, a dtype other than the IR's): then the ops' own steps run."""
        out = []
        for v, a in zip(self.inputs, args):
            rank = len(shape_of(v)) + bool(v.varying)
            if isinstance(v.type, ScalarType) and _number(a):
                out.append(("s",))  # (a varying number all lanes share: as a number)
            elif getattr(a, "ndim", None) == rank and rank and a.dtype == _dtype(v):
                out.append(("a", rank))
            else:
                return None
        return tuple(out)

    def source(self, key: tuple) -> str:
        """The kernel: thread ``t`` is element ``t`` of ``[N, *shape]`` (C order)."""
        r = len(self.shape)
        outs = [f"o{k}" for k in range(len(self.outputs))]
        ins = [f"a{k}" for k in range(len(self.inputs))]
        lines = [f"def chain(total, {', '.join(outs + ins)}):",
                 "    t = cuda.grid(1)",
                 "    if t < total:"]
        rest = "t"
        for d in range(r, 0, -1):  # the element's index on each axis, last axis first
            lines.append(f"        j{d} = {rest} % {self.shape[d - 1]}")
            lines.append(f"        q{d} = {rest} // {self.shape[d - 1]}")
            rest = f"q{d}"
        lines.append(f"        j0 = {rest}")
        names: dict[int, str] = {}
        for k, (v, kind) in enumerate(zip(self.inputs, key)):
            if kind[0] == "s":
                names[v.id] = f"a{k}"
            else:
                lines.append(f"        x{k} = a{k}[{self._index(v)}]")
                names[v.id] = f"x{k}"
        written = {v.id: k for k, v in enumerate(self.outputs)}
        for j, op in enumerate(self.ops):
            e = element_expr(op, [names[v.id] for v in op.operands], _spell)
            lines.append(f"        t{j} = {e}")
            names[op.result.id] = f"t{j}"
            if op.result.id in written:
                lines.append(f"        o{written[op.result.id]}[{self._index(op.result)}]"
                             f" = t{j}")
        return _HEADER + "\n\n" + "\n".join(lines) + "\n"

    def _index(self, v) -> str:
        """``v``'s element of the thread's ``[N, *shape]`` element: its axes right-aligned
        on the shape, 0 on an axis it broadcasts along (size 1)."""
        s, r = shape_of(v), len(self.shape)
        idx = ["j0"] if v.varying else []
        for e, size in enumerate(s):
            idx.append("0" if size == 1 else f"j{e + r - len(s) + 1}")
        return ", ".join(idx) if idx else "0"

    def kernel(self, key: tuple):
        src = self.source(key)
        got = _KERNELS.get(src)
        if got is None:
            got = _KERNELS[src] = launch.build(src, "chain", f"chain {self.label}", {})
        return got

    def run(self, xp, lanes: int, args: list, memory) -> list | None:
        """The outputs of the chain over ``lanes`` lanes by one launch, or None where
        ``key`` refuses the inputs.  ``memory(a)``: an array of ``xp`` as a kernel
        takes it."""
        key = self.key(args)
        if key is None:
            return None
        outs = [xp.empty((lanes,) + shape_of(v), dtype=_dtype(v)) for v in self.outputs]
        total = lanes * int(np.prod(self.shape, dtype=np.int64))
        if total:
            # (host memory, a kernel's argument on the simulator or copied to a GPU,
            # must be one contiguous block; a device array is read through its strides)
            call = [_contiguous(memory(a)) if kind[0] == "a" else _dtype(v).type(np.asarray(a)[()])
                for v, a, kind in zip(self.inputs, args, key)]
            launch.launch(self.kernel(key), total, [memory(o) for o in outs] + call)
        return outs
