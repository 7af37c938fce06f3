"""Joins for the builder: where two paths meet (the arms of an ``if``; a loop's entry and
the end of its body, ``loops.py``), each name's values become one: the phis of Braun et
al.'s SSA construction, over trees of values (tuples, containers).

A value's join key (``shape_of``) is a tree of types for numbers and per-lane array
values, which a phi joins (``leaves_as`` casts each path's leaves to the joined types,
``rebuild`` makes the joined value of the op's results), and the value itself for
argument arrays and compile-time objects, which must be the same on every path (no
phi).  ``pin_same`` keeps a leaf that is one value on both paths out of the phis.
``build_if`` (statements) and ``if_value`` (expressions) emit the structured ``if``.
"""

from __future__ import annotations

from ..errors import CompileError, Loc
from ..ir.core import Op, Region, Value
from ..types import ArrayType, Type, join
from .arrayops import SHAPED, NeedShapes
from .common import Partial
from .containers import Struct, is_node, items_of, like


class JoinMixin:
    """Joins of values and the structured ``if``; mixed into ``Builder``."""

    def shape_of(self, name: str, value, loc: Loc):
        """The join key of a value: a tree of types, or the value itself for arrays and
        compile-time objects (which must then be the same on every path)."""
        if is_node(value):
            return like(value, (self.shape_of(name, v, loc) for v in items_of(value)))
        if isinstance(value, Value):
            if isinstance(value.type, ArrayType) and not self.is_array_ref(value):
                return value.type  # a per-lane array value: joined by a select
            return value if isinstance(value.type, ArrayType) else value.type
        return value

    def join_shapes(self, name: str, a, b, loc_a: Loc, loc_b: Loc):
        if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) or \
                isinstance(a, Struct) and isinstance(b, Struct) and a.same_node(b):
            return like(a, (self.join_shapes(name, x, y, loc_a, loc_b)
                            for x, y in zip(items_of(a), items_of(b))))
        if a is not b:  # an item pinned to its value (pin_same) and another: by type
            a, b = (s.type if isinstance(s, Value) and not (isinstance(s.type, ArrayType)
                                                             and self.is_array_ref(s)) else s
                    for s in (a, b))
        if isinstance(a, Type) != isinstance(b, Type):
            # an argument array on one path, a per-lane array value on another (h = x
            # before a loop that computes h): both join as values
            a, b = (s.type if isinstance(s, Value) and isinstance(s.type, ArrayType)
                    and s.type.shape is not None else s for s in (a, b))
        if isinstance(a, Type) and isinstance(b, Type):
            t = join(a, b)
            if t is not None:
                return t
        elif a is b or a == b:
            return a
        if name == "$expr":  # the two values of ``a and b``, ``a or b``, ``a if c else b``
            raise CompileError(
                f"this expression gives {self.describe_shape(a)} or {self.describe_shape(b)}, "
                f"depending on which operand it yields; hydra needs one type", loc_b,
                hint="give both values one type, e.g. bool(a) and bool(b)")
        shown = name.lstrip("$") if not name.startswith("$retval") else "the return value"
        if not SHAPED.get() and any(isinstance(s, ArrayType) or isinstance(s, Value) and
                                    isinstance(s.type, ArrayType) for s in (a, b)):
            # maybe per-lane array values whose shapes are not known yet: try with shapes
            raise NeedShapes(f"'{shown}' needs array shapes", loc_b)
        if all(isinstance(s, Value) and isinstance(s.type, ArrayType) for s in (a, b)):
            rebound = max(loc_a, loc_b, key=lambda at: at.line)  # the later binding
            raise CompileError(
                f"'{shown}' is {self.describe_shape(a)} on one path and "
                f"{self.describe_shape(b)} on another: a name must refer to one array, "
                f"because hydra binds array names to arrays when it compiles (swapping "
                f"arrays, as in 'h, hn = hn, h' in a loop, is not supported yet)", rebound,
                hint="keep both buffers in one array with a leading axis of 2 and pick the "
                     "current one by the step's parity: buf[i % 2, j] and "
                     "buf[(i + 1) % 2, j]")
        raise CompileError(
            f"'{shown}' is {self.describe_shape(a)} on one path (line {loc_a.line}) and "
            f"{self.describe_shape(b)} on another (line {loc_b.line})", loc_b,
            hint="give the variable one type on every path")

    def pin_same(self, a, b, shape):
        """The join ``shape`` with the leaves that are one value on both paths (a
        container's unchanged items) pinned to that value: no phi for them, so a uniform
        item stays uniform whatever the condition."""
        if is_node(shape) and is_node(a) and is_node(b):
            return like(shape, [self.pin_same(x, y, s) for x, y, s in
                                zip(items_of(a), items_of(b), items_of(shape))])
        if isinstance(shape, Type) and isinstance(a, Value) and a is b:
            return a
        return shape

    def describe_shape(self, s) -> str:
        """A join key for an error message: an argument array by its name."""
        if isinstance(s, Value) and isinstance(s.type, ArrayType):
            return f"the array {s.name or '?'}"
        return f"an {s}" if isinstance(s, ArrayType) else self.describe(s)

    def leaves_as(self, value, shape, loc: Loc) -> list[Value]:
        """The leaves of ``value`` converted to the join ``shape`` (emitting casts)."""
        if is_node(shape):
            return [x for v, s in zip(items_of(value), items_of(shape))
                    for x in self.leaves_as(v, s, loc)]
        if isinstance(shape, Type):
            return [self.coerce(value, shape, loc)]
        return []  # an array or compile-time object: the same on every path, no phi

    def rebuild(self, shape, results):
        """Inverse of leaves_as: the joined value from the op's results."""
        if is_node(shape):
            return like(shape, [self.rebuild(s, results) for s in items_of(shape)])
        if isinstance(shape, Type):
            return next(results)
        return shape

    def joined(self, name: str, shape, results):
        """Variable ``name``'s value after an if or while: rebuilt from the op's
        results, named after it (temporaries, ``$...``, stay unnamed)."""
        taken = [next(results) for _ in self.leaf_types(shape)]
        value = self.rebuild(shape, iter(taken))
        if isinstance(value, Value) and not name.startswith("$"):
            value.name = name
        if name == "$retval":  # the kernel's own, not an inlined helper's ($retval@k)
            self.kernel_return_ids.update(v.id for v in taken)
        return value

    def binding_loc(self, name: str, value, default: Loc) -> Loc:
        """Where ``name`` got ``value``: the assignment that bound an array name (an
        array argument's value was made at the ``def`` line, not where ``a, b = b, a``
        rebinds it), else where the value was computed."""
        if isinstance(value, Value) and isinstance(value.type, ArrayType) \
                and name in self.frame.bound_at:
            return self.frame.bound_at[name]
        return self.value_loc(value, default)

    def value_loc(self, value, default: Loc) -> Loc:
        if isinstance(value, Value):
            return value.loc
        if is_node(value) and items_of(value):
            return self.value_loc(items_of(value)[0], default)
        return default

    def build_if(self, cond: Value, then_fn, else_fn, loc: Loc) -> None:
        """Emit an ``if`` whose arms run ``then_fn``/``else_fn`` against copies of the
        frame's variables, then join the variables that differ (the phis). A condition
        known when the kernel compiles runs only the arm it picks, in place."""
        truth = self.static_truth(cond)
        if truth is not None:
            (then_fn if truth else else_fn)()
            return
        frame = self.frame
        before = (frame.env, frame.partial, frame.bound_at)  # each arm works on copies
        arms, bound = [], {}
        for fn in (then_fn, else_fn):
            region = Region()
            outer, self.region = self.region, region
            frame.env, frame.partial, frame.bound_at = (dict(d) for d in before)
            fn()
            arms.append((region, frame.env, frame.partial))
            bound.update(frame.bound_at)
            self.region = outer
        frame.bound_at = bound
        (r_then, env_then, p_then), (r_else, env_else, p_else) = arms
        joined_env, joined_partial = dict(before[0]), {}
        phis = []  # (name, shape)
        for name in dict.fromkeys([*env_then, *env_else]):
            a, b = env_then.get(name), env_else.get(name)
            if name in p_then or name in p_else:
                joined_partial[name] = p_then.get(name) or p_else.get(name)
            if a is b and name in env_then:
                joined_env[name] = a
                continue
            if name not in env_then or name not in env_else:
                present = a if name in env_then else b
                joined_env[name] = present
                if not name.startswith("$"):
                    joined_partial[name] = Partial(self.value_loc(present, loc), loc)
                if isinstance(present, (Value, tuple, Struct)):
                    phis.append((name, self.shape_of(name, present, loc)))
                continue
            shape = self.join_shapes(name, self.shape_of(name, a, loc), self.shape_of(name, b, loc),
                                     self.binding_loc(name, a, loc), self.binding_loc(name, b, loc))
            phis.append((name, self.pin_same(a, b, shape)))
        yields = [[], []]
        for side, (region, env) in enumerate(((r_then, env_then), (r_else, env_else))):
            outer, self.region = self.region, region
            for name, shape in phis:  # a name bound in one arm only: undefined in the other
                yields[side] += (self.leaves_as(env[name], shape, loc) if name in env
                                 else self.undef_leaves(shape, loc))
            region.ops.append(Op("yield", yields[side], [], loc))
            self.region = outer
        types = [v.type for v in yields[0]]
        op = self.emit_op("if", [cond], types, loc, regions=[r_then, r_else])
        results = iter(op.results)
        for name, shape in phis:
            joined_env[name] = self.joined(name, shape, results)
        frame.env = joined_env
        frame.partial = joined_partial

    def undef_leaves(self, shape, loc: Loc) -> list[Value]:
        return [self.emit("undef", [], t, loc) for t in self.leaf_types(shape)]

    def leaf_types(self, shape) -> list[Type]:
        """The types of the leaves a phi of join ``shape`` has."""
        if is_node(shape):
            return [t for s in items_of(shape) for t in self.leaf_types(s)]
        return [shape] if isinstance(shape, Type) else []

    def if_value(self, cond: Value, then_fn, else_fn, loc: Loc):
        """An ``if`` op that yields the value of then_fn() or else_fn(); each arm runs
        only on the lanes that take it; a condition known when the kernel compiles
        runs only the arm it picks (see static_truth)."""
        truth = self.static_truth(cond)
        if truth is not None:
            return then_fn() if truth else else_fn()
        arms, values = [Region(), Region()], []
        for fn, region in zip((then_fn, else_fn), arms):
            outer, self.region = self.region, region
            values.append(fn())
            self.region = outer
        shape = self.pin_same(*values, self.join_shapes(
            "$expr", self.shape_of("", values[0], loc), self.shape_of("", values[1], loc),
            loc, loc))
        yields = []
        for region, v in zip(arms, values):
            outer, self.region = self.region, region
            yields.append(self.leaves_as(v, shape, loc))
            region.ops.append(Op("yield", yields[-1], [], loc))
            self.region = outer
        op = self.emit_op("if", [cond], [v.type for v in yields[0]], loc, regions=arms)
        return self.rebuild(shape, iter(op.results))
