"""Uniformity (divergence) analysis: mark every value uniform or varying.

Takes: structured SSA from the frontend, the names of the varying parameters.
Guarantees: every value (op results, region arguments, parameters) has
``varying`` set to True or False, the least fixpoint of these rules:

- a varying parameter, ``lane()``, a per-lane array and what is loaded from a
  varying array or at a varying index are varying; constants, captured arrays,
  array shapes and the results of cross-lane reductions are uniform;
- a pure op is varying if an operand is (intrinsics follow their table rule);
- the results of an ``if`` are varying if its condition is, or a yielded value is
  (*sync dependence*: lanes that took different arms hold different values);
- a value ``hydra.grad``'s tape pops is varying if it was pushed varying (its reverse
  sweep runs aligned with the forward loop);
- a loop-carried value is varying if its initial or its yielded value is; the
  results of a ``while`` whose condition is varying are all varying, even those
  that are uniform inside the loop (*temporal divergence*: lanes leave at
  different iterations, so they see different final values).

The rules follow the divergence analysis of Karrenberg & Hack (CGO 2011), and
LLVM's UniformityAnalysis for temporal divergence; on structured IR they reduce
to this fixpoint.  Also rejects, as ``CompileError``, the few things that must be
uniform but are not: the size of ``np.zeros`` and the lane of ``broadcast``.
"""

from __future__ import annotations

from ..errors import CompileError
from ..intrinsics import INTRINSICS
from ..batching import FRESH
from ..ir.core import LANE_ARRAY_FNS, Function, Op, Value, passes_on
from ..views import VIEW_FNS, check_stores, shared_reshapes

_ALWAYS_UNIFORM = {"const", "undef", "global_array", "array_dim", "any"}
_ALWAYS_VARYING = {"local_array", "entry_mask", "tape_pop"}
def analyze_uniformity(fn: Function, varying_params: set[str]) -> Function:
    owners = fn.notes.get("param_owners", {})  # a container's leaves: its parameter
    for p, name in zip(fn.params, fn.param_names):
        p.varying = owners.get(name, name) in varying_params
    for op in fn.walk():
        for v in op.results:
            v.varying = False
        for region in op.regions:
            for a in region.args:
                a.varying = False
    written = _written_temporaries(fn)
    pushes: dict = {}  # tape id -> its pushes (two gradients inlined may share an id)
    for op in fn.walk():
        if op.opcode == "tape_push":
            pushes.setdefault(op.attrs["tape"], []).append(op)
    changed = True
    while changed:  # to the least fixpoint: every op each round (a mark only turns on)
        changed = any([_op(op, written, pushes) for op in fn.walk()])
    _check_uniform_operands(fn)
    check_stores(fn)
    return fn


def _written_temporaries(fn: Function) -> set[int]:
    """Ids of arrays the kernel computes (``W.sum(0)``, ``W * 2``) and then writes into,
    directly, through a view, or through the value an ``if`` or a loop passes on (``t``
    chosen by an ``if``, ``u`` carried by a loop): in the per-example function each lane
    owns such an array, so it is per-lane even when its operands are uniform, as
    ``np.zeros`` is (else one lane's store would land in every lane's array).  A reshape
    NumPy copies (``W.T.reshape(6)`` of a shared ``W``: ``hydra.views``) is such an array; the
    decisions for written reshapes of shared arrays go to ``fn.notes`` for the call-time
    check of the arrays' layouts."""
    may_alias = _AliasSets()
    reshapes = shared_reshapes(fn)
    copies = {vid for vid, (copied, _, _) in reshapes.items() if copied}
    producer, targets = {}, []
    for op in fn.walk():
        for r in op.results:
            producer[r.id] = op
        if op.opcode in ("store", "array_store"):
            targets.append(op.operands[0])
        elif op.opcode == "array" and op.attrs["fn"] in VIEW_FNS and op.result.id not in copies:
            may_alias.join(op.result, op.operands[0])
        elif op.opcode in ("if", "while"):  # (a loop's condition passes its arguments on)
            for to, v, _ in passes_on(op):
                may_alias.join(to, v)
    written = {may_alias.find(v.id) for v in targets}
    _mark_observed_layouts(producer, may_alias, written)
    fn.notes["shared_reshapes"] = [decided for vid, decided in reshapes.items()
                                   if may_alias.find(vid) in written]
    return {vid for vid, op in producer.items()
            if may_alias.find(vid) in written and op.opcode == "array"
            and op.attrs["fn"] not in LANE_ARRAY_FNS
            and (op.attrs["fn"] not in VIEW_FNS or vid in copies)}


def _mark_observed_layouts(producer: dict, may_alias: "_AliasSets", written: set) -> None:
    """Marks ``_numpy_layout`` on the arrays a reshape of a written array is computed
    from (``t = x.T * 2; r = t.reshape(6); r[0] = ...``): whether that reshape is a view,
    so whether the write reaches ``t``, depends on ``t``'s memory layout, which must be
    NumPy's (``x.T * 2`` is Fortran-ordered per example, as ``x.T`` is); a backend that
    lays out its results otherwise (the cpu backend's fused loops) leaves such an op to
    NumPy."""
    for op in producer.values():
        if op.opcode != "array" or op.attrs["fn"] != "reshape" \
                or may_alias.find(op.result.id) not in written:
            continue
        todo = [op.operands[0]]  # and what it is computed from: NumPy's result takes
        while todo:  # its operands' layout (order K), so theirs must be NumPy's too
            p = producer.get(todo.pop().id)
            if p is not None and p.opcode == "array" and not p.attrs.get("_numpy_layout"):
                p.attrs["_numpy_layout"] = True
                todo += [v for v in p.operands if getattr(v.type, "shape", None)]


class _AliasSets:
    """Union-find over value ids: the values that may be the same array object."""

    def __init__(self):
        self.parent: dict[int, int] = {}

    def find(self, vid: int) -> int:
        root = vid
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while vid != root:
            self.parent[vid], vid = root, self.parent[vid]
        return root

    def join(self, a: Value, b: Value) -> None:
        ra, rb = self.find(a.id), self.find(b.id)
        if ra != rb:
            self.parent[ra] = rb


def _mark(v: Value, varying: bool) -> bool:
    if varying and not v.varying:
        v.varying = True
        return True
    return False


def _op(op: Op, written: set[int], pushes: dict) -> bool:
    changed = False
    inputs = any(v.varying for v in op.operands)
    if op.opcode in ("if", "while"):  # what is passed on, and the results where the
        # lanes took different arms or left at different trips (the test is varying)
        test = op.operands[0] if op.opcode == "if" else op.regions[0].terminator.operands[0]
        results = {r.id for r in op.results} if test.varying else set()
        for to, v, _ in passes_on(op):
            changed |= _mark(to, v.varying or to.id in results)
    elif op.opcode == "intrinsic":
        entry = INTRINSICS[op.attrs["name"]]
        if op.results:
            changed |= _mark(op.result, entry.varying([v.varying for v in op.operands]))
    elif op.opcode == "array":
        fn = op.attrs["fn"]
        if fn not in LANE_ARRAY_FNS:
            changed |= _mark(op.result, inputs or fn in FRESH or op.result.id in written)
        elif fn in INTRINSICS:  # shuffle, rotate, prefixsum of arrays: per lane
            changed |= _mark(op.result, INTRINSICS[fn].varying([v.varying for v in op.operands]))
    elif op.opcode in _ALWAYS_UNIFORM:
        pass
    elif op.opcode == "tape_pop" and op.attrs["tape"] in pushes:
        # hydra.grad's reverse runs aligned with its forward loop: a value pushed
        # uniform pops uniform (the lanes active in a reverse trip pushed in that trip)
        same = pushes[op.attrs["tape"]]
        for k, r in enumerate(op.results):
            changed |= _mark(r, any(len(p.operands) <= k or p.operands[k].varying
                                    for p in same))
    elif op.opcode in _ALWAYS_VARYING:
        for r in op.results:
            changed |= _mark(r, True)
    else:
        for r in op.results:
            changed |= _mark(r, inputs)
    return changed


def _check_uniform_operands(fn: Function) -> None:
    for op in fn.walk():
        if op.opcode == "local_array" and any(v.varying for v in op.operands):
            raise CompileError("the size of a per-lane array must be the same on every lane",
                               op.loc, hint="use the largest size every lane needs")
        rule = INTRINSICS[op.attrs["name"]].uniform if op.opcode == "intrinsic" else \
            INTRINSICS[op.attrs["fn"]].uniform if op.opcode == "array" \
            and op.attrs["fn"] in INTRINSICS else None
        if rule is not None and op.operands[rule[0]].varying:
            raise CompileError(rule[1], op.loc, hint=rule[2])
