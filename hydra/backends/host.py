"""The host layer: how each opcode runs over all N lanes at once, with NumPy.  It
defines the semantics.

``HOST_RULES`` is one table ``opcode -> rule(host, op, env) -> results`` and
``run_op(host, op, env)`` its one entry point: the numpy (reference) backend is a loop
over regions calling it (``Host.region``), the cpu backend's host steps and the cuda
backend's host ops call the same function.  Cross-lane intrinsics run here, through
the intrinsics table's ``reference``.

A varying value is a NumPy array with one entry per lane (leading axis N); a
uniform value is a NumPy scalar; a shared array is the caller's own array; a
per-lane array has a leading axis of N.  Ops that may trap check only the active
lanes and raise the error of SPEC section 6 naming the first failing lane; the
other lanes compute with safe operands and their results are never observed.
It is written to be obviously right, not fast.
"""

from __future__ import annotations

import math
import sys
from typing import Callable

import numpy as np

from ..batching import lane_copies
from ..errors import RUNTIME_ERRORS, Loc
from ..intrinsics import INTRINSICS
from ..ir.core import BINARY_OPS, UNARY_OPS, Function, Op, Region
from ..stop import check as check_stop
from ..trees import unflatten
from ..types import ArrayType, ScalarType
from . import tape
from .. import events  # hydra.profile (issue 30)
from .counting import count_rule, timed_op  # hydra.profile (issue 30)
from .hostarrays import array_rule, array_store_rule, select_rule
from .policy import Policy
from .policy import current as current_policy

BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "lshift": np.left_shift, "rshift": np.right_shift, "bitand": np.bitwise_and,
    "bitor": np.bitwise_or, "bitxor": np.bitwise_xor,
}
COMPARE = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
            "eq": np.equal, "ne": np.not_equal}


def _c_semantics(f, pole):
    """``f`` (math.gamma, math.lgamma) with C's values where Python raises: ``pole`` at
    0 and the negative integers, inf where the result overflows (NumPy-style: no
    exception, as for every math function in a kernel)."""
    def g(x):
        try:
            return f(x)
        except ValueError:  # a pole
            return pole(x)
        except OverflowError:
            return math.inf
    return np.frompyfunc(g, 1, 1)


_gamma = _c_semantics(math.gamma, lambda x: math.copysign(math.inf, x) if x == 0 else
                      math.nan)
_lgamma = _c_semantics(math.lgamma, lambda x: math.inf)
_erf = np.frompyfunc(math.erf, 1, 1)
_erfc = np.frompyfunc(math.erfc, 1, 1)
MATH = {
    "sqrt": np.sqrt, "exp": np.exp, "log": np.log, "log2": np.log2, "log10": np.log10,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh,
    "acosh": np.arccosh, "atanh": np.arctanh, "expm1": np.expm1, "log1p": np.log1p,
    "fabs": np.fabs, "exp2": np.exp2, "cbrt": np.cbrt, "atan2": np.arctan2, "hypot": np.hypot,
    "pow": lambda a, b: _power(a, b, None), "copysign": np.copysign, "fmod": np.fmod,
    "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite, "floor": np.floor,
    "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint,
    "erf": lambda x: _erf(np.asarray(x, np.float64)).astype(np.float64),
    "erfc": lambda x: _erfc(np.asarray(x, np.float64)).astype(np.float64),
    "gamma": lambda x: _gamma(np.asarray(x, np.float64)).astype(np.float64),
    "lgamma": lambda x: _lgamma(np.asarray(x, np.float64)).astype(np.float64),
}


def _power(a, b, dtype):
    """``a ** b`` as C's pow computes it for every lane.  NumPy turns a scalar exponent
    of 0.5, 2, -1 ... into sqrt, square, reciprocal (a different rounding than pow), so
    the exponent always goes in as a full array: a uniform exponent then gives the same
    bits as a varying one, and as Python's ``**``."""
    a = np.asarray(a)
    b = np.asarray(b)
    shape = np.broadcast_shapes(a.shape, b.shape, (1,))
    # a real copy: NumPy also takes the shortcut for a stride-0 (broadcast) exponent
    return np.power(a, np.broadcast_to(b, shape).copy(), dtype=dtype)


def float_to_unsigned(x, dtype: np.dtype):
    """float -> uint32/uint64 as NumPy computes it on x86-64 (C's conversion, which NumPy
    leaves undefined for NaN and out-of-range values): below 2**(B-1) a signed
    truncation, from there one of x - 2**(B-1) with the top bit flipped, where the
    signed truncation of NaN and out-of-range values is the minimum (cvttsd2si).
    Spelled out so that every backend and machine gives the same bits."""
    bits = dtype.itemsize * 8
    signed = np.dtype(f"int{bits}")
    half = 2.0 ** (bits - 1)
    x = np.asarray(x, np.float64)

    def truncate(y):
        inside = (y >= -half) & (y < half)
        return np.where(inside, np.where(inside, y, 0.0).astype(signed), signed.type(-half))
    high = truncate(x - half) ^ signed.type(-half)
    return np.where(x >= half, high, truncate(x)).astype(signed).astype(dtype)


def python_scalar(value, t: ScalarType):
    """A lane's value as the Python object plain Python would hold: int64, float64 and
    bool as ``int``/``float``/``bool``, other NumPy types as NumPy scalars."""
    if t.name in ("int64", "float64", "bool"):
        return value.item()
    return t.dtype.type(value)


def format_print(parts, values, lane: int, types) -> list[str]:
    """The strings print() gets for one lane (the print op's ``parts`` template)."""
    def lane_value(i):
        v = values[i]
        if isinstance(types[i], ArrayType):
            return v[lane]  # a per-lane array's row (uniform ones come broadcast)
        v = v[lane] if np.ndim(v) else v
        return python_scalar(np.asarray(v), types[i])

    def render(part):
        kind = part[0]
        if kind == "str":
            return part[1]
        if kind == "val":
            return lane_value(part[1])
        if kind == "tuple":
            return tuple(render(p) for p in part[1])
        if kind == "tree":  # a list, dict, namedtuple or dataclass: Python prints it
            return unflatten(part[1], [render(p) for p in part[2]])
        out = []
        for piece in part[1]:
            if isinstance(piece, str):
                out.append(piece)
                continue
            _, inner, conv, spec = piece
            v = render(inner)
            v = repr(v) if conv == "r" else (str(v) if conv == "s" else v)
            out.append(format(v, spec))
        return "".join(out)
    return [render(p) for p in parts]


class Host:
    """Runs one predicated function for ``lanes`` lanes by the host rules; backends
    that run parts natively subclass it (``region``) or call ``run_op`` per op."""

    def __init__(self, fn: Function, lanes: int, policy: Policy | None = None) -> None:
        self.fn = fn
        self.lanes = lanes
        #: when per-lane array code compacts (``policy``): the reference never does; a
        #: host made inside a kernel's run takes that run's
        self.policy = current_policy() if policy is None else policy

    def __call__(self, args: list) -> list:
        env: dict[int, object] = {p.id: a for p, a in zip(self.fn.params, args)}
        with np.errstate(all="ignore"):
            return self.region(self.fn.body, env)

    def fail(self, kind: str, message: str, lane, loc: Loc):
        raise RUNTIME_ERRORS[kind](message, lane, loc)

    def loop(self, op: Op, env: dict) -> list:
        """Run a ``while`` op (its host rule).  A host that may compact its varying
        loops overrides it (``compact.CompactingHost``)."""
        return masked_loop(self, op, env)

    def region(self, region: Region, env: dict) -> list:
        for op in region.ops[:-1]:
            run_op(self, op, env)
        return [env[v.id] for v in region.terminator.operands]

    def shape(self, op: Op, out):
        """Varying results as arrays of N lanes, uniform ones as scalars."""
        r = op.results[0]
        out = np.asarray(out)
        if r.varying:
            return np.broadcast_to(out, (self.lanes,)).copy() if out.ndim == 0 else out
        return out[()] if out.ndim == 0 else out[0]

    def divide(self, op: Op, args, dtype, mask):
        a, b = args
        if dtype.kind in "iu":
            zero = np.asarray(b) == 0
            if mask is not None:
                bad = np.nonzero(np.broadcast_to(zero & mask, (self.lanes,)))[0]
                if bad.size:
                    word = "division" if op.opcode == "floordiv" else "modulo"
                    self.fail("zerodiv", f"integer {word} by zero", int(bad[0]), op.loc)
            b = np.where(zero, 1, b).astype(dtype)
        fn = np.floor_divide if op.opcode == "floordiv" else np.remainder
        return fn(a, b, dtype=dtype)

    def address(self, op: Op, env, n_index: int):
        """(array, index tuple) for the active lanes, bounds checked; inactive lanes get
        index 0 so the gather never faults."""
        array_v = op.operands[0]
        array = env[array_v.id]
        mask = env[op.mask.id]
        idx = [np.broadcast_to(np.asarray(env[v.id], dtype=np.int64), (self.lanes,))
               for v in op.operands[1:1 + n_index]]
        dims = array.shape[1:] if array_v.varying else array.shape
        fixed = []
        for axis, (i, n) in enumerate(zip(idx, dims)):
            bad = np.nonzero(mask & ((i < -n) | (i >= n)))[0]
            if bad.size:
                lane = int(bad[0])
                self.fail("index", f"index {int(i[lane])} is out of bounds for axis {axis} "
                          f"with size {n}", lane, op.loc)
            i = np.where(i < 0, i + n, i)
            fixed.append(np.where(mask, i, 0))
        if array_v.varying:
            fixed.insert(0, np.arange(self.lanes))
        return array, tuple(fixed), mask


# --- the host rules ------------------------------------------------------------------

def _pure(h: Host, op: Op, env) -> list:
    """Every op without a rule of its own: a NumPy function of its operands."""
    args = [env[v.id] for v in op.operands]
    name = op.opcode
    t = op.results[0].type
    dtype = t.dtype if isinstance(t, ScalarType) else None
    if name in BINARY:
        out = BINARY[name](*args, dtype=dtype)
    elif name in COMPARE:
        out = COMPARE[name](*args)
    elif name == "pow":
        a, b = args
        if t.kind in "iu":
            b = np.where(b < 0, 0, b)  # inactive lanes: active ones passed a check op
        out = _power(a, b, dtype)
    elif name == "min":
        a, b = args
        out = np.where(b < a, b, a).astype(dtype)  # Python's min: the first unless b < a
    elif name == "max":
        a, b = args
        out = np.where(b > a, b, a).astype(dtype)
    elif name == "neg":
        out = np.negative(args[0], dtype=dtype)
    elif name == "invert":
        out = np.invert(args[0])
    elif name == "not":
        out = np.logical_not(args[0])
    elif name == "abs":
        out = np.abs(args[0])
    elif name == "cast" and op.operands[0].type.kind == "f" and dtype.kind == "u" \
            and dtype.itemsize >= 4:
        out = float_to_unsigned(args[0], dtype)
    elif name == "cast":
        out = np.asarray(args[0]).astype(dtype)
    elif name == "select":
        c, a, b = args
        if isinstance(t, ArrayType) and t.shape is not None:
            return select_rule(h, op, env)
        out = np.where(c, a, b).astype(dtype) if isinstance(t, ScalarType) else (a if c else b)
    elif name == "math":
        out = MATH[op.attrs["fn"]](*args)
        out = np.asarray(out).astype(dtype)
    else:
        raise AssertionError(f"no host rule for {name}")
    return [h.shape(op, out)]


def _floordiv(h: Host, op: Op, env) -> list:
    args = [env[v.id] for v in op.operands]
    mask = env[op.mask.id] if op.mask is not None else None
    return [h.shape(op, h.divide(op, args, op.result.type.dtype, mask))]


def _const(h: Host, op: Op, env) -> list:
    value = op.result.type.dtype.type(op.attrs["value"])
    return [np.full(h.lanes, value) if op.result.varying else value]


def _undef(h: Host, op: Op, env) -> list:
    t = op.result.type
    if not isinstance(t, ScalarType):
        return [None]
    zero = t.dtype.type(0)
    return [np.full(h.lanes, zero) if op.result.varying else zero]


def _entry_mask(h: Host, op: Op, env) -> list:
    return [np.ones(h.lanes, dtype=bool)]


def _any(h: Host, op: Op, env) -> list:
    return [np.bool_(np.any(env[op.operands[0].id]))]


def _global_array(h: Host, op: Op, env) -> list:
    return [op.attrs["array"]]


def _array_dim(h: Host, op: Op, env) -> list:
    array = op.operands[0]
    axis = op.attrs["axis"] + (1 if array.varying else 0)
    return [np.int64(env[array.id].shape[axis])]


def _local_array(h: Host, op: Op, env) -> list:
    dims = [int(env[v.id]) for v in op.operands]
    if any(d < 0 for d in dims) and np.any(env[op.mask.id] if op.mask else True):
        # the size is uniform: every lane fails alike, so no lane is named
        h.fail("value", f"negative dimension {min(dims)} for a per-lane array (its "
               f"size must be >= 0)", None, op.loc)
    fill = op.attrs["fill"] or 0
    return [np.full((h.lanes, *dims), fill, dtype=op.attrs["dtype"])]


def _load(h: Host, op: Op, env) -> list:
    array, index, mask = h.address(op, env, op.operands[0].type.ndim)
    out = array[index]
    return [out if op.result.varying else out[np.argmax(mask)]]


def _store(h: Host, op: Op, env) -> list:
    ndim = op.operands[0].type.ndim
    array, index, mask = h.address(op, env, ndim)
    value = np.broadcast_to(env[op.operands[-1].id], (h.lanes,))
    if not array.flags.writeable:
        h.fail("value", f"cannot store into the read-only array "
               f"{op.operands[0].name or ''}".rstrip(), None, op.loc)
    array[tuple(i[mask] for i in index)] = value[mask]
    return []


def _intrinsic(h: Host, op: Op, env) -> list:
    entry = INTRINSICS[op.attrs["name"]]
    mask = env[op.mask.id] if op.mask is not None else np.ones(h.lanes, dtype=bool)
    args = []
    for v in op.operands:
        a = env[v.id]
        args.append(a if isinstance(v.type, ArrayType) else np.broadcast_to(a, (h.lanes,)))

    def fail(kind, message, lane):
        h.fail(kind, message, lane, op.loc)
    out = entry.reference(args, mask, h.lanes, fail)
    if not op.results:
        return []
    dtype = op.result.type.dtype
    out = np.asarray(out).astype(dtype)
    return [out if op.result.varying else out[()]]


def _print(h: Host, op: Op, env) -> list:
    mask = env[op.mask.id]
    values = [env[v.id] if v.varying or not isinstance(v.type, ArrayType) else
              np.broadcast_to(env[v.id], (h.lanes,) + np.shape(env[v.id])) for v in op.operands]
    types = [v.type for v in op.operands]
    for lane in np.nonzero(mask)[0]:
        strings = format_print(op.attrs["parts"], values, int(lane), types)
        print(*strings, sep=op.attrs["sep"], end=op.attrs["end"], file=sys.stdout)
    return []


def _check(h: Host, op: Op, env) -> list:
    mask = env[op.mask.id]
    ok = np.broadcast_to(env[op.operands[0].id], (h.lanes,))
    bad = np.nonzero(mask & ~ok)[0]
    if bad.size:
        h.fail(op.attrs["kind"], op.attrs["message"], int(bad[0]), op.loc)
    return []


def lane_rows(h: Host, values: list, sources, targets) -> list:
    """``values`` (of the IR values ``sources``) passed on into ``targets``: a uniform
    array or number that lands in a varying slot (an ``if`` result under a uniform
    condition, a loop's carried value) becomes one row per lane, each lane's own, as
    the varying value the slot's users expect (the array rules read the lane axis)."""
    out = []
    for x, s, t in zip(values, sources, targets):
        if t.varying and not s.varying and x is not None:
            x = lane_copies(x, h.lanes)
        out.append(x)
    return out


def _if(h: Host, op: Op, env) -> list:
    taken = op.regions[0] if env[op.operands[0].id] else op.regions[1]
    return lane_rows(h, h.region(taken, env), taken.terminator.operands, op.results)


def _while(h: Host, op: Op, env) -> list:
    return h.loop(op, env)


def masked_loop(h: Host, op: Op, env) -> list:
    """A ``while`` op over all of ``h``'s lanes (a varying one masked, as linearize
    made it): ``Host.loop``."""
    before, body = op.regions
    values = lane_rows(h, [env[v.id] for v in op.operands], op.operands, before.args)
    while True:
        check_stop()  # Ctrl-C on a thread no signal reaches (``hydra.stop``)
        for a, v in zip(before.args, values):
            env[a.id] = v
        go, *values = h.region(before, env)
        values = lane_rows(h, values, before.terminator.operands[1:],
                           body.args if go else op.results)
        if not go:
            return values
        for a, v in zip(body.args, values):
            env[a.id] = v
        values = lane_rows(h, h.region(body, env), body.terminator.operands, before.args)


#: opcode -> rule(host, op, env) -> its result values (terminators have none: the
#: region loop reads them)
HOST_RULES: dict[str, Callable] = {
    **{name: _pure for name in (*BINARY_OPS, *UNARY_OPS, "cast", "select", "math")},
    "floordiv": _floordiv, "mod": _floordiv, "const": _const, "undef": _undef,
    "entry_mask": _entry_mask, "any": _any, "global_array": _global_array,
    "array_dim": _array_dim, "local_array": _local_array, "load": _load, "store": _store,
    "intrinsic": _intrinsic, "array": array_rule, "array_store": array_store_rule,
    "print": _print, "check": _check, "if": _if, "while": _while,
    "tape_push": tape.tape_push, "tape_pop": tape.tape_pop,
    "count": count_rule,  # hydra.profile (issue 30)
}


def run_op(host: Host, op: Op, env) -> None:
    """Run one op over all lanes by its host rule; its results go into ``env``."""
    if events.RECORDING:  # hydra.profile (issue 30): timed, products recorded
        return timed_op(host, op, env, HOST_RULES)
    for r, value in zip(op.results, HOST_RULES[op.opcode](host, op, env)):
        env[r.id] = value

