"""The frontend's entry points: Python source to the ``ssa`` stage (typed, structured SSA)
for the given argument types.  ``build_specialized`` is the one "compile for these
types" step every caller uses (a local call, dump-ir, Dask's client and workers)."""

from __future__ import annotations

import numpy as np

from ..arguments import unshaped
from ..grad.transform import number_tapes
from ..ir.core import Function
from ..types import Type
from .arrayops import SHAPE_VALUES, SHAPED
from .builder import Builder
from .common import NeedShapes
from .source import parse_function
from .subset import check_subset
from .unroll import build_unrolling


def build_function(pyfunc, param_types: list[Type]) -> Function:
    """The ``ssa`` stage of ``pyfunc`` for arguments of ``param_types`` (of a
    ``hydra.grad`` function: its gradient's, ``GradFunction.build``)."""
    grad = getattr(pyfunc, "__hydra_grad__", None)
    if grad is not None:
        return grad.build(param_types)
    parsed = parse_function(pyfunc)
    check_subset(parsed)
    fn = build_unrolling(lambda: Builder(parsed).build(param_types))
    number_tapes(fn)  # (the tapes of the gradients it calls: one id each)
    return fn


def build_specialized(pyfunc, param_types: list[Type], known: dict | None = None,
                      varying=(), shaped: bool = False, pinned: dict | None = None
                      ) -> tuple[Function, bool, dict]:
    """The ``ssa`` stage as a call compiles it (SPEC section 8): without array shapes
    (``shaped`` False: array types unshaped) until whole-array code needs them, then
    with the shapes of arguments and captured arrays and, as constants, the values
    (``known``, by name) of the uniform ints that shapes depend on.  Returns the
    function, ``shaped`` and those ints (``pinned``); building again with them gives
    the same function.  A shape that stays unknown is a plain ``CompileError`` at the
    user's line (``NeedShapes`` is this loop's signal, never the user's error)."""
    known, pinned = known or {}, dict(pinned or {})
    while True:
        s_token, v_token = SHAPED.set(shaped), SHAPE_VALUES.set(pinned)
        try:
            types = param_types if shaped else [unshaped(t) for t in param_types]
            return build_function(pyfunc, list(types)), shaped, pinned
        except NeedShapes as e:
            new = {p: known[p] for p in e.params if p not in pinned and p not in varying
                   and isinstance(known.get(p), (int, np.integer))}
            if shaped and not new:
                raise e.plain() from None
            shaped, pinned = True, {**pinned, **new}
        finally:
            SHAPED.reset(s_token)
            SHAPE_VALUES.reset(v_token)
