"""Batch gradients of uniform weights without per-lane copies (SPEC section 11: "when
only the sum is used it is computed without materializing N per-example gradients").

Takes: a predicated function (after linearize: masks on ops, varying loops as uniform
loops carrying their loop mask), typically a kernel that called a ``hydra.grad``
function and sums a uniform weight's gradient over the lanes (``lanesum(dW)``).
Guarantees: the same uniform values (up to the summation order that SPEC section 8
allows) with the ``lanesum`` of an array moved towards where its terms are made:

- ``lanesum(a + b)`` is ``lanesum(a) + lanesum(b)`` (and ``-``, unary ``-``),
  ``lanesum(reshape(a))`` is ``reshape(lanesum(a))``, ``lanesum(sum(a, axis))`` is
  ``sum(lanesum(a), axis)``, ``lanesum(select(c, a, b))`` sums ``a`` over the active
  lanes where ``c`` holds and ``b`` over the others, a value a per-lane branch made
  inside its arm (the guarded ``if`` yields the uniform sum, its other arm zeros);
- ``lanesum(np.outer(d, x))`` (the adjoint of ``W @ x``) is ``lanesum_outer(d, x)``:
  one GEMM over the active rows, ``D.T @ X``;
- ``lanesum(acc)`` of a per-lane accumulator that a reverse sweep's loop carries (it
  sums ``W``'s adjoint of every trip: ``acc + inc`` in the arm of the lanes whose trip
  it is, from zeros) becomes a uniform accumulator of ``lanesum(inc)`` over those
  lanes, and ``inc`` is sunk in turn: a loop that uses ``W @ h`` once per trip makes
  one GEMM per trip, never an ``[N, *W.shape]`` array;
- ``np.sum(g * g)`` of an outer product is the product of its factors' squared norms
  (a per-example gradient's norm for DP-SGD's clipping), and ``lanesum(g * s)`` of a
  per-lane number ``s`` scales the outer product's first factor: per-example clipping
  makes no per-example gradient either.

A term that none of these rules takes keeps its ``lanesum``; a ``lanesum`` none of
whose terms is an outer product or a loop accumulator is left as it was.  Runs at the
start of ``simplify`` (whose dead-code elimination then removes the per-lane outer
products and accumulators nothing reads any more).  The structured form (cuda, no
linearize) has no loop mask to sum under: only the loop-free rules apply there, and
only where the backend has ``lanesum_outer``.  Under Dask (``fn.notes["chunked"]``)
sums stay out of loops and branches: its stages combine only top-level sums.
"""

from __future__ import annotations

from ..ir.core import Function, Op, Region, Value
from ..types import BOOL, ArrayType


def sink_lanesums(fn: Function) -> None:
    """Rewrite ``fn``'s ``lanesum`` of arrays in place (see the module docstring)."""
    if not any(op.opcode == "array" and op.attrs["fn"] == "lanesum" for op in fn.walk()):
        return
    ctx = _Context(fn)
    _ghost_norms(ctx, fn.body)
    _visit(ctx, fn.body)
    if ctx.subst:
        _apply(fn.body, ctx.subst)


class _Context:
    def __init__(self, fn: Function) -> None:
        self.defs: dict[int, tuple[Op, Region]] = {}
        self.uses: dict[int, int] = {}
        self._scan(fn.body)
        self.subst: dict[int, Value] = {}
        self.params = fn.params
        #: sums may move into loops and branches (not where Dask runs the kernel in
        #: chunks: a cross-lane op there would be one round trip per trip; it stages
        #: only top-level sums)
        self.nested = not fn.notes.get("chunked")

    def _scan(self, region: Region) -> None:
        for op in region.ops:
            for r in op.results:
                self.defs[r.id] = (op, region)
            for v in op.inputs():
                self.uses[v.id] = self.uses.get(v.id, 0) + 1
            for r in op.regions:
                self._scan(r)


def _visit(ctx: _Context, region: Region) -> None:
    i = 0
    while i < len(region.ops):
        op = region.ops[i]
        for r in op.regions:
            _visit(ctx, r)
        if op.opcode == "array" and op.attrs["fn"] == "lanesum" and op.operands[0].varying:
            s = _Sinker(ctx, region, op.loc)
            total = s.sink(op.operands[0], op.mask)
            if s.profitable and total is None:  # a sum of zeros: lanesum as it was
                s.profitable = False
            if s.profitable:
                i = region.ops.index(op)  # a loop's new first accumulator went before it
                region.ops[i:i] = s.ops
                i += len(s.ops)
                ctx.subst[op.result.id] = total
                del region.ops[i]
                continue
        i += 1


def _ghost_norms(ctx: _Context, region: Region) -> None:
    """``np.sum(g * g)`` of an outer product ``g = np.outer(d, x)`` (a per-example
    gradient's squared norm, DP-SGD's clipping) is ``sum(d * d) * sum(x * x)``: the
    per-example gradient need not be made for its norm (Goodfellow 2015's trick)."""
    i = 0
    while i < len(region.ops):
        op = region.ops[i]
        for r in op.regions:
            _ghost_norms(ctx, r)
        outer = _square_of_outer(ctx, op)
        if outer is not None:
            s = _Sinker(ctx, region, op.loc)
            sums = [s.array("sum", [s.array("mul", [v, v], v.type, varying=True)],
                            op.result.type, {"axis": None, "keepdims": False},
                            varying=True) for v in outer.operands]
            product = s.emit("mul", sums, op.result.type, varying=True)
            region.ops[i:i] = s.ops
            i += len(s.ops)
            ctx.subst[op.result.id] = product
        i += 1


def _square_of_outer(ctx: _Context, op: Op) -> Op | None:
    if not (op.opcode == "array" and op.attrs["fn"] == "sum" and op.mask is None
            and op.attrs["params"].get("axis") is None
            and not op.attrs["params"].get("keepdims")):
        return None
    sq = ctx.defs.get(op.operands[0].id, (None,))[0]
    if sq is None or sq.opcode != "array" or sq.attrs["fn"] != "mul" or sq.mask is not None \
            or sq.operands[0] is not sq.operands[1]:
        return None
    outer = ctx.defs.get(sq.operands[0].id, (None,))[0]
    if outer is None or outer.opcode != "array" or outer.attrs["fn"] != "outer" \
            or outer.mask is not None or any(v.type.dtype != op.result.type
                                             for v in outer.operands):
        return None
    return outer


#: a gather's place count up to which its adjoint's lanesum is a scatter-add of one
#: sum per place (a layer's weights; an embedding table's rows stay a plain lanesum)
MAX_PLACES = 64


def _one_hot(ctx: _Context, op: Op, x: Value) -> tuple[Value, Value] | None:
    """(i, rows) where ``x`` is the adjoint of a gather ``W[i]`` as ``hydra.grad``
    writes it: ``where(reshape(arange(K), (K, 1..)) == i, reshape(rows, (1, ...)), 0)``."""
    def made(v: Value, fn: str) -> Op | None:
        found = ctx.defs.get(v.id, (None,))[0]
        return found if found is not None and found.opcode == "array" \
            and found.attrs["fn"] == fn else None
    if op.opcode != "array" or op.attrs["fn"] != "where" or x.type.ndim < 1 \
            or not 1 <= x.type.shape[0] <= MAX_PLACES:
        return None
    c, rows, zero = op.operands
    z = ctx.defs.get(zero.id, (None,))[0]
    if z is None or z.opcode != "const" or z.attrs["value"] != 0:
        return None
    eq, shaped = made(c, "eq"), made(rows, "reshape")
    if eq is None or shaped is None or shaped.operands[0].type.shape != x.type.shape[1:]:
        return None
    places, index = eq.operands
    iota = made(places, "reshape")
    iota = iota and made(iota.operands[0], "arange")
    if iota is None or isinstance(index.type, ArrayType) or iota.attrs["params"] != {
            "start": 0, "stop": x.type.shape[0], "step": 1, "dtype": "int64"}:
        return None
    return index, shaped.operands[0]


def _uniform_zeros_like(like: Value) -> list[Op]:
    """Ops making uniform zeros of uniform ``like``'s type: ``where(True, 0, like)``
    (``zeros_like`` makes each lane its own array)."""
    t, loc = like.type, like.loc
    true = Op("const", [], [Value(BOOL, loc, "", False)], loc, {"value": True})
    zero = Op("const", [], [Value(t.dtype, loc, "", False)], loc, {"value": 0.0})
    where = Op("array", [true.result, zero.result, like], [Value(t, loc, "", False)], loc,
               {"fn": "where", "params": {}})
    return [true, zero, where]


def _arm_mask(ctx: _Context, guard: Op) -> Value | None:
    """The mask of a guarded ``if``'s then-arm: ``any(m.then)``'s operand, where
    ``m.then`` is ``bitand`` of the enclosing mask and the condition."""
    found = ctx.defs.get(guard.operands[0].id, (None,))[0]
    if found is None or found.opcode != "any":
        return None
    m = found.operands[0]
    made = ctx.defs.get(m.id, (None,))[0]
    return m if made is not None and made.opcode == "bitand" else None


def _apply(region: Region, subst: dict[int, Value]) -> None:
    def get(v: Value) -> Value:
        while v.id in subst:
            v = subst[v.id]
        return v
    for op in region.ops:
        op.operands = [get(v) for v in op.operands]
        if op.mask is not None:
            op.mask = get(op.mask)
        for r in op.regions:
            _apply(r, subst)


class _Sinker:
    """Emits (into ``ops``) the uniform sum over the lanes of a mask of one value."""

    def __init__(self, ctx: _Context, region: Region, loc) -> None:
        self.ctx, self.region, self.loc = ctx, region, loc
        self.ops: list[Op] = []
        self.profitable = False

    def emit(self, opcode: str, operands: list[Value], t, attrs=None, mask=None,
             varying=False) -> Value:
        v = Value(t, self.loc, "", varying)
        self.ops.append(Op(opcode, list(operands), [v], self.loc, dict(attrs or {}), [],
                           mask))
        self.ctx.defs[v.id] = (self.ops[-1], self.region)  # (the masks ``arm`` reads)
        return v

    def array(self, fn: str, operands: list[Value], t, params=None, mask=None,
              varying=False) -> Value:
        return self.emit("array", operands, t, {"fn": fn, "params": dict(params or {})},
                         mask, varying)

    def scaled(self, x: Value, scale: Value | None) -> Value:
        """``x * scale`` per lane (``scale`` a per-lane number), or ``x``."""
        if scale is None:
            return x
        if scale.type != x.type.dtype:
            scale = self.emit("cast", [scale], x.type.dtype, varying=True)
        return self.array("mul", [x, scale], x.type, varying=True)

    def plain(self, x: Value, mask: Value | None, scale: Value | None = None) -> Value:
        return self.array("lanesum", [self.scaled(x, scale)], x.type, mask=mask)

    def sink(self, x: Value, mask: Value | None, scale: Value | None = None) -> Value | None:
        """The uniform sum of ``x`` (times the per-lane number ``scale``) over
        ``mask``'s lanes; None: exactly zero (an adjoint's ``zeros_like``, the arm of a
        select that did not use the weight)."""
        found = self.ctx.defs.get(x.id)
        if not x.varying or found is None or not isinstance(x.type, ArrayType):
            return self.plain(x, mask, scale)
        op, where = found
        fn = op.attrs.get("fn") if op.opcode == "array" else op.opcode
        shape = x.type.shape
        if fn == "zeros_like" and op.operands[0].type == x.type:
            return None
        factor = self.factor(op, x)
        if factor is not None:  # a per-example gradient scaled by its lane's number
            y, f = factor
            if scale is not None:
                f = self.emit("mul", [scale, f], f.type, varying=True)
            return self.sink(y, mask, f)
        if fn in ("add", "sub") and all(isinstance(v.type, ArrayType) and v.type.shape == shape
                                        and v.type.dtype == x.type.dtype
                                        for v in op.operands):
            a, b = (self.sink(v, mask, scale) for v in op.operands)
            if b is None:
                return a
            if a is None:
                return b if fn == "add" else self.array("neg", [b], x.type)
            return self.array(fn, [a, b], x.type)
        if fn == "neg":
            a = self.sink(op.operands[0], mask, scale)
            return None if a is None else self.array("neg", [a], x.type)
        if fn in ("reshape", "sum") and op.opcode == "array" and op.mask is None \
                and x.type.dtype == op.operands[0].type.dtype:
            a = self.sink(op.operands[0], mask, scale)
            return None if a is None else self.array(fn, [a], x.type, op.attrs["params"])
        if fn == "outer" and op.mask is None:
            self.profitable = True
            a, b = op.operands
            return self.array("lanesum_outer", [self.scaled(a, scale), b], x.type, mask=mask)
        if op.opcode == "select" and not isinstance(op.operands[0].type, ArrayType) \
                and op.operands[0].varying:
            return self.split(op, x, mask, scale)
        hot = _one_hot(self.ctx, op, x)
        if hot is not None:
            return self.scatter(x, *hot, mask, scale)
        if op.opcode == "if" and op.attrs.get("guard") and where is self.region \
                and self.ctx.nested:
            total = self.arm(op, x, mask, scale)
            if total is not None:
                return total
        if op.opcode == "while" and where is self.region and scale is None \
                and self.ctx.nested:
            total = self.loop(op, x, mask)
            if total is not None:
                return total
        return self.plain(x, mask, scale)

    def factor(self, op: Op, x: Value) -> tuple[Value, Value] | None:
        """(y, s) where ``x`` is ``y * s`` or ``y / s`` (``1 / s`` made here) with ``s`` a
        per-lane float number and ``y`` an array of ``x``'s type, else None."""
        if op.opcode != "array" or op.attrs["fn"] not in ("mul", "truediv") or op.mask:
            return None
        a, b = op.operands
        pairs = [(a, b), (b, a)] if op.attrs["fn"] == "mul" else [(a, b)]
        for y, s in pairs:
            if y.type == x.type and not isinstance(s.type, ArrayType) and s.type.kind == "f":
                if op.attrs["fn"] == "truediv":
                    one = self.emit("const", [], s.type, {"value": 1.0})
                    s = self.emit("truediv", [one, s], s.type, varying=bool(s.varying))
                return y, s
        return None

    def scatter(self, x: Value, index: Value, rows: Value, mask, scale) -> Value | None:
        """The adjoint of a gather ``W[i]`` (``rows`` in place ``i`` of ``x``, zeros
        elsewhere), summed over the lanes: a scatter-add.  A uniform ``i`` (a loop's
        layer in lockstep) puts the one sum of ``rows`` in its place; a varying one
        sums each place's lanes apart (a masked GEMM each: every lane's rows in one)."""
        n = x.type.shape[0]
        row_t = ArrayType(x.type.dtype, x.type.ndim - 1, x.type.shape[1:])
        zero = self.emit("const", [], x.type.dtype, {"value": 0.0})
        pieces = []
        total = None if index.varying else self.sink(rows, mask, scale)
        for j in range(n):
            hit = self.emit("eq", [index, self.emit("const", [], index.type, {"value": j})],
                            BOOL, varying=bool(index.varying))
            if index.varying:
                m = hit if mask is None else self.emit("bitand", [mask, hit], BOOL,
                                                         varying=True)
                part = self.sink(rows, m, scale)
                pieces.append(part if part is not None else
                              self.array("where", [hit, zero, zero], row_t))
            elif total is None:
                return None
            else:
                pieces.append(self.array("where", [hit, total, zero], row_t))
        return self.array("stack", pieces, x.type, {"axis": 0})

    def split(self, op: Op, x: Value, mask: Value | None, scale: Value | None) -> Value:
        """``select(c, a, b)``: ``a`` over the lanes where ``c`` holds, ``b`` elsewhere."""
        c, a, b = op.operands
        not_c = self.emit("not", [c], BOOL, varying=True)
        parts = []
        for value, cond in ((a, c), (b, not_c)):
            m = cond if mask is None else self.emit("bitand", [mask, cond], BOOL,
                                                      varying=True)
            parts.append(self.sink(value, m, scale))
        parts = [p for p in parts if p is not None]
        return self.array("add", parts, x.type) if len(parts) == 2 else (
            parts[0] if parts else None)

    def loop(self, op: Op, x: Value, mask: Value | None) -> Value | None:
        """The uniform sum of loop accumulator ``x`` (see the module docstring), or None
        where the loop does not have the shape of a reverse sweep's: a uniform loop
        whose body is a guarded ``if`` (the lanes whose trip it is, ``m.then``) that
        yields ``acc + inc``, the other lanes keeping ``acc`` by a select."""
        ctx = self.ctx
        i = op.results.index(x)
        before, body = op.regions
        if mask is None or ctx.uses.get(x.id) != 1:
            return None
        b_arg, acc = before.args[i], body.args[i]
        if before.terminator.operands[1 + i] is not b_arg or ctx.uses.get(b_arg.id) != 1:
            return None
        y = body.terminator.operands[i]
        sel = ctx.defs.get(y.id, (None,))[0]
        if sel is None or sel.opcode != "select" or sel not in body.ops \
                or sel.operands[2] is not acc or ctx.uses.get(y.id) != 1:
            return None
        guard = ctx.defs.get(sel.operands[1].id, (None,))[0]
        if guard is None or guard.opcode != "if" or guard not in body.ops \
                or ctx.uses.get(sel.operands[1].id) != 1:
            return None
        k = guard.results.index(sel.operands[1])
        then = guard.regions[0]
        arm_mask = _arm_mask(ctx, guard)
        if arm_mask is None or mask not in ctx.defs[arm_mask.id][0].operands:
            return None  # the arm's lanes are not the lanes summed over
        s = then.terminator.operands[k]
        add = ctx.defs.get(s.id, (None,))[0]
        if add is None or add not in then.ops or add.opcode != "array" \
                or add.attrs["fn"] != "add" or acc not in add.operands or add.mask is not None \
                or ctx.uses.get(s.id) != 1 or ctx.uses.get(acc.id) != 2:
            return None
        inc = add.operands[1] if add.operands[0] is acc else add.operands[0]
        zeros = self.uniform_zeros(op.operands[i])
        if inc.type != x.type or zeros is None:
            return None
        inner = _Sinker(ctx, then, add.loc)
        step = inner.sink(inc, arm_mask)
        total = acc if step is None else inner.array("add", [acc, step], x.type)
        at = then.ops.index(add)
        then.ops[at:at + 1] = inner.ops
        then.terminator.operands[k] = total
        guard.regions[1].terminator.operands[k] = acc
        body.ops.remove(sel)
        body.terminator.operands[i] = guard.results[k]
        at = self.region.ops.index(op)
        self.region.ops[at:at] = zeros
        op.operands[i] = zeros[-1].result
        for v in (b_arg, acc, x, guard.results[k]):
            v.varying = False
        self.profitable = True
        return x

    def arm(self, op: Op, x: Value, mask: Value | None, scale: Value | None):
        """``x`` of a guarded ``if`` (a per-lane branch, linearized) summed over its
        then-arm's lanes (``mask``: ``m.then``, as the select after it chose): summed in
        the arm, which yields the uniform sum (the guard is uniform); the other arm
        yields zeros, made before the ``if`` like a uniform parameter of ``x``'s type."""
        ctx = self.ctx
        arm_mask = _arm_mask(ctx, op)
        made = ctx.defs.get(mask.id, (None,))[0] if mask is not None else None
        like = next((p for p in ctx.params if p.type == x.type and not p.varying), None)
        if arm_mask is None or made is None or made.opcode != "bitand" or like is None \
                or ctx.uses.get(x.id) != 1 \
                or set(map(id, made.operands)) != set(
                    map(id, ctx.defs[arm_mask.id][0].operands)):
            return None
        then, other = op.regions
        k = op.results.index(x)
        inner = _Sinker(ctx, then, op.loc)
        total = inner.sink(then.terminator.operands[k], arm_mask, scale)
        if total is None or not inner.profitable:
            return None
        then.ops[-1:-1] = inner.ops
        zeros = _uniform_zeros_like(like)
        at = self.region.ops.index(op)
        self.region.ops[at:at] = zeros
        then.terminator.operands.append(total)
        other.terminator.operands.append(zeros[-1].result)
        out = Value(x.type, op.loc, "", False)
        op.results.append(out)
        self.profitable = True
        return out

    def uniform_zeros(self, init: Value) -> list[Op] | None:
        """Ops making uniform zeros like ``init`` where ``init`` is zeros made like a
        uniform value (the reverse sweep's first accumulator), else None.  Not
        ``zeros_like``, which makes each lane its own array: ``where(True, 0, W)``."""
        found = self.ctx.defs.get(init.id)
        if found is None:
            return None
        op = found[0]
        like = op.operands[0] if op.operands else None
        if not (op.opcode == "array" and op.attrs["fn"] == "zeros_like"
                and not like.varying and like.type == init.type):
            return None
        return _uniform_zeros_like(like)
