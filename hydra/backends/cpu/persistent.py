"""Persistent lanes: a gang whose lane finished its loop takes the next lane at once.

A lockstep gang runs its varying loop as long as its slowest lane: over collatz's starts
1..1e6 a 32-lane gang's slots hold a running lane only about half of the loop's trips.
SPEC section 4 lets a backend group lanes as it likes where no sync point is involved,
so for a phase of the shape

    pre (ops before the loop)   while[varying] (the loop)   post (ops after it)

the gang's *slots* each hold a lane of their own.  Every 4th trip the gang counts the
slots whose lane has left the loop; once a quarter of them have, it runs ``post`` for
those lanes (their results stored at the lanes' indices), gives the free slots the
next lanes of its chunk (the chunks come from the same atomic counter as lockstep
gangs take, ``codegen``; a gang whose chunk runs out grabs the next one, so it stays
full until the whole range is taken), runs ``pre`` for them, and the loop goes on.
Uniform values of ``pre`` that depend on nothing lane-related are computed once, before
the gang loop.  A refill costs about ten trips (scatter, gather, slot arithmetic), so
it waits for a quarter of the slots; the slots are at most two mask parts wide (16
int64 slots with AVX-512), which keeps the loop's masks in the k registers
(bench/RESULTS.md has the measurements).  A guard ``if`` around the loop (after an
early ``return``) is no obstacle: a guard only skips an arm that no lane runs, so its
arm is inlined first (``persistplan``).

The phases that run this way, and the split of their ops, are ``persistplan``'s
(its docstring states the eligibility rules; otherwise a phase runs the lockstep way
of ``codegen``, and the first line of its LLVM says why).

``HYDRA_CPU_PERSISTENT=0`` turns the transformation off (for A/B measurements), and
``HYDRA_CPU_PERSISTENT_SLOTS``, ``_BATCH``, ``_EVERY`` override the gang shape.
``Phase.gen.persistent`` is True for a persistent phase.
"""

from __future__ import annotations

import os

from ...ir.core import Op, Value
from ...types import ScalarType
from ..cut import nested
from . import arith
from .codegen import KernelGen
from .memory import mem_type
from .persistplan import Shape, plan
from .vectors import BOOL, I64, Geometry, Unsupported, Var


def _knob(name: str, default: int) -> int:
    """``HYDRA_CPU_PERSISTENT_<name>`` if set (for measurements), else ``default``."""
    return int(os.environ.get(f"HYDRA_CPU_PERSISTENT_{name}", default))


def zero(ty: str) -> str:
    """A zero of LLVM type ``ty`` (the state before a slot's first lane)."""
    if ty.startswith("<"):
        return "zeroinitializer"
    if ty == "i1":
        return "false"
    return "0.0" if ty in ("float", "double") else "0"


class PersistentGen(KernelGen):
    """``codegen.KernelGen`` with the gang loop of the module docstring."""

    persistent = True
    #: the trip's back edge leaves once any gang has failed (the twin runs it again)
    uncounted_error = "latch"

    def __init__(self, name: str, geo, options: dict, constants=None) -> None:
        #: lanes per gang of the schedule (the chunks of the driver's counter)
        self.gang = geo.lanes
        # at most two mask parts per slot vector: the k registers then hold the loop's
        # masks without spilling (collatz: 32 slots of int64 = 4 parts spilled k masks
        # through the stack; 16 slots ran 3% faster than 32 and 29% faster than lockstep)
        slots = _knob("SLOTS", min(geo.lanes, 2 * geo.mask_width))
        geo = Geometry(geo.vbits, slots, min(geo.mask_width, slots))
        super().__init__(name, geo, options, constants)
        #: refill once this many slots are free, checked every ``every`` trips (a power
        #: of two): a refill costs a few trips' time, so it waits for a quarter of the
        #: slots; measured on collatz, see bench/RESULTS.md
        self.batch = _knob("BATCH", max(1, slots // 4))
        self.every = _knob("EVERY", 4)

    def gang_lane_ids(self, w: int) -> list[str]:
        return self.b.parts(self.idx, I64, w)

    def op(self, op: Op):
        """In ``post``, an op's mask is also limited to the finished slots: a mask made
        in ``pre`` (after an early return, say) is on for running slots too."""
        if self.post_mask is None or op.mask is None:
            return super().op(op)
        own = self.env[op.mask.id]
        self.env[op.mask.id] = arith.Lanes(self.b, True).apply(
            "and {0} {1}, {2}", BOOL, own, self.post_mask)
        try:
            return super().op(op)
        finally:
            self.env[op.mask.id] = own

    def at_lanes(self, ptr: str, t: ScalarType, rep=None):
        """Gather (``rep`` None) or scatter ``rep`` at the slots' lanes of the per-lane
        buffer ``ptr`` (not at ``base``)."""
        b, w = self.b, self.geo.width(t)
        masks = b.parts(self.tail, BOOL, w)
        ptrs = [b.emit(f"getelementptr {mem_type(t)}, ptr {ptr}, <{w} x i64> {p}")
                for p in self.gang_lane_ids(w)]
        if rep is None:
            return self.gather(ptrs, masks, t, w)
        return self.scatter(ptrs, masks, self._to_memory(b.parts(rep, t, w), t, w), t, w)

    def count_trip(self, mask) -> None:
        """Called at the top of each trip with the slots' loop mask: a hook for the
        lane-utilization counters of ``bench.lanes`` (nothing in production)."""

    # --- the kernel -------------------------------------------------------------------

    def generate_persistent(self, shape: Shape) -> str:
        b, geo = self.b, self.geo
        self.base = "0"  # an error names a slot, not a lane: only that one failed counts
        self.post_mask = None
        loop = shape.loop
        before, body = loop.regions
        every = [*shape.hoisted, *shape.pre, loop, *shape.post]
        # varying inputs (``self.lane_inputs``) are gathered at the slots' lanes
        # (``at_lanes``) on each refill
        params, binders = self.start(every, shape.inputs, shape.outputs,
                                     every[len(shape.hoisted):])
        for bind in binders:
            bind()  # a uniform bool input
        for op in shape.hoisted:
            self.lower(op)
        for i, v in enumerate(shape.outputs):
            if not v.varying:
                self.store_output(f"%out{i}", v, [])
        ctr = b.emit("getelementptr i64, ptr %err, i64 7", "ctr")
        # the state each slot carries: its lane, the pre values the loop or post read,
        # the loop's carried values
        idx_v = Value(I64, None, "idx", True)
        used = {v.id for r in loop.regions for o in r.walk() for v in o.inputs()}
        used |= {v.id for op in shape.post for o in nested(op) for v in o.inputs()}
        used |= {v.id for v in shape.outputs}
        kept = [v for _, v in self.lane_inputs if v.id in used]
        kept += [r for op in shape.pre for r in op.results if r.id in used]
        state = [idx_v, *kept, *before.args]
        # and as scalars: more lanes to take?, the next lane, the chunk's end, the slots
        # holding a lane whose results are not stored yet (bit i: slot i), trips since
        # the last refill
        nparts = sum(geo.lanes // geo.width(v.type) if v.varying else 1 for v in state)
        entry = b.block
        b.br("head")
        # head: the phis (filled in at the end: their types are the back edge's), then
        # the loop's condition on every slot
        b.start("head")
        holes = [b.hole("p") for _ in range(nparts + 5)]
        names = [name for name, _ in holes]
        more, nxt, hi, alive, trips = names[-5:]
        reps = self.from_phis(state, names[:-5])
        self.idx = reps[0]
        for v, rep in zip(state[1:], reps[1:]):
            self.env[v.id] = rep
        _, *vals = self.region_ops(before.ops)
        # every 4th trip (``every``): are enough slots free for a refill?  The other
        # trips cost what a lockstep trip does, but for per-slot counters
        tick = b.emit(f"and i64 {trips}, {self.every - 1}")
        b.cbr(b.emit(f"icmp eq i64 {tick}, 0"), "check", "trip")
        b.start("trip")
        self.count_trip(vals[0])
        self.bind(body, vals)
        back = self.region_ops(body.ops)
        self.poll_back_edge(None, "0")
        flat = self.to_phis(state, reps[:1 + len(kept)] + back)
        types = [t for t, _ in flat] + ["i1", "i64", "i64", "i64", "i64"]
        first = [zero(t) for t in types[:-5]] + ["true", "0", "0", "0", "0"]
        incoming = [([r for _, r in flat] + [more, nxt, hi, alive,
                                              b.emit(f"add i64 {trips}, 1")], b.block)]
        b.br("head")
        # a slot is out of the loop: is it a lane that just finished, or can it take one?
        b.start("check")
        full = (1 << geo.lanes) - 1
        free = b.emit(f"and i64 {b.emit(f'xor i64 {self._bits(vals[0])}, -1')}, {full}")
        done = b.emit(f"and i64 {alive}, {free}")
        b.declare("declare i64 @llvm.ctpop.i64(i64)")
        nfree = b.emit(f"call i64 @llvm.ctpop.i64(i64 {free})")
        enough = b.emit(f"icmp uge i64 {nfree}, {self.batch}")
        # while lanes are left, refill once `batch` slots are free (a refill costs a few
        # trips); then store each finished lane at once, so the gang can drain and leave
        last = b.emit(f"and i1 {b.emit(f'xor i1 {more}, true')}, "
                      f"{b.emit(f'icmp ne i64 {done}, 0')}")
        b.cbr(b.emit(f"or i1 {b.emit(f'and i1 {more}, {enough}')}, {last}"), "refill", "trip")
        # refill: post for the finished slots, new lanes for the free ones, pre for them
        b.start("refill")
        finished = self._mask_of(done)
        self.tail = self.post_mask = finished
        for op in shape.pre:
            if op.opcode == "entry_mask":
                self.env[op.result.id] = finished
        for r, v in zip(loop.results, vals):
            self.env[r.id] = v
        for op in shape.post:
            self.lower(op)
        lane_outputs: list = []
        for i, v in enumerate(shape.outputs):
            if v.varying:
                self.store_output(f"%out{i}", v, lane_outputs)
        for ptr, t, rep in lane_outputs:
            self.at_lanes(ptr, t, rep)  # scattered to the finished slots' lanes
        self.post_mask = None
        idx, okbits, nxt2, hi2, more2 = self._fill(ctr, free, more, nxt, hi)
        self.idx = idx
        alive2 = b.emit(f"or i64 {b.emit(f'xor i64 {alive}, {done}')}, {okbits}")
        b.cbr(b.emit(f"icmp ne i64 {alive2}, 0"), "fresh", "exit")
        b.start("fresh")
        ok = self._mask_of(okbits)
        self.tail = ok
        for ptr, v in self.lane_inputs:
            self.env[v.id] = self.at_lanes(ptr, v.type)
        for op in shape.pre:
            self.lower(op)
        merged = [idx]
        merged += [self._merge(v, ok, self.env[v.id], reps[1 + k]) for k, v in enumerate(kept)]
        merged += [self._merge(a, ok, self.env[v.id], reps[1 + len(kept) + k])
                   for k, (v, a) in enumerate(zip(loop.operands, before.args))]
        incoming.append(([r for _, r in self.to_phis(state, merged)]
                         + [more2, nxt2, hi2, alive2, "1"], b.block))
        b.br("head")
        for k, (hole, t) in enumerate(zip(holes, types)):
            b.fill_phi(hole, t, (first[k], entry), *[(refs[k], blk) for refs, blk in incoming])
        # a slot that fails leaves the kernel (``fail_if`` goes to the latch); the host
        # then asks the phase's lockstep twin which error comes first (phases.py)
        b.start("latch")
        b.br("exit")
        return self.finish(params, ("; hydra: persistent lanes",))

    def _merge(self, v: Value, ok, new, old):
        if not v.varying:
            return new
        return arith.Lanes(self.b, True).sel(ok, new, old, v.type)

    def _fill(self, ctr: str, free, more: str, nxt: str, hi: str):
        """Give the free slots (bits of the i64 ``free``) the next lanes, in slot order,
        grabbing chunks until every slot has one or none is left: (lane ids, the
        refilled slots' bits, next, end, more)."""
        b, geo = self.b, self.geo
        w = geo.width(I64)
        nparts = geo.lanes // w
        idx0 = b.parts(self.idx, I64, w)
        pre = b.block
        loop, grab, got, out = b.label("fill"), b.label("grab"), b.label("got"), b.label("out")
        b.br(loop)
        b.start(loop)
        holes = [b.hole(h) for h in ["ix"] * nparts + ["ok", "free", "nx", "hi"]]
        *idx_in, ok_in, f_in, nx_in, hi_in = [name for name, _ in holes]
        fs, nv, hv = (b.splat(x, "i64", w) for x in (f_in, nx_in, hi_in))
        b.declare(f"declare <{w} x i64> @llvm.ctpop.v{w}i64(<{w} x i64>)")
        idx_out, takes = [], []
        for k in range(nparts):
            below = ", ".join(f"i64 {(1 << (k * w + i)) - 1}" for i in range(w))
            # slot s takes next + (free slots below s), if that lane is in the chunk
            pc = b.emit(f"call <{w} x i64> @llvm.ctpop.v{w}i64(<{w} x i64> "
                        f"{b.emit(f'and <{w} x i64> {fs}, <{below}>')})")
            pos = b.emit(f"add <{w} x i64> {nv}, {pc}")
            take = b.emit(f"and <{w} x i1> {self._bitmask(fs, k)}, "
                          f"{b.emit(f'icmp slt <{w} x i64> {pos}, {hv}')}")
            takes.append(take)
            idx_out.append(b.emit(f"select <{w} x i1> {take}, <{w} x i64> {pos}, "
                                  f"<{w} x i64> {idx_in[k]}"))
        tbits = b.bits(Var(takes, w))
        ok_out = b.emit(f"or i64 {ok_in}, {tbits}")
        f_out = b.emit(f"and i64 {f_in}, {b.emit(f'xor i64 {tbits}, -1')}")
        b.declare("declare i64 @llvm.ctpop.i64(i64)")
        nx_out = b.emit(f"add i64 {nx_in}, {b.emit(f'call i64 @llvm.ctpop.i64(i64 {tbits})')}")
        b.cbr(b.emit(f"and i1 {b.emit(f'icmp ne i64 {f_out}, 0')}, {more}"), grab, out)
        b.start(grab)
        self.poll_gang(got)  # Ctrl-C between chunks, as between lockstep gangs
        b.start(got)
        c = b.emit(f"atomicrmw add ptr {ctr}, i64 1 monotonic")
        g0 = b.emit(f"mul i64 {c}, %chunk")
        some = b.emit(f"icmp slt i64 {g0}, %ngangs")
        g1 = b.emit(f"add i64 {g0}, %chunk")
        g1 = b.emit(f"select i1 {b.emit(f'icmp slt i64 {g1}, %ngangs')}, i64 {g1}, "
                    f"i64 %ngangs")
        lo = b.emit(f"mul i64 {g0}, {self.gang}")
        end = b.emit(f"mul i64 {g1}, {self.gang}")
        end = b.emit(f"select i1 {b.emit(f'icmp slt i64 {end}, %n')}, i64 {end}, i64 %n")
        b.cbr(some, loop, out)
        arms = [*zip(idx0, idx_out), ("0", ok_out), (free, f_out), (nxt, lo), (hi, end)]
        for k, (hole, (a, z)) in enumerate(zip(holes, arms)):
            b.fill_phi(hole, f"<{w} x i64>" if k < nparts else "i64", (a, pre), (z, got))
        b.start(out)
        more_out = b.emit(f"phi i1 [{more}, %{loop}], [false, %{got}]")
        return Var(idx_out, w), ok_out, nx_out, hi_in, more_out

    def _mask_of(self, bits: str) -> Var:
        """The gang mask whose bit i (of the i64 ``bits``) is slot i."""
        b, g = self.b, self.geo.lanes
        narrow = bits if g == 64 else b.emit(f"trunc i64 {bits} to i{g}")
        whole = Var([b.emit(f"bitcast i{g} {narrow} to <{g} x i1>")], g)
        w = self.geo.mask_width
        return Var(b.parts(whole, BOOL, w), w)

    def _bits(self, mask) -> str:
        """The gang mask as an i64, bit i = slot i (one <G x i1> bitcast: k-register
        unpacks on AVX-512, not a shift and an or per part)."""
        b, g = self.b, self.geo.lanes
        whole = b.parts(mask, BOOL, g)[0]
        bits = b.emit(f"bitcast <{g} x i1> {whole} to i{g}")
        return bits if g == 64 else b.emit(f"zext i{g} {bits} to i64")

    def _bitmask(self, bits: str, k: int) -> str:
        """Part k of a gang mask from its bits (splat in ``bits``, <w x i64>)."""
        b, w = self.b, self.geo.width(I64)
        one = ", ".join(f"i64 {1 << (k * w + i)}" for i in range(w))
        return b.emit(f"icmp ne <{w} x i64> {b.emit(f'and <{w} x i64> {bits}, <{one}>')}, "
                      f"zeroinitializer")


#: the generator classes, lockstep and persistent (``bench.lanes`` swaps in counting ones)
CLASSES = (KernelGen, PersistentGen)


def generate(name: str, geo, options: dict, constants: dict, ops: list[Op],
             inputs: list[Value], outputs: list[Value], one_gang: bool,
             persistent_ok: bool = True):
    """(the generator, the LLVM text) of a phase: persistent lanes where the phase is
    eligible (module docstring), else ``codegen``'s lockstep gangs (always, for a
    persistent phase's twin: not ``persistent_ok``)."""
    lockstep, persistent = CLASSES
    if not persistent_ok:
        why = "the lockstep twin of a persistent phase, for its errors"
    elif os.environ.get("HYDRA_CPU_PERSISTENT", "1") == "0":
        why = "HYDRA_CPU_PERSISTENT=0"
    else:
        why = plan(ops, inputs, outputs, one_gang)
    if not isinstance(why, str):
        gen = persistent(name, geo, options, constants)
        try:
            text = gen.generate_persistent(why)
        except Unsupported:
            text = None
        if text is not None and (not gen.sites or not any(
                o.written_array is not None for op in ops for o in nested(op))):
            return gen, text
        why = "error sites and stores" if text else "unsupported"
    gen = lockstep(name, geo, options, constants)
    gen.why_lockstep = why
    text = gen.generate(ops, inputs, outputs)
    return gen, f"; hydra: lockstep gangs ({why})\n" + text
