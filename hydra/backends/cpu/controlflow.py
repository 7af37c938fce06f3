"""Structured control flow of the cpu code generator: ``if`` and ``while`` as LLVM blocks.

Takes: an ``if`` or ``while`` op of a phase, with a uniform condition (a varying one was
turned into masks by ``linearize``), and ``KernelGen``'s environment (this is its
mixin).  Guarantees: the regions' ops run in blocks joined by phis, a varying value
crossing as its parts; without AVX-512 a mask crossing a join or a back edge travels as
an integer vector (``carry_mask``).  A ``while`` also: runs slots that count alike on
all active lanes as one scalar (``loopselects.uniform_counters``), keeps 32-bit copies
of int64 induction slots that are read truncated (``loopchecks.narrow_casts``), tests
once before the loop the checks that no trip can fail (``induction_guards``), counts
its trips for the lockstep clock of errors and polls on its back edge (``stops``).
"""

from __future__ import annotations

from ...ir.core import Op, Region, Value
from . import arith
from .loopchecks import induction_checks, inductions, narrow_casts
from .loopselects import uniform_counters
from .stops import MAX_DEPTH
from .vectors import BOOL, I64, U32, Uni, Unsupported, Var, host_has_avx512, lty, vty


class ControlFlow:
    """The ``op_if`` and ``op_while`` rules of ``KernelGen`` (a mixin) and their phis."""

    def to_phis(self, values: list[Value], reps: list) -> list[tuple[str, str]]:
        """The incoming (type, ref) of each phi for these values' reps."""
        out = []
        for v, rep in zip(values, reps):
            s = v.type
            if not v.varying:
                out.append((lty(s), rep.ref))
                continue
            w = self.geo.width(s)
            for p in self.b.parts(rep, s, w):
                if s.kind == "b" and not host_has_avx512():
                    out.append(self.carry_mask(p, w))
                else:
                    out.append((vty(s, w), p))
        return out

    def carry_mask(self, p: str, w: int) -> tuple[str, str]:
        """Without AVX-512, a mask crossing a back edge travels as <w x iK> through an
        empty inline asm, or LLVM shrinks the phi to i1 and x86 repacks it every
        iteration.  With AVX-512 the i1 phi lives in a k register, which measured 5-8%
        faster on mandelbrot and aobench than the widened form (none slower)."""
        it = f"<{w} x i{self.geo.vbits // w}>"
        x = self.b.emit(f"sext <{w} x i1> {p} to {it}")
        return it, self.b.emit(f'call {it} asm "", "=x,0"({it} {x})')

    def from_phis(self, values: list[Value], refs: list[str]) -> list:
        refs = list(refs)
        reps = []
        for v in values:
            s = v.type
            if not v.varying:
                reps.append(Uni(refs.pop(0)))
                continue
            w = self.geo.width(s)
            parts = [refs.pop(0) for _ in range(self.geo.lanes // w)]
            if s.kind == "b" and not host_has_avx512():
                it = f"<{w} x i{self.geo.vbits // w}>"
                parts = [self.b.emit(f"icmp slt {it} {p}, zeroinitializer") for p in parts]
            reps.append(Var(parts, w))
        return reps

    def op_if(self, op: Op):
        c = self.env[op.operands[0].id]
        if not isinstance(c, Uni):
            raise Unsupported("a varying if (structured IR)")
        b, (then, other) = self.b, op.regions
        (ins_a, blk_a), (ins_b, blk_b) = b.branch(c.ref, ("then", "else", "join"), lambda no: (
            self.to_phis(op.results, self.region_ops((other if no else then).ops))))
        refs = [b.emit(f"phi {ta} [{ra}, %{blk_a}], [{rb}, %{blk_b}]")
                for (ta, ra), (_, rb) in zip(ins_a, ins_b)]
        return self.from_phis(op.results, refs)

    def op_while(self, op: Op):
        before, body = op.regions
        b = self.b
        self.safe_checks.update(self.induction_guards(op))
        init = self.to_phis(before.args, [self.env[v.id] for v in op.operands])
        # 32-bit copies of int64 induction slots that are read truncated (loopchecks.py)
        narrow, ind = narrow_casts(op, self.defs), inductions(op, self.defs)
        firsts = {j: b.parts(arith.cast(arith.Lanes(b, True), I64, U32,
                                        self.env[op.operands[j].id]), U32)
                  for j in sorted({j for j, _, _ in narrow.values()})}
        pre = b.block
        head, loop, done = b.label("while"), b.label("do"), b.label("done")
        b.br(head)
        b.start(head)
        slots = [b.hole("c") for _ in init]
        # the iteration count, for the lockstep clock of errors (see stops.py)
        k, k_at = b.hole("k")
        counted = len(self.loops) < MAX_DEPTH
        if counted:
            self.loops.append((self.order[id(op)], k))
        # slots that count alike on all active lanes run as one scalar inside the loop
        counters = uniform_counters(op)
        shadows = {j: b.hole("s") for j in counters}
        lows = {j: [b.hole("n") for _ in ps] for j, ps in firsts.items()}
        w32 = self.geo.width(U32)
        self.narrowed.update({cid: (Var([n for n, _ in lows[j]], w32), a, c)
                              for cid, (j, a, c) in narrow.items()})
        real = self.from_phis(before.args, [name for name, _ in slots])
        self.bind(before, real)
        for j, (name, _) in shadows.items():
            self.env[before.args[j].id] = Uni(name)
        cond, *vals = self.region_ops(before.ops)
        if not isinstance(cond, Uni):
            raise Unsupported("a varying loop condition (structured IR)")
        for j in shadows:
            vals[j] = real[j]  # the loop's result stays per lane
        # a loop mask m & c with a scalar c: the body runs only where c holds, so its
        # mask is m, and the and is left to the exit test (op_any), a scalar compare and
        # branch instead of c anded into every mask part each trip (4 kandw + kmovd +
        # cmov in mandelbrot's loop); the mask the loop ends with is then m, not all off,
        # so only where nothing reads it
        split = self.mask_and_scalar(before.ops[-1].operands[1])
        if split is not None and not self.uses[op.results[0].id]:
            vals[0] = split[0]
        # masks cross into the body and out of the loop as integer vectors: an <8 x i1>
        # live across blocks is legalized to <8 x i16> and repacked every iteration
        flat = self.to_phis(body.args, vals)
        b.cbr(cond.ref, loop, done)
        b.start(loop)
        vals = self.from_phis(body.args, [r for _, r in flat])
        self.bind(body, vals)
        for j, (name, _) in shadows.items():
            self.env[body.args[j].id] = Uni(name)
            self.counter_old[counters[j][0]] = vals[j]
        back = self.to_phis(body.args, self.region_ops(body.ops))
        k_next = b.emit(f"add i64 {k}, 1")
        if counted:
            self.loops.pop()
        self.poll_back_edge((self.order[id(op)], k) if counted else None, k_next)
        latch = b.block
        types = {j: lty(before.args[j].type) for j in shadows}
        steps = {j: b.emit(f"add {types[j]} {name}, {self.env[counters[j][1]].ref}")
                 for j, (name, _) in shadows.items()}
        vt = f"<{w32} x i32>"
        for j, holes in lows.items():
            step = b.splat(str((ind[j] + 2 ** 31) % 2 ** 32 - 2 ** 31), "i32", w32)
            for hole, first in zip(holes, firsts[j]):
                b.fill_phi(hole, vt, (first, pre), (b.emit(f"add {vt} {hole[0]}, {step}"), latch))
        b.br(head)
        for hole, (t, a), (_, z) in zip(slots, init, back):
            b.fill_phi(hole, t, (a, pre), (z, latch))
        for j, hole in shadows.items():
            b.fill_phi(hole, types[j], (self.env[op.operands[j].id].ref, pre), (steps[j], latch))
        b.fill_phi((k, k_at), "i64", ("0", pre), (k_next, latch))
        b.start(done)
        return self.from_phis(body.args, [r for _, r in flat])

    def induction_guards(self, op: Op) -> dict[int, str]:
        """For each check in ``op``'s body that ``loopchecks`` can decide before the
        loop: an i1, true when no lane of the gang can fail it on any trip."""
        out = {}
        for key, r in induction_checks(op, self.defs).items():
            entry, init, bound = (self.env[v.id] for v in (op.operands[0], r.init, r.bound))
            lz = arith.Lanes(self.b, any(isinstance(x, Var) for x in (entry, init, bound)))
            enters = lz.binop("and", BOOL, entry, arith.compare(lz, "lt", I64, init, bound))
            fine = arith.compare(lz, "le", I64, bound, Uni(str(r.hi_bound)))
            if r.lo is not None:
                lo = arith.compare(lz, "ge", I64, init, Uni(str(r.lo)))
                fine = lz.binop("and", BOOL, fine, lo)
            bad = lz.binop("and", BOOL, enters, lz.binop("xor", BOOL, fine, Uni("true")))
            out[key] = self.b.emit(f"xor i1 {self.b.any(bad)}, true", "safe")
        return out

    def bind(self, region: Region, reps: list) -> None:
        for a, rep in zip(region.args, reps):
            self.env[a.id] = rep
