"""Memory ops of the cpu code generator: per-lane buffers, loads, stores, bounds checks.

Per-lane buffers (varying inputs and outputs of a phase) are read and written gang by
gang: with plain vector loads and stores where the gang has all its lanes, with
``llvm.masked.load/store`` in the last gang, whose lanes past ``n`` are off.  Array elements at
computed indices use ``llvm.masked.gather/scatter`` with the op's mask, so inactive
lanes never touch memory; a uniform access under a varying mask reads or writes a
dummy slot when no lane is active.  Bounds checks (on unless ``boundscheck=False``)
raise NumPy's IndexError message for the first active lane out of bounds, before any
access; negative indices wrap as in Python.
"""

from __future__ import annotations

from ...ir.core import Op, Value
from ...types import ScalarType
from . import arith
from .vectors import BOOL, I64, Arr, Uni, Unsupported, Var, lty


def mem_type(t: ScalarType) -> str:
    return "i8" if t.kind == "b" else lty(t)


def mangle(t: ScalarType, w: int) -> str:
    return arith.mangle(ScalarType("int8") if t.kind == "b" else t, w)


class MemoryOps:
    """Mixin of ``codegen.KernelGen`` (uses its builder ``b``, ``env``, ``fail_if``)."""

    # --- per-lane buffers -------------------------------------------------------------

    def gang_lane_ids(self, w: int) -> list[str]:
        """The lane index of each of the gang's slots, as i64 parts of width w (a
        persistent gang, ``persistent``, holds other lanes than ``base + i``)."""
        return self.b.lane_ids(self.base, w)

    def _to_value(self, parts: list[str], t: ScalarType, w: int) -> Var:
        if t.kind == "b":
            parts = [self.b.emit(f"icmp ne <{w} x i8> {p}, zeroinitializer") for p in parts]
        return Var(parts, w)

    def _to_memory(self, parts: list[str], t: ScalarType, w: int) -> list[str]:
        if t.kind == "b":
            return [self.b.emit(f"zext <{w} x i1> {p} to <{w} x i8>") for p in parts]
        return parts

    def _fresh_tail(self, w: int) -> list[str]:
        """The gang's lanes below ``n`` as ``<w x i1>`` parts: the tail mask made again
        from the scalar count of lanes left, as an i64 of low bits.  (After a loop,
        reusing the tail would keep it live across the loop: 4-8 k registers of the 7
        that the loop's own masks need.)"""
        b = self.b
        left = b.emit(f"sub i64 %n, {self.base}")  # 0 < left < lanes <= 64 here
        low = b.emit(f"sub i64 {b.emit(f'shl i64 1, {left}')}, 1")
        out = []
        for k in range(self.geo.lanes // w):
            part = b.emit(f"lshr i64 {low}, {k * w}") if k else low
            part = b.emit(f"trunc i64 {part} to i{w}") if w < 64 else part
            out.append(b.emit(f"bitcast i{w} {part} to <{w} x i1>"))
        return out

    def _two_ways(self, emit) -> list[tuple[list, str]]:
        """``emit(masked)`` in a block for full gangs (plain loads and stores: masked
        ones cost 12-20% of black-scholes on Zen 4) and one for the last, partial gang
        (masked); returns ``[(result, block)]`` of both, the join block started."""
        return self.b.branch(self.full, ("full", "part", "joined"), emit)

    def load_inputs(self, items: list[tuple[str, Value]]) -> None:
        """Bind each varying input (``(ptr, value)``) to its gang's lanes, and
        ``self.tail`` to the gang's lanes below ``n``: all on in a full gang, where LLVM
        sees a constant (the mask then costs no k registers), from compares of the lane
        indices with ``n`` in the partial one."""
        b, mw = self.b, self.geo.mask_width

        def emit(masked: bool) -> list[list[str]]:
            if masked:
                nv = b.splat("%n", "i64", mw)
                self.tail = Var([b.emit(f"icmp slt <{mw} x i64> {p}, {nv}")
                                 for p in b.lane_ids(self.base, mw)], mw)
                tail = self.tail.parts
            else:
                tail = ["<" + ", ".join(["i1 true"] * mw) + ">"] * (self.geo.lanes // mw)
            return [tail] + [self._load_parts(ptr, v.type, masked) for ptr, v in items]
        (plain, blk_a), (masked, blk_b) = self._two_ways(emit)
        types = [(BOOL, "i1", mw)] + [(v.type, mem_type(v.type), self.geo.width(v.type))
                                      for _, v in items]
        joined = [[b.emit(f"phi <{w} x {mt}> [{x}, %{blk_a}], [{y}, %{blk_b}]")
                   for x, y in zip(pa, pb)] for (_, mt, w), pa, pb in zip(types, plain, masked)]
        self.tail = Var(joined[0], mw)
        for (_, v), parts in zip(items, joined[1:]):
            self.env[v.id] = self._to_value(parts, v.type, self.geo.width(v.type))

    def _load_parts(self, ptr: str, t: ScalarType, masked: bool) -> list[str]:
        b, w = self.b, self.geo.width(t)
        mt, m = mem_type(t), mangle(t, w)
        out = []
        masks = b.parts(self.tail, BOOL, w) if masked else []
        for k in range(self.geo.lanes // w):
            at = b.emit(f"add i64 {self.base}, {k * w}")
            p = b.emit(f"getelementptr {mt}, ptr {ptr}, i64 {at}")
            if not masked:
                out.append(b.emit(f"load <{w} x {mt}>, ptr {p}, align 1"))
                continue
            b.declare(f"declare <{w} x {mt}> @llvm.masked.load.{m}.p0(ptr, i32, <{w} x i1>, "
                      f"<{w} x {mt}>)")
            out.append(b.emit(f"call <{w} x {mt}> @llvm.masked.load.{m}.p0(ptr {p}, i32 1, "
                              f"<{w} x i1> {masks[k]}, <{w} x {mt}> zeroinitializer)"))
        return out

    def store_outputs(self, items: list[tuple[str, ScalarType, object]]) -> None:
        """Store each varying output (``(ptr, type, rep)``) for the gang's lanes."""
        if not items:
            return
        b = self.b
        vals = [self._to_memory(b.parts(rep, t, self.geo.width(t)), t, self.geo.width(t))
                for _, t, rep in items]

        def emit(masked: bool) -> None:
            tails: dict[int, list[str]] = {}
            for (ptr, t, _), parts in zip(items, vals):
                w = self.geo.width(t)
                mt, m = mem_type(t), mangle(t, w)
                for k, v in enumerate(parts):
                    at = b.emit(f"add i64 {self.base}, {k * w}")
                    p = b.emit(f"getelementptr {mt}, ptr {ptr}, i64 {at}")
                    if not masked:
                        b.do(f"store <{w} x {mt}> {v}, ptr {p}, align 1")
                        continue
                    b.declare(f"declare void @llvm.masked.store.{m}.p0(<{w} x {mt}>, ptr, "
                              f"i32, <{w} x i1>)")
                    mk = tails.setdefault(w, self._fresh_tail(w))[k]
                    b.do(f"call void @llvm.masked.store.{m}.p0(<{w} x {mt}> {v}, ptr {p}, "
                         f"i32 1, <{w} x i1> {mk})")
        self._two_ways(emit)

    # --- addressing -------------------------------------------------------------------

    def _address(self, op: Op, nidx: int, w: int):
        """(uniform byte offset | varying offset parts, active mask) of an access, after
        the bounds checks."""
        arr = self.env[op.operands[0].id]
        if not isinstance(arr, Arr):
            raise Unsupported("indexing a value that is not an array")
        if nidx != len(arr.shape):
            raise Unsupported("indexing an array with fewer indices than axes")
        mask = self.env[op.mask.id] if op.mask is not None else Uni("true")
        idx = [self.env[v.id] for v in op.operands[1:1 + nidx]]
        varying = any(isinstance(i, Var) for i in idx) or arr.lane_stride is not None
        lz = arith.Lanes(self.b, varying)
        off = None
        self.in_bounds = Uni("true")  # of a uniform access: is its address safe to read
        for axis, (i, v) in enumerate(zip(idx, op.operands[1:1 + nidx])):
            if v.type.name != "int64":
                i = arith.cast(arith.Lanes(self.b, isinstance(i, Var)), v.type, I64, i)
            n = Uni(arr.shape[axis])
            neg = arith.compare(lz, "lt", I64, i, Uni("0"))
            lo = arith.compare(lz, "lt", I64, i, Uni(self.b.emit(f"sub i64 0, {n.ref}")))
            hi = arith.compare(lz, "ge", I64, i, n)
            if not varying:
                out = lz.apply("or {0} {1}, {2}", BOOL, lo, hi)
                ok = lz.apply("xor {0} {1}, {2}", BOOL, out, Uni("true"))
                self.in_bounds = lz.apply("and {0} {1}, {2}", BOOL, self.in_bounds, ok)
            if self.boundscheck:
                chk = arith.Lanes(self.b, varying or isinstance(mask, Var))
                bad = chk.apply("and {0} {1}, {2}", BOOL, mask,
                                lz.apply("or {0} {1}, {2}", BOOL, lo, hi))
                self.fail_if(bad, op, "index", i, (str(axis), n.ref))
            fixed = lz.sel(neg, lz.apply("add {0} {1}, {2}", I64, i, n), i, I64, w=w)
            term = lz.apply("mul {0} {1}, {2}", I64, fixed, Uni(arr.strides[axis]), w=w)
            off = term if off is None else lz.apply("add {0} {1}, {2}", I64, off, term, w=w)
        if off is None:
            off = Uni("0")
        if arr.lane_stride is not None:
            ids = Var(self.gang_lane_ids(w), w)
            rows = lz.apply("mul {0} {1}, {2}", I64, ids, Uni(arr.lane_stride), w=w)
            off = lz.apply("add {0} {1}, {2}", I64, off, rows, w=w)
        return arr, off, mask

    def _uniform_ptr(self, arr: Arr, off: Uni, mask, store: bool) -> str:
        """The element's address, or a dummy slot: for a load, when the index is out of
        bounds (no active lane uses it then, or the check has failed); for a store, also
        when no lane is active."""
        p = self.b.emit(f"getelementptr i8, ptr {arr.data}, i64 {off.ref}")
        safe = self.in_bounds.ref
        if store:
            safe = self.b.emit(f"and i1 {safe}, {self.b.any(mask)}")
        return self.b.emit(f"select i1 {safe}, ptr {p}, ptr {self.dummy}")

    def _ptrs(self, arr: Arr, off, w: int) -> list[str]:
        parts = self.b.parts(off, I64, w)
        return [self.b.emit(f"getelementptr i8, ptr {arr.data}, <{w} x i64> {p}") for p in parts]

    def gather(self, ptrs: list[str], masks: list[str], t: ScalarType, w: int) -> Var:
        """The elements at ``ptrs`` (``<w x ptr>`` parts) where ``masks`` are on."""
        b, mt, m = self.b, mem_type(t), mangle(t, w)
        b.declare(f"declare <{w} x {mt}> @llvm.masked.gather.{m}.v{w}p0(<{w} x ptr>, i32, "
                  f"<{w} x i1>, <{w} x {mt}>)")
        out = [b.emit(f"call <{w} x {mt}> @llvm.masked.gather.{m}.v{w}p0(<{w} x ptr> {p}, "
                      f"i32 1, <{w} x i1> {mk}, <{w} x {mt}> zeroinitializer)")
               for p, mk in zip(ptrs, masks)]
        return self._to_value(out, t, w)

    def scatter(self, ptrs: list[str], masks: list[str], vals: list[str], t: ScalarType,
                w: int) -> None:
        """Store ``vals`` (``_to_memory``'s parts) at ``ptrs`` where ``masks`` are on."""
        b, mt, m = self.b, mem_type(t), mangle(t, w)
        b.declare(f"declare void @llvm.masked.scatter.{m}.v{w}p0(<{w} x {mt}>, <{w} x ptr>, "
                  f"i32, <{w} x i1>)")
        for p, mk, v in zip(ptrs, masks, vals):
            b.do(f"call void @llvm.masked.scatter.{m}.v{w}p0(<{w} x {mt}> {v}, <{w} x ptr> "
                 f"{p}, i32 1, <{w} x i1> {mk})")

    # --- ops --------------------------------------------------------------------------

    def op_load(self, op: Op):
        t = op.result.type
        if not isinstance(t, ScalarType):
            raise Unsupported("loading a sub-array")
        w = self.geo.width(t)
        arr, off, mask = self._address(op, len(op.operands) - 1, w)
        b, mt = self.b, mem_type(t)
        if isinstance(off, Uni):
            v = b.emit(f"load {mt}, ptr {self._uniform_ptr(arr, off, mask, False)}")
            if t.kind == "b":
                v = b.emit(f"icmp ne i8 {v}, 0")
            return [Uni(v)]
        return [self.gather(self._ptrs(arr, off, w), b.parts(mask, BOOL, w), t, w)]

    def op_store(self, op: Op):
        t = op.operands[-1].type
        if not isinstance(t, ScalarType):
            raise Unsupported("storing a sub-array")
        w = self.geo.width(t)
        arr, off, mask = self._address(op, len(op.operands) - 2, w)
        value = self.env[op.operands[-1].id]
        b, mt = self.b, mem_type(t)
        if isinstance(off, Uni) and isinstance(value, Uni):
            v = b.emit(f"zext i1 {value.ref} to i8") if t.kind == "b" else value.ref
            b.do(f"store {mt} {v}, ptr {self._uniform_ptr(arr, off, mask, True)}")
            return []
        vals = self._to_memory(b.parts(value, t, w), t, w)
        self.scatter(self._ptrs(arr, off, w), b.parts(mask, BOOL, w), vals, t, w)
        return []
