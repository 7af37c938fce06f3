"""Native lowering of ``count`` (``hydra.passes.instrument``, for ``hydra.profile``).

Takes: a ``count`` op in a phase (its mask: the lanes of the gang that run its region).
Guarantees: per site, the gang's active lanes (a popcount of the mask) and one issue are
added to two accumulators of the kernel function (allocas in its entry block, which
LLVM keeps in registers across the gang loop); at the function's exit each thread adds
its totals to the site's row of the counters with atomic adds: (lane steps, issues,
issues * the gang width).  So a count costs a popcount and two adds per region run, and
the threads of one phase never lose an update.  (Adding the mask lane by lane into a
vector of per-slot counts, a masked add per part, measured 3-11x slower on mandelbrot:
the loop's vectors then spill; the popcount's scalar adds cost about nothing there.)
``finish`` puts the accumulators' allocas and the flush into the kernel's text
(``phases`` calls it for every phase).
"""

from __future__ import annotations

from .vectors import Uni, Var


class Counts:
    """The ``op_count`` rule of ``KernelGen`` (a mixin: ``codegen`` stays as it is)."""

    def op_count(self, op) -> list:
        b = self.b
        site = op.attrs["site"]
        sites = self.__dict__.setdefault("count_sites", {})
        sites[site] = self.env[op.operands[0].id].data
        mask = self.env[op.mask.id] if op.mask is not None else Uni("true")
        if isinstance(mask, Uni):  # a uniform mask: the gang's lanes below n, or none
            n = b.emit(f"select i1 {mask.ref}, i64 {self._popcount(self.tail)}, i64 0")
        else:
            n = self._popcount(mask)
        for acc, add in ((f"%hp.l{site}", n), (f"%hp.i{site}", "1")):
            old = b.emit(f"load i64, ptr {acc}")
            b.do(f"store i64 {b.emit(f'add i64 {old}, {add}')}, ptr {acc}")
        return []

    def _popcount(self, mask: Var) -> str:
        b = self.b
        total = None
        for p in mask.parts:
            bits = b.emit(f"bitcast <{mask.w} x i1> {p} to i{mask.w}")
            b.declare(f"declare i{mask.w} @llvm.ctpop.i{mask.w}(i{mask.w})")
            c = b.emit(f"call i{mask.w} @llvm.ctpop.i{mask.w}(i{mask.w} {bits})")
            if mask.w < 64:
                c = b.emit(f"zext i{mask.w} {c} to i64")
            total = c if total is None else b.emit(f"add i64 {total}, {c}")
        return total


def finish(gen, text: str) -> str:
    """The kernel text with the count accumulators made in its entry block and added
    into the counters at its exit (unchanged for a kernel with no ``count``)."""
    sites = getattr(gen, "count_sites", None)
    if not sites:
        return text
    init, flush = [], []
    for site, ptr in sorted(sites.items()):
        for name in (f"%hp.l{site}", f"%hp.i{site}"):
            init += [f"  {name} = alloca i64", f"  store i64 0, ptr {name}"]
        lanes, issues = f"%hp.L{site}", f"%hp.I{site}"
        flush += [f"  {lanes} = load i64, ptr %hp.l{site}",
                  f"  {issues} = load i64, ptr %hp.i{site}",
                  f"  %hp.S{site} = mul i64 {issues}, {gen.geo.lanes}"]
        for col, value in enumerate((lanes, issues, f"%hp.S{site}")):
            flush += [f"  %hp.p{site}.{col} = getelementptr i64, ptr {ptr}, i64 "
                      f"{3 * site + col}",
                      f"  %hp.a{site}.{col} = atomicrmw add ptr %hp.p{site}.{col}, "
                      f"i64 {value} monotonic"]
    head, entry, rest = text.partition("\nentry:\n")
    text = head + entry + "\n".join(init) + "\n" + rest
    head, exit_, rest = text.partition("\nexit:\n  ret void")
    if not exit_:
        raise AssertionError("a kernel without its exit block")
    return head + "\nexit:\n" + "\n".join(flush) + "\n  ret void" + rest
