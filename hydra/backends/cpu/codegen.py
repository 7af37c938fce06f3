"""Predicated SSA -> one LLVM function that runs a range of gangs (the cpu backend's core).

Takes: a list of top-level ops of a predicated function (a *phase*: no sync points in
it), the values it reads from outside (``inputs``) and the values later phases or the
caller need (``outputs``).  Guarantees: ``generate`` returns an LLVM module defining

    void @<name>(i64 chunk, i64 ngangs, i64 n, ptr err, <inputs...>, <outputs...>)

that runs gangs ``0 <= g < ngangs`` of ``G`` lanes each (lanes ``>= n`` are off), taking
``chunk`` gangs at a time from a counter in ``err[7]``: any number of threads may call
it at once and the work balances dynamically.  Inputs are passed as: uniform scalar ->
the scalar; varying scalar -> ``ptr`` to ``n`` contiguous values; array -> ``ptr``
data, then shape and byte strides as i64 (a varying array's lane axis first).  Outputs
are ``ptr``s to ``n`` values (varying) or one value (uniform).  A run-time error stores
(kind, lane, site, values...) in ``err`` (the earliest in lockstep order wins, see
``stops``) and stops the gang before any out-of-bounds access; Ctrl-C stops all gangs.
``lowerable(op)`` says beforehand, from the rules here, which ops it lowers (the others
run on the host, see ``phases``).  ``KernelGen`` is the rules here (pure per-lane ops
by ``arith``) and its mixins': ``controlflow`` (``if``, ``while``), ``memory`` (loads,
stores, arrays), ``stops`` (the error clock), ``counts`` (``hydra.profile``).
"""

from __future__ import annotations

from ...errors import RUNTIME_ERRORS
from ...intrinsics import INTRINSICS, lowers
from ...ir.core import BINARY_OPS, UNARY_OPS, Op, Value
from ..protocol import PROTOCOLS
from ..cut import nested
from ...types import ArrayType, ScalarType
from . import arith, counts
from .controlflow import ControlFlow
from .emit import Builder
from .loopselects import free_selects, value_uses
from .memory import MemoryOps
from .stops import Stops
from .vectors import (BOOL, I64, Arr, Geometry, Uni, Unsupported, Var, const_text,
                      host_has_fma, lty)

KINDS = list(RUNTIME_ERRORS)
#: ops whose results and region arguments must be numbers (arrays do not cross
#: control flow or selects in vector code)
_SCALAR_ONLY = ("if", "while", "select", "undef", "const", "load")


def _nonzero_literal(ref: str) -> bool:
    return ref.lstrip("-").isdigit() and int(ref) != 0


def lowerable(op: Op) -> tuple[bool, str]:
    """Can ``KernelGen`` lower ``op`` with the regions it owns?  Decided from its
    lowering table (the ``op_*`` rules, arith, vecmath) before any code is made; the
    reason says why the op runs on the host instead."""
    for o in nested(op):
        ok, why = _lowerable_here(o)
        if not ok:
            return False, why if o is op or not o.loc else f"{why} (line {o.loc.line})"
    return True, ""


def _lowerable_here(op: Op) -> tuple[bool, str]:
    name = op.opcode
    if "sync" in op.attrs:
        return False, f"sync point: {op.attrs['sync']}"
    key = {"intrinsic": f"intrinsic {op.attrs.get('name')}",
           "math": f"math {op.attrs.get('fn')}"}.get(name, name)
    if key in PROTOCOLS["cpu"].host_only:
        return False, PROTOCOLS["cpu"].host_only[key]
    if name == "math" and not arith.native_math(op.attrs["fn"], op.operands[0].type):
        return False, f"no vector code for math.{op.attrs['fn']} on {op.operands[0].type}"
    values = op.results + [a for r in op.regions for a in r.args]
    if name in _SCALAR_ONLY and not all(isinstance(v.type, ScalarType) for v in values):
        return False, f"an array value through {name}"
    if name == "store" and not isinstance(op.operands[-1].type, ScalarType):
        return False, "storing a sub-array"
    return True, ""


class KernelGen(ControlFlow, MemoryOps, Stops, counts.Counts):  # counts: hydra.profile
    def __init__(self, name: str, geo: Geometry, options: dict, constants=None) -> None:
        self.name = name
        #: value id -> captured array (global_array): shapes and strides fold into the code
        self.constants = constants or {}
        self.geo = geo
        self.b = Builder(geo, bool(options.get("fastmath")), bool(options.get("exactmath")))
        self.boundscheck = options.get("boundscheck", True)
        self.env: dict[int, object] = {}
        self.sites: list[tuple[Op, str]] = []  # error sites: (op, kind)
        self.free_selects: set[int] = set()
        #: select id -> the per-lane value of a uniform counter slot (``op_while``)
        self.counter_old: dict[int, object] = {}
        #: check op id -> i1 ref: true when the check cannot fail (``loopchecks``)
        self.safe_checks: dict[int, str] = {}
        #: cast op id -> (32-bit copy of an induction slot, a, c): the cast is a * i + c
        self.narrowed: dict[int, tuple] = {}

    # --- the function -----------------------------------------------------------------

    def start(self, ops: list[Op], inputs: list[Value], outputs: list[Value],
              selects: list[Op]) -> tuple[list[str], list]:
        """The entry block every kernel shape begins with (the error scratch, the clock)
        and the analyses of ``ops`` (loop selects among ``selects``): (the parameters
        after the driver's four, binders of uniform bool inputs to run where they go)."""
        b = self.b
        params, binders = [], []
        self.lane_inputs: list[tuple[str, Value]] = []  # varying inputs: (ptr, value)
        for i, v in enumerate(inputs):
            params += self.input_params(i, v, binders)
        params += [f"ptr %out{i}" for i in range(len(outputs))]
        b.start("entry")
        self.scratch = b.emit(f"alloca [{self.geo.lanes} x i64], align 64", "scratch")
        self.dummy = b.emit("alloca [8 x i64], align 64", "dummy")
        self.start_clock(ops)
        self.free_selects = free_selects(selects, outputs)
        self.uses = value_uses(ops, outputs)
        self.defs = {r.id: o for top in ops for o in nested(top) for r in o.results}
        return params, binders

    def generate(self, ops: list[Op], inputs: list[Value], outputs: list[Value]) -> str:
        b = self.b
        params, binders = self.start(ops, inputs, outputs, ops)
        # dynamic scheduling: each caller (one per thread) grabs the next chunk of gangs
        # from the counter in err[7] until none is left
        ctr = b.emit("getelementptr i64, ptr %err, i64 7", "ctr")
        b.br("grab")
        b.start("grab")
        c = b.emit(f"atomicrmw add ptr {ctr}, i64 1 monotonic", "chunk")
        g0 = b.emit(f"mul i64 {c}, %chunk", "g0")
        b.cbr(b.emit(f"icmp slt i64 {g0}, %ngangs"), "range", "exit")
        b.start("range")
        end = b.emit(f"add i64 {g0}, %chunk")
        g1 = b.emit(f"select i1 {b.emit(f'icmp slt i64 {end}, %ngangs')}, i64 {end}, "
                    f"i64 %ngangs", "g1")
        b.br("head")
        b.start("head")
        g = b.emit(f"phi i64 [{g0}, %range], [%gnext, %latch]", "g")
        b.cbr(b.emit(f"icmp slt i64 {g}, {g1}"), "check", "grab")
        b.start("check")
        self.poll_gang("body")  # gangs go on after an error: one may fail earlier
        b.start("body")
        self.base = b.emit(f"mul i64 {g}, {self.geo.lanes}", "base")
        # every gang but the last has all its lanes: plain loads and stores (memory.py)
        end = b.emit(f"add i64 {self.base}, {self.geo.lanes}")
        self.full = b.emit(f"icmp sle i64 {end}, %n", "full")
        self.load_inputs(self.lane_inputs)  # and the tail mask
        for bind in binders:
            bind()
        for op in ops:
            self.lower(op)
        lane_outputs = []  # (ptr, type, rep) of the varying outputs
        for i, v in enumerate(outputs):
            self.store_output(f"%out{i}", v, lane_outputs)
        self.store_outputs(lane_outputs)
        b.br("latch")
        b.start("latch")
        b.do(f"%gnext = add i64 {g}, 1")
        b.br("head")
        return self.finish(params)

    def input_params(self, i: int, v: Value, binders: list) -> list[str]:
        t = v.type
        if isinstance(t, ArrayType):
            nd = t.ndim + (1 if v.varying else 0)
            shape = [f"%in{i}.s{k}" for k in range(nd)]
            strides = [f"%in{i}.t{k}" for k in range(nd)]
            known = self.constants.get(v.id)
            params = [f"ptr %in{i}"] + [f"i64 {s}" for s in shape + strides]
            if known is not None:  # a captured array: its shape is a constant
                shape, strides = [str(s) for s in known.shape], [str(s) for s in known.strides]
            if v.varying:
                self.env[v.id] = Arr(f"%in{i}", shape[1:], strides[1:], strides[0])
            else:
                self.env[v.id] = Arr(f"%in{i}", shape, strides)
            return params
        if not isinstance(t, ScalarType):
            raise Unsupported(f"a {t} value crossing a sync point")
        if v.varying:
            self.lane_inputs.append((f"%in{i}", v))
            return [f"ptr %in{i}"]
        if t.kind == "b":
            binders.append(lambda: self.env.__setitem__(
                v.id, Uni(self.b.emit(f"trunc i8 %in{i} to i1"))))
            return [f"i8 %in{i}"]
        self.env[v.id] = Uni(f"%in{i}")
        return [f"{lty(t)} %in{i}"]

    def store_output(self, ptr: str, v: Value, lane_outputs: list) -> None:
        rep = self.env[v.id]
        t = v.type
        if not isinstance(t, ScalarType):
            raise Unsupported(f"a {t} result")
        if v.varying:
            lane_outputs.append((ptr, t, rep))
            return
        ref = rep.ref
        if t.kind == "b":
            ref = self.b.emit(f"zext i1 {ref} to i8")
        self.b.do(f"store {'i8' if t.kind == 'b' else lty(t)} {ref}, ptr {ptr}")

    # --- ops --------------------------------------------------------------------------

    def region_ops(self, ops: list[Op]) -> list:
        for op in ops:
            if op.opcode in ("yield", "condition"):
                return [self.env[v.id] for v in op.operands]
            self.lower(op)
        return []

    def lower(self, op: Op) -> None:
        for r, rep in zip(op.results, self.op(op) or []):
            self.env[r.id] = rep

    def op(self, op: Op):
        name = op.opcode
        method = getattr(self, "op_" + name, None)
        if method is not None:
            return method(op)
        args = [self.env[v.id] for v in op.operands]
        # of scalar operands (a shared loop counter and its bound), one scalar result
        vary = bool(op.results and op.result.varying) and any(isinstance(a, Var) for a in args)
        lz = arith.Lanes(self.b, vary)
        if name in BINARY_OPS:
            t = op.operands[0].type
            if t.kind == "i" or t.kind == "u":
                if name in ("floordiv", "mod"):
                    self.check_divisor(op, args[1])
                    return [arith.int_divmod(lz, name, t, *args)]
            elif self.b.fflags and name in ("add", "sub") and host_has_fma():
                fused = arith.contract(lz, op, self.defs, self.env)
                if fused is not None:
                    return [fused]
            return [arith.binary(lz, name, t, *args, op.result.type)]
        if name in UNARY_OPS:
            return [arith.unary(lz, name, op.operands[0].type, args[0])]
        raise Unsupported(f"op {name}")

    def op_const(self, op: Op):
        t = op.result.type
        if not isinstance(t, ScalarType):
            raise Unsupported("a non-scalar constant")
        return [Uni(const_text(op.attrs["value"], t))]

    def op_undef(self, op: Op):
        return [Uni(const_text(0, op.result.type))]

    def op_entry_mask(self, op: Op):
        return [self.tail]

    def op_any(self, op: Op):
        split = self.mask_and_scalar(op.operands[0])
        if split is not None:  # any(m & c) = c & any(m): no vector and with a splat
            m, c = split
            return [Uni(self.b.emit(f"and i1 {c.ref}, {self.b.any(m)}"))]
        return [Uni(self.b.any(self.env[op.operands[0].id]))]

    def mask_and_scalar(self, v: Value):
        """``(m, c)`` where ``v`` is ``bitand`` of a per-lane mask ``m`` and a scalar
        ``c`` (mandelbrot's ``i < max_iter`` on the shared counter), else None."""
        o = self.defs.get(v.id)
        if o is None or o.opcode != "bitand":
            return None
        x, y = (self.env[a.id] for a in o.operands)
        if isinstance(x, Uni) and isinstance(y, Var):
            x, y = y, x
        return (x, y) if isinstance(x, Var) and isinstance(y, Uni) else None

    def op_cast(self, op: Op):
        lz = arith.Lanes(self.b, bool(op.result.varying))
        if id(op) in self.narrowed:  # a * i + c from the loop's 32-bit copy of i
            low, a, c = self.narrowed[id(op)]
            t = op.result.type
            a, c = (Uni(str((v + 2 ** 31) % 2 ** 32 - 2 ** 31)) for v in (a, c))  # i32 text
            x = lz.binop("mul", t, low, a) if a.ref != "1" else low
            return [lz.binop("add", t, x, c) if c.ref != "0" else x]
        return [arith.cast(lz, op.operands[0].type, op.result.type, self.env[op.operands[0].id])]

    def op_math(self, op: Op):
        lz = arith.Lanes(self.b, bool(op.result.varying))
        args = [self.env[v.id] for v in op.operands]
        return [arith.math_call(lz, op.attrs["fn"], op.operands[0].type, args)]

    def op_select(self, op: Op):
        c, a, b = (self.env[v.id] for v in op.operands)
        if id(op) in self.free_selects:
            return [a]  # only lanes that leave the loop take b, and nothing reads theirs
        if id(op) in self.counter_old:
            b = self.counter_old[id(op)]  # the per-lane count, not the loop's scalar
        lz = arith.Lanes(self.b, bool(op.result.varying))
        return [lz.sel(c, a, b, op.result.type)]

    def op_intrinsic(self, op: Op):
        return INTRINSICS[op.attrs["name"]].lowerings["cpu"](self, op)

    def op_array_dim(self, op: Op):
        return [Uni(self.env[op.operands[0].id].shape[op.attrs["axis"]])]

    # --- errors -----------------------------------------------------------------------

    def fail_if(self, bad, op: Op, kind: str, value: Var | Uni | None = None,
                extra: tuple[str, str] = ("0", "0")) -> None:
        """If any lane of ``bad`` is on: record the error for the first such lane (with
        that lane's ``value``) and leave the gang (``stops``: the earliest error in
        lockstep order wins, whichever gang finds it first)."""
        b = self.b
        site = len(self.sites)
        self.sites.append((op, kind))
        err, ok = b.label("err"), b.label("ok")
        # the test is an or of the parts (k-register ors and one kortest); the lane
        # bits are packed into an i64 only once an error is there (the packing was ~9
        # scalar ops a check, every loop trip: mc-pi-block's two uint32 range checks)
        b.cbr(b.any(bad), err, ok)
        b.start(err)
        bits = b.bits(bad)
        first = b.emit(f"call i64 @llvm.cttz.i64(i64 {bits}, i1 true)")
        b.declare("declare i64 @llvm.cttz.i64(i64, i1)")
        lane = b.emit(f"add i64 {self.base}, {first}")
        v = "0"
        if isinstance(value, Uni):
            v = value.ref
        elif isinstance(value, Var):
            for k, p in enumerate(b.parts(value, I64, value.w)):
                slot = b.emit(f"getelementptr i64, ptr {self.scratch}, i64 {k * value.w}")
                b.do(f"store <{value.w} x i64> {p}, ptr {slot}, align 8")
            slot = b.emit(f"getelementptr i64, ptr {self.scratch}, i64 {first}")
            v = b.emit(f"load i64, ptr {slot}")
        self.record_error(op, KINDS.index(kind), lane, site, [v, *extra])
        b.br("latch")
        b.start(ok)

    def check_divisor(self, op: Op, divisor) -> None:
        if op.mask is None or (isinstance(divisor, Uni) and _nonzero_literal(divisor.ref)):
            return  # (x % 2 never fails: no error site, so loops need not watch for one)
        t = op.operands[1].type
        lz = arith.Lanes(self.b, isinstance(divisor, Var) or isinstance(self.env[op.mask.id], Var))
        zero = arith.compare(lz, "eq", t, divisor, Uni("0"))
        mask = self.env[op.mask.id]
        bad = lz.binop("and", BOOL, zero, mask)
        self.fail_if(bad, op, "zerodiv")

    def op_check(self, op: Op):
        b = self.b
        safe = self.safe_checks.get(id(op))
        if safe is not None:  # decided before the loop (loopchecks.py)
            run, done = b.label("check"), b.label("checked")
            b.cbr(safe, done, run)
            b.start(run)
        ok, mask = self.env[op.operands[0].id], self.env[op.mask.id]
        lz = arith.Lanes(b, isinstance(ok, Var) or isinstance(mask, Var))
        failed = lz.binop("xor", BOOL, ok, Uni("true"))
        bad = lz.binop("and", BOOL, mask, failed)
        self.fail_if(bad, op, op.attrs["kind"])
        if safe is not None:
            b.br(done)
            b.start(done)
        return []


# --- intrinsics: the lane-local ones lower here; cross-lane ones are sync points that the
# phase runner executes over all lanes at once (see phases.py) ---------------------------

@lowers("cpu", "lane")
def _lane(gen: KernelGen, op: Op):
    w = gen.geo.width(I64)
    return [Var(gen.gang_lane_ids(w), w)]


@lowers("cpu", "nlanes")
def _nlanes(gen: KernelGen, op: Op):
    return [Uni("%n")]

