"""The host rules: how each opcode runs over all N lanes at once, with NumPy.  They
define the semantics.

``HOST_RULES`` is one table ``opcode -> rule(host, op, env) -> results`` and
``run_op(host, op, env)`` its one entry point: the numpy (reference) backend runs every
op of every region through it (``host.Host``), the cpu backend's host steps fall back
to it, the cuda backend's host ops call it.  Cross-lane intrinsics run here, through
the intrinsics table's ``reference``.

A varying value is a NumPy array with one entry per lane (leading axis N); a uniform
value is a NumPy scalar; a shared array is the caller's own array; a per-lane array
has a leading axis of N.  Ops that may trap check only the active lanes and raise the
error of SPEC section 6 naming the first failing lane (through ``host.fail``, which a
host of compacted rows maps back to the original lane); the other lanes compute with
safe operands and their results are never observed.  A rule asks its host for
``lanes``, ``fail``, ``shape``, ``region`` and ``loop``.  It is
written to be obviously right, not fast.
"""

from __future__ import annotations

import sys
from typing import Callable

import numpy as np

from .. import events  # hydra.profile (issue 30)
from ..backends import tape
from ..batching import UFUNCS, lane_copies
from ..intrinsics import INTRINSICS
from ..ir.core import BINARY_OPS, UNARY_OPS, Op
from ..stop import check as check_stop
from ..types import ArrayType, ScalarType
from .arrays import array_rule, array_store_rule, checked_ints, select_rule
from .counting import count_rule, timed_op  # hydra.profile (issue 30)
from .scalars import BINARY, COMPARE, MATH, float_to_unsigned, format_print, power


def _pure(h, op: Op, env) -> list:
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
        out = power(a, b, dtype)
    elif name in ("min", "max"):
        a, b = args  # Python's min and max: the first unless b < a (b > a)
        out = np.where(b < a if name == "min" else b > a, b, a).astype(dtype)
    elif name == "neg":
        out = np.negative(args[0], dtype=dtype)
    elif name in ("invert", "not", "abs"):
        out = UFUNCS[name](args[0])  # np.invert, np.logical_not, np.abs
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


def _floordiv(h, op: Op, env) -> list:
    """``//`` and ``%``: an integer division by zero on an active lane raises; the
    inactive lanes divide by 1."""
    a, b = (env[v.id] for v in op.operands)
    dtype = op.result.type.dtype
    if dtype.kind in "iu":
        zero = np.asarray(b) == 0
        if op.mask is not None:
            bad = np.nonzero(np.broadcast_to(zero & env[op.mask.id], (h.lanes,)))[0]
            if bad.size:
                word = "division" if op.opcode == "floordiv" else "modulo"
                h.fail("zerodiv", f"integer {word} by zero", int(bad[0]), op.loc)
        b = np.where(zero, 1, b).astype(dtype)
    fn = np.floor_divide if op.opcode == "floordiv" else np.remainder
    return [h.shape(op, fn(a, b, dtype=dtype))]


def _const(h, op: Op, env) -> list:
    value = op.result.type.dtype.type(op.attrs["value"])
    return [np.full(h.lanes, value) if op.result.varying else value]


def _undef(h, op: Op, env) -> list:
    t = op.result.type
    if not isinstance(t, ScalarType):
        return [None]
    zero = t.dtype.type(0)
    return [np.full(h.lanes, zero) if op.result.varying else zero]


def _entry_mask(h, op: Op, env) -> list:
    return [np.ones(h.lanes, dtype=bool)]


def _any(h, op: Op, env) -> list:
    return [np.bool_(np.any(env[op.operands[0].id]))]


def _global_array(h, op: Op, env) -> list:
    return [op.attrs["array"]]


def _array_dim(h, op: Op, env) -> list:
    array = op.operands[0]
    axis = op.attrs["axis"] + (1 if array.varying else 0)
    return [np.int64(env[array.id].shape[axis])]


def _local_array(h, op: Op, env) -> list:
    dims = [int(env[v.id]) for v in op.operands]
    if any(d < 0 for d in dims) and np.any(env[op.mask.id] if op.mask else True):
        # the size is uniform: every lane fails alike, so no lane is named
        h.fail("value", f"negative dimension {min(dims)} for a per-lane array (its "
               f"size must be >= 0)", None, op.loc)
    fill = op.attrs["fill"] or 0
    return [np.full((h.lanes, *dims), fill, dtype=op.attrs["dtype"])]


def _address(h, op: Op, env) -> tuple:
    """(array, index tuple, mask) of a scalar load or store: the active lanes' indices
    bounds checked (as an array op's), inactive lanes' index 0 (the gather never faults)."""
    array_v, *ints = op.operands[:1 + op.operands[0].type.ndim]
    array = env[array_v.id]
    idx = [np.broadcast_to(np.asarray(env[v.id], dtype=np.int64), (h.lanes,)) for v in ints]
    dims = array.shape[1:] if array_v.varying else array.shape
    fixed = checked_ints(h, op, env, [("int",)] * len(idx), dims, idx, [True] * len(idx))
    if array_v.varying:
        fixed.insert(0, np.arange(h.lanes))
    return array, tuple(fixed), env[op.mask.id]


def _load(h, op: Op, env) -> list:
    array, index, mask = _address(h, op, env)
    out = array[index]
    return [out if op.result.varying else out[np.argmax(mask)]]


def _store(h, op: Op, env) -> list:
    array, index, mask = _address(h, op, env)
    value = np.broadcast_to(env[op.operands[-1].id], (h.lanes,))
    if not array.flags.writeable:
        h.fail("value", f"cannot store into the read-only array "
               f"{op.operands[0].name or ''}".rstrip(), None, op.loc)
    array[tuple(i[mask] for i in index)] = value[mask]
    return []


def _intrinsic(h, op: Op, env) -> list:
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


def _print(h, op: Op, env) -> list:
    mask = env[op.mask.id]
    values = [env[v.id] if v.varying or not isinstance(v.type, ArrayType) else
              np.broadcast_to(env[v.id], (h.lanes,) + np.shape(env[v.id])) for v in op.operands]
    types = [v.type for v in op.operands]
    for lane in np.nonzero(mask)[0]:
        strings = format_print(op.attrs["parts"], values, int(lane), types)
        print(*strings, sep=op.attrs["sep"], end=op.attrs["end"], file=sys.stdout)
    return []


def _check(h, op: Op, env) -> list:
    mask = env[op.mask.id]
    ok = np.broadcast_to(env[op.operands[0].id], (h.lanes,))
    bad = np.nonzero(mask & ~ok)[0]
    if bad.size:
        h.fail(op.attrs["kind"], op.attrs["message"], int(bad[0]), op.loc)
    return []


def lane_rows(h, values: list, sources, targets) -> list:
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


def _if(h, op: Op, env) -> list:
    taken = op.regions[0] if env[op.operands[0].id] else op.regions[1]
    return lane_rows(h, h.region(taken, env), taken.terminator.operands, op.results)


def _while(h, op: Op, env) -> list:
    return h.loop(op, env)


def masked_loop(h, op: Op, env) -> list:
    """A ``while`` op over all of ``h``'s lanes (a varying one masked, as linearize
    made it): ``Host.loop``."""
    before, body = op.regions
    values = lane_rows(h, [h.carried(env, v) for v in op.operands], op.operands, before.args)
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


def run_op(host, op: Op, env) -> None:
    """Run one op over all lanes by its host rule; its results go into ``env``."""
    if events.RECORDING:  # hydra.profile (issue 30): timed, products recorded
        return timed_op(host, op, env, HOST_RULES)
    for r, value in zip(op.results, HOST_RULES[op.opcode](host, op, env)):
        env[r.id] = value

