"""Fused elementwise per-lane array chains: one native loop each.

Takes: a chain (a DAG) of elementwise ``array`` ops that ``fusable`` accepts, in program
order (``planner.schedule`` finds the chains), and the backend's native loop compiler
(``compile_loop(source, label, reassoc=False) -> loop``; cpu: ``background.COMPILE_LOOP``,
``machinecode.loops.compiled`` whose loops may still be building: ``loop_ready``).
Guarantees: a ``Fused`` step runs one generated native loop over all N lanes' rows of the chain's
broadcast shape; a chain value is written to memory only where an op outside the chain
reads it, the others live in registers.  The loop reads its inputs through their
strides (views, transposes, broadcast uniform arrays and scalars cost no copy).

Why numba over a generated loop rather than the phase code generator: that generator
maps one lane to one SIMD slot and per-lane buffers to vectors; an elementwise chain
over ``[N, *S]`` strided views is a plain nested loop, which numba types and LLVM
vectorizes.  The loop is compiled once per chain and per-lane layout of its arguments
(``kernel_for``: the strides become constants, contiguous trailing axes one unit-stride
loop); tests/test_arrays_fusion.py checks the asm for packed instructions.  The
machine code is the backend's (cpu: numba lowers the loop, hydra's pipeline compiles
it, and with ``cache=True`` it is kept in the disk cache beside the kernel's phases).

Exactness: each op computes in the dtypes NumPy's own type resolution picks
(``ufunc.resolve_dtypes`` on the operands' dtypes) and casts its result to the IR's
dtype, as ``batching.batched`` does, so results are bit-exact with the numpy backend
(up to the sign and payload of NaNs, which IEEE leaves open).
Ops whose bits libm and NumPy's SIMD code do not share (exp, log, tanh and every other
transcendental function, power), integer division, shifts, float16 and complex values
and float -> int casts stay out of chains: they run as host steps, as before.
"""

from __future__ import annotations

import numpy as np

from ..batching import UFUNCS
from ..ir.core import Op, Value
from ..types import ArrayType, ScalarType
from .steps import Step

#: the element of each elementwise ``array`` fn that fuses (see the module docstring for
#: the others): its operands ``{a}``, ``{b}``, ``{c}`` in its loop's dtypes, computed in ``{t}``
_EXPR = {
    **{fn: f"({{a}} {sym} {{b}})" for fn, sym in (
        ("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="), ("eq", "=="), ("ne", "!="))},
    **{fn: f"{{t}}({{a}} {sym} {{b}})" for fn, sym in (
        ("add", "+"), ("sub", "-"), ("mul", "*"), ("truediv", "/"), ("bitand", "&"),
        ("bitor", "|"), ("bitxor", "^"))},
    "maximum": "_max({a}, {b})", "minimum": "_min({a}, {b})", "where": "_sel({a}, {b}, {c})",
    "neg": "{t}(-{a})", "negative": "{t}(-{a})", "invert": "{t}(~{a})",
    "logical_and": "(({a} != 0) & ({b} != 0))", "logical_or": "(({a} != 0) | ({b} != 0))",
    "logical_xor": "(({a} != 0) != ({b} != 0))", "reciprocal": "({t}(1) / {a})",
    "abs": "{t}(abs({a}))", "absolute": "{t}(abs({a}))", "fabs": "{t}(abs({a}))",
    "square": "{t}({a} * {a})",
    **{fn: f"np.{fn}({{a}})" for fn in ("sqrt", "floor", "ceil", "trunc", "isnan", "isinf",
                                        "isfinite")}}
#: the elements NumPy's bool loops compute (where the loop's dtype is bool)
_BOOL = {"add": "({a} | {b})", "bitor": "({a} | {b})", "maximum": "({a} | {b})",
         "mul": "({a} & {b})", "bitand": "({a} & {b})", "minimum": "({a} & {b})",
         "bitxor": "({a} ^ {b})", "abs": "{a}", "absolute": "{a}", "square": "({a} & {a})"}
#: a bool's ``not``, a number's ``== 0`` (``invert`` too, of a bool)
_NOT = frozenset({"not", "logical_not"})
FUSABLE_FNS = frozenset({*_EXPR, *_NOT, "astype"})
_FLOAT_ONLY = frozenset({"sqrt", "fabs", "floor", "ceil", "trunc", "isnan", "isinf",
                         "isfinite", "reciprocal"})
_DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                     "uint64", "float32", "float64"})


# --- which ops fuse ---------------------------------------------------------------------

def _dtype(v: Value) -> np.dtype:
    return v.type.dtype.dtype if isinstance(v.type, ArrayType) else v.type.dtype


def _loop_dtypes(op: Op) -> tuple | None:
    """(operand dtypes the op computes in, its computed dtype), as NumPy resolves them;
    None where the op does not fuse."""
    fn = op.attrs["fn"]
    ins = [_dtype(v) for v in op.operands]
    if fn == "where":
        out = np.result_type(*ins[1:])
        return (np.dtype(bool), out, out), out
    if fn == "astype":
        src, dst = ins[0], np.dtype(op.attrs["params"]["dtype"])
        if src.kind == "f" and dst.kind in "iu":
            return None  # C leaves out-of-range conversions undefined
        return (src,), dst
    if fn in _FLOAT_ONLY and any(d.kind != "f" for d in ins):
        return None
    try:
        loop = UFUNCS[fn].resolve_dtypes(tuple(ins) + (None,))
    except (TypeError, ValueError, AttributeError):
        return None
    return loop[:-1], loop[-1]


def fusable(op: Op, undef: set[int] = frozenset()) -> bool:
    """Is ``op`` an elementwise op on per-lane arrays that a fused loop computes exactly?
    ``undef``: ids of values an ``undef`` op makes (a select of one is no copy)."""
    if op.opcode == "select":
        c, a, b = op.operands
        if not (c.varying and isinstance(c.type, ScalarType)) or a.id in undef or b.id in undef:
            return False
    elif op.opcode != "array" or op.attrs["fn"] not in FUSABLE_FNS or op.mask is not None \
            or op.attrs.get("_numpy_layout"):  # a written reshape's view-ness sees it
        return False
    r = op.results[0] if len(op.results) == 1 else None
    if r is None or not r.varying or not isinstance(r.type, ArrayType) \
            or r.type.shape is None or r.type.ndim < 1:
        return False
    for v in [*op.operands, r]:
        t = v.type
        if isinstance(t, ArrayType):
            if t.shape is None or t.dtype.name not in _DTYPES:
                return False
        elif not isinstance(t, ScalarType) or t.name not in _DTYPES:
            return False
    if op.opcode == "select":
        return True
    dts = _loop_dtypes(op)
    return dts is not None and all(d.name in _DTYPES for d in (*dts[0], dts[1]))


def shape_of(v: Value) -> tuple:
    return tuple(v.type.shape) if isinstance(v.type, ArrayType) else ()


def broadcast(shapes) -> tuple | None:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        return None


# --- the code of one op -----------------------------------------------------------------

def _cast(x: str, src: np.dtype, dst: np.dtype) -> str:
    if src == dst:
        return x
    if dst.kind == "b":
        return f"({x} != 0)"
    return f"np.{dst.name}({x})"


def element_expr(op: Op, names: list[str], spell=None) -> str:
    """The scalar expression of one element of ``op`` (operand names given), in the
    IR's result dtype.  ``spell(fn, dtype, args)``: a backend's own spelling of an op on
    float operands of ``dtype`` (operand expressions ``args``), or None for the loop's
    (cuda: separately rounded ``+ - *``, which NVVM would otherwise contract into FMAs,
    and its device math functions)."""
    res = _dtype(op.result)
    if op.opcode == "select":
        c, a, b = names
        sa, sb = (_cast(x, _dtype(v), res) for x, v in zip((a, b), op.operands[1:]))
        return f"_sel({c}, {sa}, {sb})"
    fn = op.attrs["fn"]
    ins, out = _loop_dtypes(op)
    xs = [_cast(x, _dtype(v), d) for x, v, d in zip(names, op.operands, ins)]
    own = spell(fn, ins[0], xs) if spell is not None and ins[0].kind == "f" else None
    if own is not None:
        return _cast(own, out, res)
    if fn == "astype":
        return _cast(names[0], _dtype(op.operands[0]), res)
    if fn in _NOT or fn == "invert" and out.kind == "b":
        e = f"(not {xs[0]})" if ins[0].kind == "b" else f"({xs[0]} == 0)"
    else:
        a, b, c = (xs + [None, None])[:3]
        e = (out.kind == "b" and _BOOL.get(fn) or _EXPR[fn]).format(a=a, b=b, c=c,
                                                                     t=f"np.{out.name}")
    return _cast(e, out, res)


# --- one fused chain --------------------------------------------------------------------

#: per chain, at most this many layouts get a kernel of their own
SPECIALIZE = 4


class Fused(Step):
    """One chain of elementwise ops run as one native loop (see the module docstring).
    ``inputs``: the values it reads, ``outputs``: the member results an op outside
    the chain reads (the only ones written to memory), ``shape``: the per-lane shape
    the loop runs over (the members' shapes broadcast)."""

    def __init__(self, ops: list[Op], users: dict, compile_loop) -> None:
        self.ops = ops
        self.compile_loop = compile_loop
        members = {id(o) for o in ops}
        made = {o.result.id for o in ops}
        seen: dict[int, Value] = {}
        for o in ops:
            for v in o.operands:
                if v.id not in made:
                    seen.setdefault(v.id, v)
        self.inputs = list(seen.values())
        self.outputs = [o.result for o in ops
                        if any(id(u) not in members for u in users.get(o.result.id, []))]
        self.shape = broadcast([shape_of(o.result) for o in ops])
        self.loc = ops[0].loc
        self.source = self._generate()
        self._scalars = [(k, _dtype(v).type) for k, v in enumerate(self.inputs)
                         if not v.varying and isinstance(v.type, ScalarType)]
        self._vscalars = [k for k, v in enumerate(self.inputs)
                          if v.varying and isinstance(v.type, ScalarType)]
        self._outs = [(shape_of(v), _dtype(v)) for v in self.outputs]
        self._arrays = sorted(self._array_axes())
        self._ndims = [(k, len(shape_of(self.inputs[k])) + bool(self.inputs[k].varying))
                       for k in self._arrays]
        self._special: dict[tuple, object] = {}

    def label(self) -> str:
        """The chain's ops and lines: ``add, maximum (line 33)``."""
        fns = ", ".join(o.attrs["fn"] if o.opcode == "array" else o.opcode for o in self.ops)
        lines = sorted({o.loc.line for o in self.ops if o.loc and o.loc.line > 0})
        at = f" (line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))})" \
            if lines else ""
        return fns + at

    def describe(self) -> str:
        """The line ``dump-ir`` prints for this step."""
        return (f"fused step (native loop over all lanes, {len(self.ops)} ops, "
                f"{len(self.outputs)} written): {self.label()}")

    @property
    def kernel(self):
        """The general kernel (strides read from the arrays)."""
        return self.compile_loop(self.source, f"the fused loop of {self.label()}")

    @property
    def writes(self) -> list[Value]:
        return self.outputs

    def run(self, host, env: dict) -> None:
        lanes = host.lanes
        outs = [np.empty((lanes,) + s, d) for s, d in self._outs]
        args = [env[v.id] for v in self.inputs]
        for k, cls in self._scalars:
            if type(args[k]) is not cls:
                args[k] = cls(args[k])
        if all(args[k] is not None and args[k].ndim == nd for k, nd in self._ndims):
            for k in self._vscalars:
                if np.ndim(args[k]) == 0:
                    args[k] = np.full(lanes, args[k], _dtype(self.inputs[k]))
            kernel = self.kernel_for(args)
            if loop_ready(self.compile_loop, kernel, [lanes, *outs, *args]):
                kernel(lanes, *outs, *args)
                for v, o in zip(self.outputs, outs):
                    env[v.id] = o
                return
        # an undefined array (a loop carry no lane has set yet) or the uniform array a
        # select passed through for it, or a loop still being built: the host rules
        for op in self.ops:
            host.run_op(op, env)

    # --- code ---------------------------------------------------------------------------

    def _axes(self, v: Value, lane: bool) -> list:
        """For each loop axis (lane axis first), the axis of ``v``'s array that moves
        with it, or None where ``v`` is broadcast along it."""
        s, shape = shape_of(v), self.shape
        r, k = len(shape), len(s)
        axes = [0 if lane else None]
        off = 1 if lane else 0
        for d in range(r):
            e = d - (r - k)
            axes.append(off + e if e >= 0 and s[e] != 1 else None)
        return axes

    def _generate(self, strides: dict | None = None) -> str:
        """The loop nest.  ``strides``: input -> its per-lane element strides, known
        (a specialization on the layout the arrays have at run time: every offset is
        then a constant LLVM folds, and the trailing axes that are contiguous in every
        array run as one unit-stride loop, which LLVM vectorizes); None: read from the
        arrays, with the one-loop version where a run-time check allows it."""
        r = len(self.shape)
        outs = [f"o{k}" for k in range(len(self.outputs))]
        ins = [f"a{k}" for k in range(len(self.inputs))]
        lines = [f"def fused(n, {', '.join(outs + ins)}):"]
        axes = self._array_axes()
        for k, ax in axes.items():
            size = _dtype(self.inputs[k]).itemsize
            lane = int(bool(self.inputs[k].varying))
            lines += [f"    a{k}s{lv} = " + (f"a{k}.strides[{a}] // {size}"
                                             if strides is None or a < lane
                                             else str(strides[k][a - lane]))
                      for lv, a in enumerate(ax) if a is not None]
        maps = list(axes.values()) + [self._axes(v, True) for v in self.outputs]
        c = next(c for c in range(r + 2)
                 if all(len({m[d] is None for d in range(c, r + 1)}) <= 1 for m in maps))
        if strides is not None:
            c = max(c, 1)
            while c <= r and not all(self._contiguous(strides[k], ax, c)
                                     for k, ax in axes.items() if ax[c] is not None):
                c += 1
            return "\n".join(lines + self._nest(axes, c if c <= r else None, 1)) + "\n"
        if c > r:
            return "\n".join(lines + self._nest(axes, None, 1)) + "\n"
        block = [lv for lv in range(c, r + 1)]
        conds = []
        for k, ax in axes.items():
            if ax[c] is None:
                continue
            want = "1"
            for lv in reversed(block):
                conds.append(f"a{k}s{lv} == {want}")
                want = f"{want} * {'n' if lv == 0 else self.shape[lv - 1]}"
        lines.append(f"    if {' and '.join(conds) or 'True'}:")
        lines += self._nest(axes, c, 2)
        lines.append("    else:")
        lines += self._nest(axes, None, 2)
        return "\n".join(lines) + "\n"

    def _array_axes(self) -> dict:
        return {k: self._axes(v, bool(v.varying)) for k, v in enumerate(self.inputs)
                if v.varying or isinstance(v.type, ArrayType)}

    def _contiguous(self, st: tuple, ax: list, c: int) -> bool:
        """Are loop levels ``c`` on one unit-stride run of an input with per-lane
        element strides ``st`` (levels from 1, its axes ``ax``)?"""
        lane = 1 if ax[0] is not None else 0
        want = 1
        for lv in range(len(self.shape), c - 1, -1):
            if st[ax[lv] - lane] != want:
                return False
            want *= self.shape[lv - 1]
        return True

    def kernel_for(self, args: list):
        """The kernel specialized on the per-lane layout of ``args`` (at most
        ``SPECIALIZE`` layouts per chain; then the general kernel)."""
        key = []
        for k in self._arrays:
            a = args[k]
            key.append(a.strides[1:] if self.inputs[k].varying else a.strides)
        key = tuple(key)
        kern = self._special.get(key)
        if kern is None:
            if len(self._special) >= SPECIALIZE:
                return self.kernel
            strides = {}
            for k, st in zip(self._arrays, key):
                size = args[k].itemsize
                if any(x % size for x in st):
                    return self.kernel
                strides[k] = tuple(x // size for x in st)
            kern = self._special[key] = self.compile_loop(
                self._generate(strides), f"the fused loop of {self.label()}")
        return kern

    def _nest(self, axes: dict, c: int | None, indent: int) -> list[str]:
        """The loops with their offset updates, loads, member values and stores at the
        shallowest level each can go; axes from level ``c`` on as one loop."""
        r = len(self.shape)
        last = r if c is None else c
        body: dict[int, list[str]] = {lv: [] for lv in range(-1, last + 1)}
        level: dict[int, int] = {}
        names: dict[int, str] = {}
        for k, v in enumerate(self.inputs):
            a = f"a{k}"
            if k not in axes:
                level[v.id], names[v.id] = -1, a
                continue
            cur = "0"
            for lv, ax in enumerate(axes[k][:last + 1]):
                if ax is None:
                    continue
                step = f"i{lv}" if lv == c else f"i{lv} * {a}s{lv}"
                body[lv].append(f"{a}b{lv} = {cur} + {step}")
                cur = f"{a}b{lv}"
            deepest = max([lv for lv, ax in enumerate(axes[k][:last + 1]) if ax is not None],
                          default=-1)
            body[deepest].append(f"x{k} = _ld({a}, {cur})")
            level[v.id], names[v.id] = deepest, f"x{k}"
        written = {v.id: k for k, v in enumerate(self.outputs)}
        for j, op in enumerate(self.ops):
            lv = max([level[v.id] for v in op.operands], default=-1)
            body[lv].append(f"t{j} = {element_expr(op, [names[v.id] for v in op.operands])}")
            level[op.result.id], names[op.result.id] = lv, f"t{j}"
            if op.result.id in written:
                self._store(body, written[op.result.id], op, j, lv, c)
        lines = []
        for lv in range(-1, last + 1):
            if lv >= 0:
                size = "n" if lv == 0 else str(self.shape[lv - 1])
                if lv == c:
                    size = " * ".join([size] + [str(x) for x in self.shape[lv:]])
                lines.append(f"{'    ' * (lv + indent)}for i{lv} in range({size}):")
            lines += ["    " * (lv + indent + 1) + s for s in body[lv]]
        if last >= 0 and not body[last]:  # trailing axes of size 1: all work was outside
            lines.append("    " * (last + indent + 1) + "pass")
        return lines

    def _store(self, body, k: int, op: Op, j: int, lv: int, c: int | None) -> None:
        """The store of output ``k`` (a fresh C-ordered ``[N, *s]`` array) of member
        ``j`` whose value is ready at level ``lv``."""
        s = shape_of(op.result)
        strides = [int(np.prod(s[i + 1:], dtype=np.int64)) for i in range(len(s))]
        axes = self._axes(op.result, True)
        if c is not None:
            axes = axes[:c + 1]
        full = [int(np.prod(s, dtype=np.int64))] + strides
        terms = [f"i{d}" if d == c else f"i{d} * {full[ax]}"
                 for d, ax in enumerate(axes) if ax is not None]
        deepest = max([d for d, ax in enumerate(axes) if ax is not None] + [lv])
        body[deepest].append(f"_st(o{k}, {' + '.join(terms) or '0'}, t{j})")


def loop_ready(compile_loop, loop, args) -> bool:
    """May a step call ``loop`` (made by ``compile_loop``) on ``args`` now?  A backend
    whose loops build in the background says so by ``compile_loop.ready`` (cpu:
    ``background.ready``); until then the step runs its ops' host rules, which give the
    same bits (the steps that ask are bit-exact with their host rules)."""
    ready = getattr(compile_loop, "ready", None)
    return ready is None or ready(loop, args)
