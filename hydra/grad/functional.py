"""Stores into a lane's own arrays as values, for the gradient transformation.

Takes: a function as the frontend builds it (before uniformity), whose ``store`` and
``array_store`` ops write arrays in place.  Guarantees: each store into an array the
function makes itself (``np.zeros``, a computed array) becomes a functional
``array[setitem]`` op whose result is the array's next version, and every later read
of that array reads its current version: an ``if`` whose arms store yields the
versions (a new result), a loop whose body stores carries them (a new carried value).
So the reverse sweep sees an overwritten element's old value and gives its adjoint to
the store's value alone (``setitem``'s rule zeroes the place, JAX's ``scatter``
transpose).  Stores into arguments and captured arrays are left as they are (the
gradient refuses them); a store into an array that a view (a slice, a reshape, a
transpose) also reaches is a ``CompileError``: the view would not see the new version.
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir.core import Function, Op, Region, Value
from ..views import VIEW_FNS

_STORES = ("store", "array_store")


def functionalize(fn: Function) -> None:
    """Rewrite ``fn``'s stores into its own arrays in place (see the module docstring)."""
    made = {op.result.id: op for op in fn.walk() if len(op.results) == 1}
    made_here = {a.id for op in fn.walk() for r in op.regions for a in r.args}
    roots: dict[int, Value] = {}
    for op in fn.walk():
        if op.opcode in _STORES:
            a = op.operands[0]
            maker = made.get(a.id)
            if a.id in made_here or maker is None or maker.opcode == "global_array":
                continue  # an argument or a captured array: refused by the gradient
            if maker.opcode == "array" and maker.attrs["fn"] in VIEW_FNS:
                raise CompileError("hydra.grad: a store through a view (a slice, a reshape, "
                                   "a transpose) of an array is not differentiable yet",
                                   op.loc)
            roots[a.id] = a
    if not roots:
        return
    for op in fn.walk():
        if op.opcode == "array" and op.attrs["fn"] in VIEW_FNS and op.operands[0].id in roots:
            raise CompileError("hydra.grad: a view (a slice, a reshape, a transpose) of an "
                               "array that the function stores into is not differentiable "
                               "yet", op.loc)
    _Rewrite(roots).region(fn.body, dict(roots))


class _Rewrite:
    def __init__(self, roots: dict[int, Value]) -> None:
        self.roots = roots

    def region(self, region: Region, cur: dict[int, Value]) -> dict[int, Value]:
        """Rewrite ``region`` with ``cur`` (root id -> current version); returns the
        versions at its end."""
        ops = []
        for op in region.ops:
            op.operands = [cur.get(v.id, v) if v.id in self.roots else v
                           for v in op.operands]
            if op.opcode in _STORES and op.operands[0].id in {v.id for v in cur.values()}:
                root = next(r for r, v in cur.items() if v is op.operands[0])
                op = self.setitem(op)
                cur[root] = op.result
            elif op.opcode == "if":
                self.join_if(op, cur)
            elif op.opcode == "while":
                self.carry(op, cur)
            ops.append(op)
        region.ops = ops
        return cur

    @staticmethod
    def setitem(op: Op) -> Op:
        if op.opcode == "store":
            a, *ints, value = op.operands
            index = (("int",),) * len(ints)
        else:
            a, value, *ints = op.operands
            index = op.attrs["params"]["index"]
        return Op("array", [a, value, *ints], [Value(a.type, op.loc, a.name)], op.loc,
                  {"fn": "setitem", "params": {"index": index}})

    def stored_in(self, op: Op) -> list[int]:
        """The roots a store inside ``op``'s regions writes (their current versions)."""
        found = []
        for region in op.regions:
            for o in region.walk():
                if o.opcode in _STORES and o.operands[0].id in self.roots:
                    found.append(o.operands[0].id)
        return list(dict.fromkeys(found))

    def join_if(self, op: Op, cur: dict[int, Value]) -> None:
        written = self.stored_in(op)
        ends = [self.region(r, dict(cur)) for r in op.regions]
        for root in written:
            for region, end in zip(op.regions, ends):
                region.terminator.operands.append(end[root])
            cur[root] = Value(cur[root].type, op.loc, cur[root].name)
            op.results.append(cur[root])

    def carry(self, op: Op, cur: dict[int, Value]) -> None:
        written = self.stored_in(op)
        before, body = op.regions
        inner_before, inner_body = dict(cur), dict(cur)
        for root in written:
            t, name = cur[root].type, cur[root].name
            op.operands.append(cur[root])
            inner_before[root] = Value(t, op.loc, name)
            before.args.append(inner_before[root])
            inner_body[root] = Value(t, op.loc, name)
            body.args.append(inner_body[root])
        end_before = self.region(before, inner_before)
        end_body = self.region(body, inner_body)
        for root in written:
            before.terminator.operands.append(end_before[root])
            body.terminator.operands.append(end_body[root])
            cur[root] = Value(cur[root].type, op.loc, cur[root].name)
            op.results.append(cur[root])
