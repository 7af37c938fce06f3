"""One CUDA kernel for a lane-local function: the structured IR as per-lane Python.

Takes: the structured IR (``structured()``: varying branches kept) of a function
with no sync point, whose per-lane arrays have constant shapes and whose results
are scalars (``fits`` says so).  Guarantees: ``generate`` returns a ``KernelSource``
whose ``kernel(N, *params, *globals, *outs, err)`` runs lane ``cuda.grid(1)`` for
every lane < N: ``if``/``while`` become Python ``if``/``while`` (the hardware handles
divergence), varying parameters are read at ``[lane]``, uniform ones are used as
they are, per-lane arrays live in ``cuda.local.array``, and each result leaf is
written to its output array (varying: ``out[lane]``; uniform: ``out[0]`` by lane 0,
every lane having computed the same value).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..protocol import PROTOCOLS
from ...ir.core import Function, Op, Region
from ...types import ScalarType
from .emit import ErrorSites, Frame, OpEmitter, ident, name, np_type

PRELUDE = ("import math\n\nimport numpy as np\nfrom numba import cuda\n\n"
           "from hydra.backends.cuda import device as dev\n")


@dataclass
class KernelSource:
    """Generated source of one kernel and what the host needs to launch it."""

    source: str
    entry: str
    sites: ErrorSites
    #: the captured arrays, passed as extra arguments in this order
    globals: list = field(default_factory=list)
    #: hydra.grad's tapes: (tape id, the dtypes of a record), in parameter order after
    #: the globals; each record field is a ``[capacity, N]`` device array
    tapes: list = field(default_factory=list)


def fits(fn: Function, segments: bool = False) -> str | None:
    """Why ``fn`` cannot run as one kernel (with ``segments``: as structured kernels
    between sync points that the host runs, ``segments.py``), or None if it can."""
    constants = {op.result.id for op in fn.walk() if op.opcode == "const"}
    for op in fn.walk():
        # (hydra.grad's trip bound: emit.py)
        own_bound = op.attrs.get("chunk_local") and op.attrs.get("name") == "lanemax"
        if "sync" in op.attrs and not own_bound and not segments:
            return f"sync point: {op.attrs['sync']}"
        if op.opcode == "math" and f"math {op.attrs['fn']}" in PROTOCOLS["cuda"].host_only:
            return PROTOCOLS["cuda"].host_only[f"math {op.attrs['fn']}"]
        if op.opcode == "local_array" and not all(v.id in constants for v in op.operands):
            return "a per-lane array whose size is not a constant"
        if segments and op.opcode in ("tape_push", "tape_pop"):
            return "hydra.grad's tape: the host keeps it between phases"
        if op.opcode == "tape_push" and not all(isinstance(v.type, ScalarType)
                                                for v in op.operands):
            return "a hydra.grad tape record that holds a per-lane array"
    for v in fn.body.terminator.operands:
        if not isinstance(v.type, ScalarType) and not segments:
            return f"a result of type {v.type}"
    return None


class StructuredEmitter(OpEmitter):
    """Adds structured ``if`` and ``while`` to the op emitter."""

    def region(self, region: Region) -> list[str]:
        """Emit the ops of ``region``; the names its terminator hands on."""
        for op in region.ops[:-1]:
            self.emit(op)
        return [name(v) for v in region.terminator.operands]

    def assign(self, targets, sources) -> None:
        for t, s in zip(targets, sources):
            self.line(f"{name(t)} = {s}")

    def op_if(self, op: Op) -> None:
        for header, region in zip((f"if {name(op.operands[0])}:", "else:"), op.regions):
            with self.block(header):
                self.assign(op.results, self.region(region))
                self.line("pass")

    # hydra.grad's tape: each lane's stack of records in columns ``tapeT_J[depth, lane]``
    # of device memory, its depth ``spT`` a local variable (one kernel runs the whole
    # function, so the depth lives in a register).  A push past the capacity flags the
    # error buffer's overflow word and leaves; the host launches again with more.

    def op_tape_push(self, op: Op) -> None:
        t = op.attrs["tape"]
        with self.masked(op):
            self.line(f"if sp{t} >= tape{t}_0.shape[0]:")
            self.line("    cuda.atomic.add(err, (N, 0), 1)")
            self.line("    err[N, 1] = 1")
            self.line("    return")
            for j, v in enumerate(op.operands):
                self.line(f"tape{t}_{j}[sp{t}, lane] = {name(v)}")
            self.line(f"sp{t} += 1")

    def op_tape_pop(self, op: Op) -> None:
        t = op.attrs["tape"]
        self.line(f"sp{t} -= 1")
        for j, r in enumerate(op.results):
            self.line(f"{name(r)} = {np_type(r.type)}(tape{t}_{j}[sp{t}, lane])")

    def op_while(self, op: Op) -> None:
        before, body = op.regions
        # the results start as the initial values: numba then sees them defined on
        # every path out of the loop
        self.assign(op.results, [name(v) for v in op.operands])
        self.assign(before.args, [name(v) for v in op.operands])
        with self.block("while True:"):
            go, *carried = self.region(before)
            with self.block(f"if not {go}:"):
                self.assign(op.results, carried)
                self.line("break")
            self.assign(body.args, carried)
            self.assign(before.args, self.region(body))


def generate(fn: Function, options: dict) -> KernelSource:
    """The kernel source of a function that ``fits``, compiled with ``options``."""
    frame = Frame.of(options)
    em = StructuredEmitter(frame)
    params = [f"p_{p.name or p.id}" for p in fn.params]
    for p, arg in zip(fn.params, params):
        em.take(p, arg)
    captured = [op for op in fn.walk() if op.opcode == "global_array"]
    for op in captured:
        params.append(name(op.result))
        if not op.attrs["array"].flags.writeable:
            frame.readonly.add(op.result.id)
    em.op_global_array = lambda op: None  # captured arrays arrive as parameters
    tapes = {}
    for op in fn.walk():
        if op.opcode == "tape_push" and op.attrs["tape"] not in tapes:
            tapes[op.attrs["tape"]] = [v.type.dtype for v in op.operands]
    for t, dtypes in tapes.items():
        params += [f"tape{t}_{j}" for j in range(len(dtypes))]
        em.line(f"sp{t} = np.int64(0)")
    em.region(fn.body)
    outs = [(f"out{k}", v) for k, v in enumerate(fn.body.terminator.operands)]
    entry = f"kernel_{ident(fn.name)}"
    source = PRELUDE + "\n\n" + em.kernel(entry, params + [o for o, _ in outs], outs)
    return KernelSource(source, entry, frame.sites,
                        [op.attrs["array"] for op in captured], list(tapes.items()))
