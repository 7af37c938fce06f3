"""The operation registry: one record per operation hydra accepts.

Every operation a kernel can contain has one ``OpRecord`` here, found by
``record(kind, name)``:

- ``"op"``: an IR opcode (``hydra.ir.core.OPCODES``): scalar arithmetic, casts, memory,
  control flow;
- ``"math"``: a math function of numbers (``math.sqrt(x)``, ``np.tanh(x)``): the
  ``math`` opcode's ``fn``;
- ``"array"``: a NumPy operation on whole per-lane arrays (SPEC section 8): the
  ``array`` opcode's ``fn``, including the cross-lane reductions of arrays
  (``lanesum(g)``);
- ``"intrinsic"``: a lane intrinsic (``hydra.intrinsics``);
- ``"layer"``: a ``hydra.nn`` layer;
- ``"random"``: a ``hydra.random`` function (Philox draws, compiled from its body).

A record holds the operation's facts in named slots, so that an analysis or a
transformation asks the record instead of keeping a table of its own:

- ``definition``: the semantics (for arrays the NumPy code of one lane; for intrinsics
  the reference over all lanes; for opcodes the reference interpreter's host rule is
  keyed by the opcode: see ``hydra.executor.rules.HOST_RULES``);
- ``type_rule``: argument types (and static params) -> result type;
- ``batching``: how all lanes run at once (``hydra.batching``): a rule, or None where the
  definition already runs over all lanes (elementwise NumPy on ``[N]`` values);
- ``memory``: which operands' arrays it reads and writes, and which its result may be a
  view of (``hydra.ir.core.Memory``: the declarations ``hydra.effects`` follows; None for
  what is compiled from its body, whose operations declare their own);
- ``monoid``: the reduction's ufunc and identity, for a reduction (a lane reduction's
  is its intrinsic's, ``hydra.intrinsics.Monoid``);
- ``adjoint``: the reverse-mode rule (SPEC section 11), or why there is none.

The registry is built from the tables that define these facts today (``OPCODES``,
``hydra.batching``, the intrinsics table, ``hydra.nn``) and holds the tables the
frontend reads: the math functions (``MATH_FUNCTIONS``) and NumPy's other spellings
(``ALIASES``), so it imports nothing of the frontend.  A
test (``tests/test_registry.py``) keeps it complete: every operation the frontend
accepts has a record with every slot filled.  The executor issue moves those tables
onto the records one by one; the gradients issue fills the ``adjoint`` slots.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from . import arraylib, batching, nn
from . import random as hydra_random
from .grad.arrays import ARRAY_RULES as _ARRAY_RULES
from .grad.morearrays import MORE_ARRAY_RULES, MORE_MATH_RULES
from .grad.rules import MATH_RULES as _MATH_RULES
from .grad.rules import OPCODE_RULES
from .intrinsics import INTRINSICS, Monoid
from .ir.core import ARRAY_MEMORY, LANE_ARRAY_FNS, OPCODES, PURE, Memory, intrinsic_memory
from .types import BOOL, FLOAT64, WEAK_FLOAT, ArrayType, ScalarType, promote


class AdjointState(enum.Enum):
    RULE = "rule"                      # ``Adjoint.rule`` is the reverse-mode rule
    NOT_DIFFERENTIABLE = "none"        # no gradient flows through it: ``reason`` says why
    MISSING = "missing"                # differentiable in principle; no rule written yet


@dataclass(frozen=True, slots=True)
class Adjoint:
    """The adjoint slot of a record (SPEC section 11; JAX's transpose rules are the
    model).  A missing rule is a ``CompileError`` naming the operation when a gradient
    asks for it."""

    state: AdjointState
    rule: Callable | None = None
    reason: str = ""

    @classmethod
    def of(cls, rule: Callable) -> "Adjoint":
        return cls(AdjointState.RULE, rule=rule)

    @classmethod
    def none(cls, reason: str) -> "Adjoint":
        return cls(AdjointState.NOT_DIFFERENTIABLE, reason=reason)


#: differentiable, but its rule is not written yet
NO_RULE_YET = Adjoint(AdjointState.MISSING, reason="no adjoint rule has been written yet")


@dataclass(slots=True)
class OpRecord:
    kind: str
    name: str
    doc: str
    definition: Callable | None
    type_rule: Callable | None
    batching: Callable | None
    adjoint: Adjoint
    monoid: Monoid | None = None
    memory: Memory | None = None
    #: names of the frontend spellings that lead here (``np.amax`` -> array ``max``)
    aliases: tuple[str, ...] = field(default_factory=tuple)


RECORDS: dict[tuple[str, str], OpRecord] = {}


def record(kind: str, name: str) -> OpRecord:
    """The record of operation ``name`` of ``kind`` ("op", "math", "array", "intrinsic",
    "layer", "random"); a KeyError names what is missing."""
    try:
        return RECORDS[kind, name]
    except KeyError:
        raise KeyError(f"no record for the {kind} operation {name!r}") from None


def records(kind: str) -> list[OpRecord]:
    return [r for (k, _), r in RECORDS.items() if k == kind]


def monoid(name: str) -> Monoid | None:
    """The monoid of the reduction called ``name`` (an array reduction or a lane
    reduction), or None."""
    for kind in ("array", "intrinsic"):
        r = RECORDS.get((kind, name))
        if r is not None and r.monoid is not None:
            return r.monoid
    return None


def _add(r: OpRecord) -> None:
    assert (r.kind, r.name) not in RECORDS, (r.kind, r.name)
    RECORDS[r.kind, r.name] = r


# --- why some operations carry no gradient (SPEC section 11) ----------------------------

_NO_GRAD_RESULT = "its result is an integer or a bool: no gradient flows through it"
_NO_GRAD_STEP = "piecewise constant: its derivative is 0 almost everywhere (SPEC section 11)"
_NO_GRAD_EFFECT = ("a store into shared memory or a cross-lane effect is not "
                   "differentiable (SPEC section 11)")
_NO_GRAD_VALUE = "it makes a value of its own: nothing flows into it"
_NO_GRAD_TAPE = ("the gradient transformation's own tape: a gradient of a gradient through "
                 "a loop is not supported yet (a CompileError)")
_BY_RECORD = ("its fn's or name's own record (kind math, array or intrinsic) holds the "
              "adjoint rule or says why there is none")
_BY_BODY = ("compiled from its body: differentiated by the rules of the operations it "
            "uses (relu by its own select, relu'(0) = 0)")
_NO_GRAD_LOAD = ("the transformation decides by the array: a load from a captured array or "
                 "a parameter not differentiated is a constant; any other is refused")
_STRUCTURAL = ("structural: the gradient transformation handles it itself (regions, "
               "masks and carried values), not by a rule")

#: the adjoint rules by array fn and by math fn (hydra.grad.arrays, .morearrays, .rules)
ARRAY_RULES = {**_ARRAY_RULES, **MORE_ARRAY_RULES}
MATH_RULES = {**_MATH_RULES, **MORE_MATH_RULES}

# --- opcodes ---------------------------------------------------------------------------

_OPCODE_ADJOINTS = {
    **{name: Adjoint.none(_NO_GRAD_RESULT) for name in (
        "lt", "le", "gt", "ge", "eq", "ne", "not", "invert", "lshift", "rshift", "bitand",
        "bitor", "bitxor", "any", "entry_mask", "array_dim")},
    **{name: Adjoint.none(_NO_GRAD_VALUE) for name in (
        "const", "undef", "global_array", "local_array")},
    **{name: Adjoint.none(_NO_GRAD_EFFECT) for name in ("print", "check")},
    **{name: Adjoint.none(_STRUCTURAL) for name in ("if", "while", "yield", "condition")},
    **{name: Adjoint.none(_BY_RECORD) for name in ("math", "array", "intrinsic")},
    "floordiv": Adjoint.none(_NO_GRAD_STEP),
    **{name: Adjoint.none(_NO_GRAD_TAPE) for name in ("tape_push", "tape_pop")},
    "count": Adjoint.none("the profiler's lane counter: it computes no value"),
    **{name: Adjoint.none(_NO_GRAD_EFFECT) for name in ("store", "array_store")},
    "load": Adjoint.none(_NO_GRAD_LOAD),
    **{name: Adjoint.of(rule) for name, rule in OPCODE_RULES.items()},
}


for _name, _info in OPCODES.items():
    # batching None: the host rule runs all lanes at once; ``array`` ops batch by
    # ``hydra.batching``
    _add(OpRecord("op", _name, _info.doc, definition=None, type_rule=None,
                  batching=batching.batched if _name == "array" else None,
                  adjoint=_OPCODE_ADJOINTS.get(_name, NO_RULE_YET), memory=_info.memory))

# --- math functions of numbers -----------------------------------------------------------

#: the math/NumPy functions of numbers a kernel may call: name -> (IR fn, arity, result:
#: "float" or "bool")
MATH_FUNCTIONS: dict[str, tuple[str, int, str]] = {
    **{f: (f, 1, "float") for f in (
        "sqrt", "exp", "log", "log2", "log10", "sin", "cos", "tan", "asin", "acos", "atan",
        "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "expm1", "log1p", "erf", "erfc",
        "fabs", "exp2", "cbrt", "gamma", "lgamma")},
    "atan2": ("atan2", 2, "float"), "hypot": ("hypot", 2, "float"), "pow": ("pow", 2, "float"),
    "copysign": ("copysign", 2, "float"), "fmod": ("fmod", 2, "float"),
    "isnan": ("isnan", 1, "bool"), "isinf": ("isinf", 1, "bool"),
    "isfinite": ("isfinite", 1, "bool"),
    "floor": ("floor", 1, "float"), "ceil": ("ceil", 1, "float"), "trunc": ("trunc", 1, "float"),
}
#: NumPy's names of the math functions that ``math`` spells otherwise (np.arcsin: asin)
NUMPY_MATH_NAMES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arctan2": "atan2",
                    "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh", "power": "pow"}
_MATH_STEPS = frozenset({"floor", "ceil", "trunc", "rint"})
_MATH_PREDICATES = frozenset({"isnan", "isinf", "isfinite"})


def math_operand_type(types: list) -> ScalarType:
    """The type a math function computes in: its operands' promoted type, where that is
    an integer or a bool float64 (a weak float where every operand is a weak Python
    number); a float result has it, a predicate's is a bool."""
    t = types[0]
    for u in types[1:]:
        t = promote(t, u)
    return t if t.kind == "f" else WEAK_FLOAT if t.weak else FLOAT64


def _math_records() -> None:
    # ``round(x)`` is emitted as rint
    table = {**MATH_FUNCTIONS, "round": ("rint", 1, "float")}
    for name, (fn, arity, result) in table.items():
        adjoint = (Adjoint.none(_NO_GRAD_RESULT) if fn in _MATH_PREDICATES
                   else Adjoint.none(_NO_GRAD_STEP) if fn in _MATH_STEPS
                   else Adjoint.of(MATH_RULES[fn]) if fn in MATH_RULES else NO_RULE_YET)
        _add(OpRecord("math", fn, f"{name}: {arity} operand(s), {result} result",
                      definition=_math_definition(fn), type_rule=_math_type(result),
                      batching=None, adjoint=adjoint, memory=PURE))


def _math_definition(fn: str) -> Callable:
    """The math function of one number, as the per-example Python program computes it."""
    import math
    numpy_name = {m: n for n, m in NUMPY_MATH_NAMES.items()}.get(fn, fn)
    ufunc = getattr(np, numpy_name, None)
    return ufunc if ufunc is not None else getattr(math, fn)


def _math_type(result: str) -> Callable:
    """The frontend's rule (``math_operand_type``); a predicate gives a NumPy bool
    (``np.isnan``; ``math.isnan``'s Python bool is the frontend's weak bool)."""
    def rule(types):
        return BOOL if result == "bool" else math_operand_type(types)
    return rule


# --- array operations --------------------------------------------------------------------

def lanesum_outer(args, mask, lanes, fail):
    """``lanesum(np.outer(d, x))`` over the active lanes: ``D.T @ X`` of their rows,
    one GEMM (the per-lane outer products are never made)."""
    d, x = (np.asarray(a)[mask].reshape(int(mask.sum()), -1) for a in args)
    return d.T @ x


def _lane_array_type(entry) -> Callable:
    """A lane intrinsic of an array, elementwise: its rule on the elements (bools summed
    as int64), the array's shape."""
    def rule(types):
        a = types[0]
        return ArrayType(entry.result([a.dtype, *types[1:]]), a.ndim, a.shape)
    return rule


def _lanesum_outer_type(types):
    d, x = types
    return ArrayType(promote(d.dtype, x.dtype), 2, (d.shape[0], x.shape[0]))


_ARRAY_MONOIDS = {"sum": Monoid(np.add, 0), "prod": Monoid(np.multiply, 1),
                  "max": Monoid(np.maximum, None), "min": Monoid(np.minimum, None),
                  "any": Monoid(np.logical_or, False), "all": Monoid(np.logical_and, True)}
_ARRAY_NO_GRAD = {
    **{name: Adjoint.none(_NO_GRAD_RESULT) for name in (
        "lt", "le", "gt", "ge", "eq", "ne", "not", "invert", "lshift", "rshift", "bitand",
        "bitor", "bitxor", "isnan", "isinf", "isfinite", "logical_not", "logical_and",
        "logical_or", "logical_xor", "signbit", "argmax", "argmin", "any", "all", "gcd",
        "lcm")},
    **{name: Adjoint.none(_NO_GRAD_STEP) for name in (
        "floor", "ceil", "trunc", "rint", "sign", "floordiv", "heaviside", "spacing",
        "nextafter")},
    **{name: Adjoint.none(_NO_GRAD_VALUE) for name in (
        "zeros_like", "ones_like", "empty_like", "arange", *arraylib.NO_GRAD_VALUE)},
    **{name: Adjoint.none(_NO_GRAD_RESULT) for name in arraylib.NO_GRAD_RESULT},
    **{name: Adjoint.none(_NO_GRAD_STEP) for name in arraylib.NO_GRAD_STEP},
    **{name: Adjoint.none(_NO_GRAD_EFFECT) for name in (
        "laneprod", "lanemin", "lanemax", "laneany", "laneall", "broadcast", "shuffle",
        "rotate", "prefixsum", "lanesum", "lanesum_outer")},
}


def _array_type_rule(fn: str) -> Callable:
    def rule(types, params):
        return batching.result_type(fn, types, params)
    return rule


#: NumPy's other spellings of array operations: name -> the record's name
ALIASES = {"amax": "max", "amin": "min", "absolute": "abs", "power": "pow",
           "np.linalg.norm": "norm", "around": "round",
           # ufuncs called by name (np.subtract(a, b)) are the operators' ops
           "subtract": "sub", "multiply": "mul", "divide": "truediv",
           "floor_divide": "floordiv", "remainder": "mod", "left_shift": "lshift",
           "right_shift": "rshift", "bitwise_and": "bitand", "bitwise_or": "bitor",
           "bitwise_xor": "bitxor", "bitwise_not": "invert", "bitwise_invert": "invert",
           "less": "lt", "less_equal": "le", "greater": "gt", "greater_equal": "ge",
           "equal": "eq", "not_equal": "ne"}


def _array_records() -> None:
    aliases: dict[str, list[str]] = {}
    for alias, target in (*ALIASES.items(), *arraylib.SPELLINGS.items()):
        aliases.setdefault(target, []).append(alias)
    for fn, f in batching.PER_LANE.items():
        if fn in ALIASES:  # np.absolute is abs: one record, under the name the IR uses
            continue
        _add(OpRecord("array", fn, (f.__doc__ or fn).strip().splitlines()[0],
                      definition=f, type_rule=_array_type_rule(fn),
                      batching=batching.BATCH.get(fn, batching.loop_rule),
                      adjoint=_ARRAY_NO_GRAD.get(fn, Adjoint.of(ARRAY_RULES[fn])
                                                 if fn in ARRAY_RULES else NO_RULE_YET),
                      monoid=_ARRAY_MONOIDS.get(fn), aliases=tuple(aliases.get(fn, ())),
                      memory=ARRAY_MEMORY[fn]))
    # the cross-lane reductions of arrays: the intrinsics' references over the lane axis
    for fn in sorted(LANE_ARRAY_FNS):
        entry = INTRINSICS.get(fn)
        _add(OpRecord("array", fn, entry.doc if entry else lanesum_outer.__doc__,
                      definition=entry.reference if entry else lanesum_outer,
                      type_rule=_lane_array_type(entry) if entry else _lanesum_outer_type,
                      batching=None, adjoint=_ARRAY_NO_GRAD[fn],
                      monoid=entry.monoid if entry else None, memory=ARRAY_MEMORY[fn]))


# --- intrinsics --------------------------------------------------------------------------

def _intrinsic_records() -> None:
    for name, entry in INTRINSICS.items():
        adjoint = (Adjoint.none(_NO_GRAD_RESULT) if name in ("lane", "nlanes")
                   else Adjoint.none(_NO_GRAD_EFFECT))
        _add(OpRecord("intrinsic", name, entry.doc, definition=entry.reference,
                      type_rule=entry.result, batching=None, adjoint=adjoint,
                      monoid=entry.monoid, memory=intrinsic_memory(name)))


# --- hydra.nn layers -----------------------------------------------------------------------

def _layer_records() -> None:
    for name in ("relu", "sigmoid", "softmax", "log_softmax", "conv2d", "max_pool2d",
                 "avg_pool2d"):
        layer = getattr(nn, name)
        # an array operation of its own: its array record's facts; else compiled from its
        # body: the records of the operations it uses
        own = getattr(layer, "__hydra_array_op__", None)
        array = record("array", own[0]) if own is not None else None
        _add(OpRecord("layer", name, layer.__doc__.strip().splitlines()[0], definition=layer,
                      type_rule=array and array.type_rule, batching=array and array.batching,
                      adjoint=array.adjoint if array else Adjoint.none(_BY_BODY),
                      memory=array and array.memory))


# --- hydra.random ----------------------------------------------------------------------------

_NO_GRAD_RANDOM = ("a random draw: its value is a bit pattern of (seed, counter, lane), "
                   "integers all, so no gradient flows through it")


def _random_records() -> None:
    # compiled from their bodies (uint64 arithmetic): the records of those operations
    # hold the facts; these say what each function is and that it carries no gradient
    for name in hydra_random.FUNCTIONS:
        fn = getattr(hydra_random, name)
        _add(OpRecord("random", name, fn.__doc__.strip().splitlines()[0], definition=fn,
                      type_rule=None, batching=None, adjoint=Adjoint.none(_NO_GRAD_RANDOM)))


_math_records()
_array_records()
_intrinsic_records()
_layer_records()
_random_records()
