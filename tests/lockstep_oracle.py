"""A second, independent reference for programs that are not lane-local: an interpreter
of the Python AST that runs all lanes in lockstep with masks (SPEC section 4).

It shares nothing with hydra but the user-facing intrinsic names: every value is a list
of per-lane Python/NumPy values (``None`` on inactive lanes) computed with Python's own
operators, so lane-local arithmetic is exactly what plain Python does; ``if`` runs its
arms one after the other on the lanes that take them, loops run while any lane is in
them, ``break``/``continue``/``return`` switch lanes off, and the cross-lane intrinsics
see the lanes that are active at that point.  Helper functions are interpreted the
same way.  It covers the subset the random programs use, not all of hydra's.
"""

from __future__ import annotations

import ast
import inspect
import operator
import textwrap

import numpy as np

_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
        ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
        ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor}
_CMP = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
        ast.Eq: operator.eq, ast.NotEq: operator.ne}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert,
          ast.Not: operator.not_}


def _plain(v):
    """A lane's value as hydra prints it: int64, float64 and bool as Python objects
    (``python_scalar`` of the numpy backend), other NumPy types as they are."""
    if isinstance(v, tuple):
        return tuple(_plain(e) for e in v)
    if isinstance(v, (np.int64, np.float64, np.bool_)):
        return v.item()
    return v


class _Frame:
    def __init__(self, fn, lanes: int) -> None:
        self.fn = fn
        self.env: dict[str, list] = {}
        self.returned = [False] * lanes
        self.retval: list = [None] * lanes


class _Loop:
    def __init__(self, lanes: int) -> None:
        self.brk = [False] * lanes
        self.cont = [False] * lanes


def _ast_of(fn) -> ast.FunctionDef:
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))


class Lockstep:
    """``Lockstep(lanes).call(fn, per_lane_args)`` -> per-lane results."""

    def __init__(self, lanes: int) -> None:
        self.n = lanes

    # --- functions and statements --------------------------------------------------

    def call(self, fn, args: list[list], mask: list[bool] | None = None) -> list:
        mask = mask or [True] * self.n
        node = _ast_of(fn)
        frame = _Frame(fn, self.n)
        for a, values in zip(node.args.args, args):
            frame.env[a.arg] = values
        self.block(node.body, mask, frame, None)
        return frame.retval

    def active(self, mask, frame: _Frame, loop: _Loop | None) -> list[bool]:
        return [m and not frame.returned[i] and not (loop and (loop.brk[i] or loop.cont[i]))
                for i, m in enumerate(mask)]

    def block(self, stmts, mask, frame: _Frame, loop: _Loop | None) -> None:
        for st in stmts:
            m = self.active(mask, frame, loop)
            if not any(m):
                return
            self.stmt(st, m, frame, loop)

    def stmt(self, st, m, frame: _Frame, loop) -> None:
        if isinstance(st, ast.Assign):
            value = self.expr(st.value, m, frame)
            for target in st.targets:
                self.store(target, value, m, frame)
        elif isinstance(st, ast.AugAssign):
            load = ast.Name(st.target.id, ast.Load()) if isinstance(st.target, ast.Name) else \
                ast.Subscript(st.target.value, st.target.slice, ast.Load())
            old = self.expr(load, m, frame)
            rhs = self.expr(st.value, m, frame)
            op = _BIN[type(st.op)]
            self.store(st.target, self.lanewise(m, op, old, rhs), m, frame)
        elif isinstance(st, ast.If):
            c = self.truth(self.expr(st.test, m, frame), m)
            self.block(st.body, [a and b for a, b in zip(m, c)], frame, loop)
            self.block(st.orelse, [a and not b for a, b in zip(m, c)], frame, loop)
        elif isinstance(st, ast.While):
            self.loop(st, m, frame)
        elif isinstance(st, ast.For):
            self.for_range(st, m, frame)
        elif isinstance(st, (ast.Break, ast.Continue)):
            flags = loop.brk if isinstance(st, ast.Break) else loop.cont
            for i in range(self.n):
                flags[i] = flags[i] or m[i]
        elif isinstance(st, ast.Return):
            value = self.expr(st.value, m, frame) if st.value else [None] * self.n
            for i in range(self.n):
                if m[i]:
                    frame.returned[i] = True
                    frame.retval[i] = value[i]
        elif isinstance(st, ast.Expr):
            self.expr(st.value, m, frame)
        elif not isinstance(st, ast.Pass):
            raise NotImplementedError(f"lockstep oracle: {type(st).__name__}")

    def loop(self, st: ast.While, m, frame: _Frame) -> None:
        loop = _Loop(self.n)
        alive = list(m)
        while True:
            loop.cont = [False] * self.n
            live = self.active(alive, frame, loop)
            c = self.truth(self.expr(st.test, live, frame), live)
            alive = [a and b for a, b in zip(live, c)]
            if not any(alive):
                return
            self.block(st.body, alive, frame, loop)

    def for_range(self, st: ast.For, m, frame: _Frame) -> None:
        bounds = [self.expr(a, m, frame) for a in st.iter.args]
        ranges = [range(*(b[i] for b in bounds)) if m[i] else range(0) for i in range(self.n)]
        loop = _Loop(self.n)
        alive = list(m)
        k = 0
        while True:
            loop.cont = [False] * self.n
            alive = [a and k < len(r) for a, r in zip(self.active(alive, frame, loop), ranges)]
            if not any(alive):
                return
            self.store(st.target, [r[k] if a else None for a, r in zip(alive, ranges)], alive,
                       frame)
            self.block(st.body, alive, frame, loop)
            k += 1

    def store(self, target, value: list, m, frame: _Frame) -> None:
        if isinstance(target, ast.Name):
            old = frame.env.get(target.id, [None] * self.n)
            frame.env[target.id] = [v if a else o for a, v, o in zip(m, value, old)]
        elif isinstance(target, ast.Tuple):
            for k, t in enumerate(target.elts):
                self.store(t, [v[k] if a else None for a, v in zip(m, value)], m, frame)
        elif isinstance(target, ast.Subscript):
            arrays = self.expr(target.value, m, frame)
            index = self.expr(target.slice, m, frame)
            for i in range(self.n):  # lane order: the last lane's write lands
                if m[i]:
                    arrays[i][index[i]] = value[i]
        else:
            raise NotImplementedError(f"lockstep oracle: store to {type(target).__name__}")

    # --- expressions ---------------------------------------------------------------

    def lanewise(self, m, fn, *args: list) -> list:
        return [fn(*(a[i] for a in args)) if m[i] else None for i in range(self.n)]

    def truth(self, values: list, m) -> list[bool]:
        return [bool(v) if a else False for a, v in zip(m, values)]

    def expr(self, node, m, frame: _Frame) -> list:
        n = self.n
        if not any(m):  # e.g. an arm of ``a if c else b`` that no lane takes
            return [None] * n
        if isinstance(node, ast.Constant):
            return [node.value] * n
        if isinstance(node, ast.Name):
            if node.id in frame.env:
                return frame.env[node.id]
            return [self.resolve(frame.fn, node.id)] * n
        if isinstance(node, ast.BinOp):
            a, b = self.expr(node.left, m, frame), self.expr(node.right, m, frame)
            return self.lanewise(m, _BIN[type(node.op)], a, b)
        if isinstance(node, ast.UnaryOp):
            return self.lanewise(m, _UNARY[type(node.op)], self.expr(node.operand, m, frame))
        if isinstance(node, ast.Compare):
            return self.compare(node, m, frame)
        if isinstance(node, ast.BoolOp):
            return self.boolop(node, m, frame)
        if isinstance(node, ast.IfExp):
            c = self.truth(self.expr(node.test, m, frame), m)
            yes = self.expr(node.body, [a and b for a, b in zip(m, c)], frame)
            no = self.expr(node.orelse, [a and not b for a, b in zip(m, c)], frame)
            return [y if b else x for b, y, x in zip(c, yes, no)]
        if isinstance(node, ast.Tuple):
            parts = [self.expr(e, m, frame) for e in node.elts]
            return [tuple(p[i] for p in parts) if m[i] else None for i in range(n)]
        if isinstance(node, ast.Subscript):
            return self.lanewise(m, operator.getitem, self.expr(node.value, m, frame),
                                 self.expr(node.slice, m, frame))
        if isinstance(node, ast.Attribute):
            values = self.expr(node.value, m, frame)
            return self.lanewise(m, lambda v: getattr(v, node.attr), values)
        if isinstance(node, ast.JoinedStr):
            return self.fstring(node, m, frame)
        if isinstance(node, ast.Call):
            return self.call_expr(node, m, frame)
        raise NotImplementedError(f"lockstep oracle: {type(node).__name__}")

    def compare(self, node: ast.Compare, m, frame) -> list:
        left = self.expr(node.left, m, frame)
        result = [True if a else None for a in m]
        live = list(m)
        for op, right_node in zip(node.ops, node.comparators):
            right = self.expr(right_node, live, frame)  # only lanes still true evaluate it
            for i in range(self.n):
                if live[i]:
                    result[i] = _CMP[type(op)](left[i], right[i])
                    live[i] = bool(result[i])
            left = right
        return result

    def boolop(self, node: ast.BoolOp, m, frame) -> list:
        is_and = isinstance(node.op, ast.And)
        result = [None] * self.n
        live = list(m)
        for k, value_node in enumerate(node.values):
            values = self.expr(value_node, live, frame)
            last = k == len(node.values) - 1
            for i in range(self.n):
                if live[i]:
                    if last or bool(values[i]) != is_and:
                        result[i] = values[i]
                        live[i] = False
        return result

    def fstring(self, node: ast.JoinedStr, m, frame) -> list:
        pieces = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                pieces.append([part.value] * self.n)
                continue
            values = self.expr(part.value, m, frame)
            conv = {-1: None, 115: str, 114: repr, 97: ascii}[part.conversion]
            spec = self.fstring(part.format_spec, m, frame) if part.format_spec else [""] * self.n
            pieces.append(self.lanewise(
                m, lambda v, s: format(conv(_plain(v)) if conv else _plain(v), s), values, spec))
        return self.lanewise(m, lambda *p: "".join(p), *pieces)

    def call_expr(self, node: ast.Call, m, frame: _Frame) -> list:
        fn = self.expr(node.func, m, frame)
        fn = next(f for f, a in zip(fn, m) if a)
        args = [self.expr(a, m, frame) for a in node.args]
        kwargs = {k.arg: self.expr(k.value, m, frame) for k in node.keywords}
        which = getattr(fn, "__hydra_intrinsic__", None)
        if which is not None:
            return self.intrinsic(which, args, m)
        if fn is print:
            for i in range(self.n):
                if m[i]:
                    print(*(_plain(a[i]) for a in args), **{k: v[i] for k, v in kwargs.items()})
            return [None] * self.n
        if inspect.isfunction(fn) and fn.__module__ not in ("numpy", "math"):
            node_args = [a.arg for a in _ast_of(fn).args.args]
            ordered = [args[k] if k < len(args) else kwargs[p] for k, p in enumerate(node_args)]
            return self.call(fn, ordered, list(m))
        return [fn(*(a[i] for a in args), **{k: v[i] for k, v in kwargs.items()}) if m[i]
                else None for i in range(self.n)]

    def intrinsic(self, name: str, args: list[list], m) -> list:
        n = self.n
        act = [i for i in range(n) if m[i]]
        if name == "lane":
            return list(range(n))
        if name == "nlanes":
            return [n] * n
        x = args[0] if args else None
        if name in ("lanesum", "laneprod", "lanemin", "lanemax", "laneany", "laneall"):
            vals = [x[i] for i in act]
            if name in ("laneany", "laneall"):
                r = (any if name == "laneany" else all)(bool(v) for v in vals)
            elif all(type(v) is int for v in vals):  # Python ints stay weak
                r = {"lanesum": sum, "lanemin": min, "lanemax": max,
                     "laneprod": lambda vs: int(np.prod(vs, dtype=np.int64))}[name](vals)
            else:
                arr = np.array(vals)
                ufunc = {"lanesum": np.add, "laneprod": np.multiply, "lanemin": np.minimum,
                         "lanemax": np.maximum}[name]
                # hydra's rule: a sum or product keeps the lanes' type (int32 stays
                # int32, as in CUDA and JAX; np.sum would widen it), bools count as int64
                keep = np.int64 if arr.dtype == np.bool_ else arr.dtype
                r = ufunc.reduce(arr, dtype=keep if name in ("lanesum", "laneprod") else None)
            return [r] * n
        if name == "prefixsum":
            out, total = [None] * n, x[act[0]] * 0  # a zero of the lanes' type
            for i in act:
                out[i] = total
                total = total + x[i]
            return out
        if name == "broadcast":
            return [x[args[1][act[0]]]] * n
        if name == "shuffle":
            return [x[args[1][i]] if m[i] else None for i in range(n)]
        if name == "rotate":
            return [x[(i + args[1][i]) % n] if m[i] else None for i in range(n)]
        raise NotImplementedError(f"lockstep oracle: intrinsic {name}")

    @staticmethod
    def resolve(fn, name: str):
        code = fn.__code__
        if fn.__closure__ and name in code.co_freevars:
            return fn.__closure__[code.co_freevars.index(name)].cell_contents
        if name in fn.__globals__:
            return fn.__globals__[name]
        import builtins
        return getattr(builtins, name)


def run_lockstep(fn, args, lanes: int, varying) -> list:
    """Per-lane results of ``fn`` run in lockstep on ``lanes`` lanes (prints go to
    ``sys.stdout`` in lockstep order)."""
    params = list(fn.__code__.co_varnames[: fn.__code__.co_argcount])
    per_lane = [[a[i] if p in varying else a for i in range(lanes)]
                for p, a in zip(params, args)]
    with np.errstate(all="ignore"):
        return Lockstep(lanes).call(fn, per_lane)
