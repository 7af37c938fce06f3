"""Where a phase kernel stops early: run-time errors in lockstep order, and Ctrl-C.

Takes: the code generator (``codegen.KernelGen`` mixes this in).  Guarantees:

- **Deterministic errors.**  Gangs run a phase independently, so "the first gang to
  fail" depends on the threads.  Instead every error is recorded with its *lockstep
  time*: the path of the failing op from the phase's top, as (preorder index of each
  enclosing ``while``, that loop's iteration count, ..., preorder index of the op), then
  the lane.  Lexicographic order of these keys is lockstep order (a loop's iteration
  k runs before its k+1; preorder puts a ``before`` region before the body), and a gang
  meets its own lanes' events in that order, so the smallest key over all gangs is the
  reference's error: the first failing statement, its lowest lane.  ``hydra_err`` keeps
  the smallest key under a spin lock (errors are rare; the lock is never taken on the
  fast path).  A gang that fails leaves; the other gangs go on (a later gang may fail
  earlier in lockstep time) until their clock passes the recorded key, which each loop
  checks at its back edge, so a lane that would loop forever after the failure stops as
  the reference does.  Loops nested deeper than ``MAX_DEPTH`` are not counted (the
  key stays deterministic, only coarser).
- **Ctrl-C.**  Each gang and each loop back edge reads a stop word that the SIGINT
  handler of ``interrupt`` sets (its address is in the error buffer); the kernel then
  sets the *interrupted* word and leaves.  Both checks share one load-or-branch on
  the fast path: the stop word or'ed with the error flag.

The error buffer (int64 words, ``ERR_WORDS``; made by ``error_buffer``):
0 an error is recorded, 1 kind, 2 lane, 3 site, 4-6 values for the message,
7 the gang counter of the dynamic schedule, 8 the lock, 9 the stop word's address,
10 interrupted, ``KEY`` on: the recorded error's key.
"""

from __future__ import annotations

import numpy as np

from ...ir.core import Op
from ..cut import nested

LOCK, STOP, INTERRUPTED, KEY = 8, 9, 10, 11
ERR_WORDS = 64
MAX_DEPTH = (ERR_WORDS - KEY - 2) // 2


_EMPTY: list[np.ndarray] = []


def error_buffer() -> np.ndarray:
    """A fresh error buffer for one run of a phase kernel."""
    if not _EMPTY:
        from .interrupt import stop_address  # late: ctypes only when running
        _EMPTY.append(np.zeros(ERR_WORDS, np.int64))
        _EMPTY[0][STOP] = stop_address()
    return _EMPTY[0].copy()


def loop_depth(ops: list[Op]) -> int:
    """How deeply ``while`` ops nest in ``ops``."""
    return max((int(op.opcode == "while") + max((loop_depth(r.ops) for r in op.regions),
                                                default=0) for op in ops), default=0)


class Stops:
    """Mixin of ``codegen.KernelGen``: the lockstep clock, error records and polls."""

    #: where an uncounted loop's back edge goes once any gang has failed (None: on)
    uncounted_error: str | None = None

    def start_clock(self, ops: list[Op]) -> None:
        """Number the phase's ops in preorder; size the key; make the clock slot."""
        self.order = {id(o): k for k, o in enumerate(o for op in ops for o in nested(op))}
        depth = loop_depth(ops)
        self.has_loops = depth > 0
        self.keylen = 2 * min(depth, MAX_DEPTH) + 2
        #: (preorder index, iteration counter) of each enclosing counted loop
        self.loops: list[tuple[int, str]] = []
        #: lines of the back edges' loads of the error flag (``drop_error_polls``)
        self.error_polls: list[int] = []
        b = self.b
        self.clock = b.emit(f"alloca [{self.keylen} x i64], align 8", "clock")
        slot = b.emit(f"getelementptr i64, ptr %err, i64 {STOP}")
        self.stop_word = b.emit(f"load ptr, ptr {slot}", "stopw")

    def set_clock(self, last: list[str], lane: str) -> None:
        """Write the clock: the enclosing loops, then ``last``, padded, then ``lane``."""
        words = [w for idx, k in self.loops for w in (str(idx), k)] + last
        words += ["-1"] * (self.keylen - 1 - len(words)) + [lane]
        for i, w in enumerate(words):
            p = self.b.emit(f"getelementptr i64, ptr {self.clock}, i64 {i}")
            self.b.do(f"store i64 {w}, ptr {p}")

    def record_error(self, op: Op, kind: int, lane: str, site: int, values: list[str]) -> None:
        """Record this error if it is the earliest so far (see the module docstring)."""
        self.set_clock([str(self.order[id(op)])], lane)
        args = ", ".join(f"i64 {v}" for v in [kind, lane, site, *values])
        self.b.do(f"call void @hydra_err(ptr %err, {args}, ptr {self.clock}, "
                  f"i64 {self.keylen})")

    def poll_gang(self, go: str) -> None:
        """Before a gang: leave the kernel if Ctrl-C was pressed."""
        b = self.b
        s = b.emit(f"load atomic volatile i64, ptr {self.stop_word} monotonic, align 8")
        b.cbr(b.emit(f"icmp eq i64 {s}, 0"), go, "stopped")

    def poll_back_edge(self, loop: tuple[int, str] | None, next_k: str) -> None:
        """At a loop's back edge: stop on Ctrl-C; leave the gang once its clock (the
        next iteration's start) is past a recorded error."""
        b = self.b
        s = b.emit(f"load atomic volatile i64, ptr {self.stop_word} monotonic, align 8")
        self.error_polls.append(len(b.lines))
        e = b.emit("load atomic i64, ptr %err monotonic, align 8")
        either = b.emit(f"or i64 {s}, {e}")
        cold, on = b.label("poll"), b.label("on")
        b.cbr(b.emit(f"icmp ne i64 {either}, 0"), cold, on)
        b.start(cold)
        if loop is None:  # not counted: only Ctrl-C stops it here (persistent lanes: any
            # gang's error too, and the twin runs the phase again)
            b.cbr(b.emit(f"icmp ne i64 {s}, 0"), "stopped", self.uncounted_error or on)
        else:
            past = b.label("past")
            b.cbr(b.emit(f"icmp ne i64 {s}, 0"), "stopped", past)
            b.start(past)
            self.set_clock([str(loop[0]), next_k], "-1")
            gone = b.emit(f"call i1 @hydra_past(ptr %err, ptr {self.clock}, "
                          f"i64 {self.keylen})")
            b.cbr(gone, "latch", on)
        b.start(on)

    def drop_error_polls(self) -> None:
        """A phase with no error site records no error, so its loops need not watch for
        one: their loads of the error flag become 0 and LLVM folds the checks away,
        leaving only the stop word in the loop (collatz: 10% faster)."""
        if not self.sites:
            for at in self.error_polls:
                name = self.b.lines[at].split("=")[0].strip()
                self.b.lines[at] = f"  {name} = add i64 0, 0"

    def stopped_block(self) -> None:
        """The kernel's exit on Ctrl-C: say so in the error buffer."""
        b = self.b
        b.start("stopped")
        p = b.emit(f"getelementptr i64, ptr %err, i64 {INTERRUPTED}")
        b.do(f"store atomic i64 1, ptr {p} monotonic, align 8")
        b.br("exit")

    def finish(self, params: list[str], head: tuple[str, ...] = ()) -> str:
        """The kernel's LLVM text, its body closed (the stopped block, the exit) and its
        signature: the driver's four parameters, then ``params``."""
        b = self.b
        self.stopped_block()
        self.drop_error_polls()
        b.start("exit")
        b.do("ret void")
        sig = ", ".join(["i64 %chunk", "i64 %ngangs", "i64 %n", "ptr %err"] + params)
        text = [*head, f"define void @{self.name}({sig}) {{", *b.lines, "}", HELPERS,
                *sorted(b.decls)]
        return "\n".join(text) + "\n"


#: the helpers the kernels call; all cold (an error, or a check after one)
HELPERS = f"""
define internal i1 @hydra_key_lt(ptr %a, ptr %b, i64 %n) noinline cold {{
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %eq]
  %end = icmp eq i64 %i, %n
  br i1 %end, label %no, label %cmp
cmp:
  %pa = getelementptr i64, ptr %a, i64 %i
  %pb = getelementptr i64, ptr %b, i64 %i
  %x = load i64, ptr %pa
  %y = load i64, ptr %pb
  %lt = icmp slt i64 %x, %y
  br i1 %lt, label %yes, label %ge
ge:
  %gt = icmp sgt i64 %x, %y
  %i1 = add i64 %i, 1
  br i1 %gt, label %no, label %eq
eq:
  br label %loop
yes:
  ret i1 true
no:
  ret i1 false
}}

define internal void @hydra_lock(ptr %err) noinline cold {{
entry:
  %l = getelementptr i64, ptr %err, i64 {LOCK}
  br label %spin
spin:
  %r = cmpxchg ptr %l, i64 0, i64 1 acquire monotonic
  %ok = extractvalue {{ i64, i1 }} %r, 1
  br i1 %ok, label %done, label %spin
done:
  ret void
}}

define internal void @hydra_unlock(ptr %err) noinline cold {{
  %l = getelementptr i64, ptr %err, i64 {LOCK}
  store atomic i64 0, ptr %l release, align 8
  ret void
}}

define internal void @hydra_err(ptr %err, i64 %kind, i64 %lane, i64 %site, i64 %v0,
                                i64 %v1, i64 %v2, ptr %key, i64 %n) noinline cold {{
entry:
  call void @hydra_lock(ptr %err)
  %have = load i64, ptr %err
  %fresh = icmp eq i64 %have, 0
  %kept = getelementptr i64, ptr %err, i64 {KEY}
  br i1 %fresh, label %write, label %cmp
cmp:
  %earlier = call i1 @hydra_key_lt(ptr %key, ptr %kept, i64 %n)
  br i1 %earlier, label %write, label %done
write:
  %bytes = mul i64 %n, 8
  call void @llvm.memcpy.p0.p0.i64(ptr %kept, ptr %key, i64 %bytes, i1 false)
{"".join(f'''  %p{k} = getelementptr i64, ptr %err, i64 {k}
  store i64 %{name}, ptr %p{k}
''' for k, name in enumerate(["kind", "lane", "site", "v0", "v1", "v2"], 1))}\
  store atomic i64 1, ptr %err release, align 8
  br label %done
done:
  call void @hydra_unlock(ptr %err)
  ret void
}}

define internal i1 @hydra_past(ptr %err, ptr %clock, i64 %n) noinline cold {{
  call void @hydra_lock(ptr %err)
  %kept = getelementptr i64, ptr %err, i64 {KEY}
  %r = call i1 @hydra_key_lt(ptr %kept, ptr %clock, i64 %n)
  call void @hydra_unlock(ptr %err)
  ret i1 %r
}}

declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
"""
