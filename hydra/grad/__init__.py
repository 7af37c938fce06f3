"""Gradients of per-lane functions (SPEC section 11): ``hydra.grad``,
``hydra.value_and_grad``, ``hydra.stop_gradient``.

``grad(fn, argnums=0)`` is a ``GradFunction``: a per-lane function with ``fn``'s
parameters, usable everywhere a per-lane function is: compiled as a kernel
(``hydra.compile(hydra.grad(f), varying=...)``; ``hydra.frontend.build_function``
builds its IR by ``GradFunction.build``), called inside a kernel as a helper (the
frontend inlines its IR), and called in plain Python on one example (a one-lane
kernel on the reference backend, where ``lane()`` is 0 and ``nlanes()`` 1).  The
transformation itself is ``hydra.grad.transform``; the adjoint rules are in the
operation registry's records (``hydra.registry``, ``hydra.grad.rules``).

Return conventions are JAX's: an int argnum (or a single name in ``wrt=``) gives one
gradient, a tuple a tuple; ``grad`` returns the gradient, or ``(grad, aux)`` with
``has_aux``; ``value_and_grad`` returns ``(value, grad)``, or ``((value, aux), grad)``.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from .. import trees
from ..types import ArrayType, ScalarType, TreeType, TupleType, Type

#: the kernel class a gradient runs as in plain Python (``hydra.api.Kernel``): the api,
#: which sits above this package, fills it in at import
KERNEL = None


def stop_gradient(x):
    """``x``, with no gradient flowing back through it (in plain Python: ``x``)."""
    return x


stop_gradient.__hydra_stop_gradient__ = True


def grad(fn, argnums=None, *, wrt=None, has_aux: bool = False,
         checkpoint: int | None = None) -> "GradFunction":
    """The gradient of per-lane function ``fn`` (which returns one float scalar, or
    ``(scalar, aux)`` with ``has_aux``) with respect to ``argnums`` (default 0) or the
    parameters named by ``wrt``.  ``checkpoint=K``: a loop's state is saved every K
    trips and each segment recomputed in the reverse sweep (``hydra.grad.checkpoint``)."""
    return GradFunction(fn, argnums, wrt, has_aux, with_value=False, checkpoint=checkpoint)


def value_and_grad(fn, argnums=None, *, wrt=None, has_aux: bool = False,
                   checkpoint: int | None = None) -> "GradFunction":
    """``fn``'s value and its gradient: ``(value, grad)`` (``((value, aux), grad)``
    with ``has_aux``)."""
    return GradFunction(fn, argnums, wrt, has_aux, with_value=True, checkpoint=checkpoint)


grad.__hydra_makes_grad__ = True
value_and_grad.__hydra_makes_grad__ = True


def _leaf_count(t: Type) -> int:
    if isinstance(t, TreeType):  # a container argument: its leaves are parameters
        return sum(_leaf_count(e) for e in t.leaves)
    return sum(_leaf_count(e) for e in t.elems) if isinstance(t, TupleType) else 1


def _check_param(name: str, t: Type) -> None:
    """A differentiated parameter: a float number or array, or a tuple of them
    (else a ``TypeError`` naming it)."""
    from .transform import is_float
    if isinstance(t, TupleType):
        for i, e in enumerate(t.elems):
            _check_param(f"{name}[{i}]", e)
        return
    if isinstance(t, TreeType):  # its static leaves (None, strings) are no parameters
        for path, e in zip(trees.paths(t.treedef, name), t.leaves):
            _check_param(path, e)
        return
    if isinstance(t, (ScalarType, ArrayType)) and is_float(t):
        return
    name_ = t.name if isinstance(t, ScalarType) else f"array of {t.dtype.name}"
    what = f"an {name_}" if name_[0] in "aeiou" else f"a {name_}"
    why = "integers and bools carry no gradient"
    raise TypeError(f"hydra.grad: parameter '{name}' is {what}: {why}")


class GradFunction:
    """``hydra.grad(fn, ...)``: see the module docstring."""

    def __init__(self, fn, argnums, wrt, has_aux: bool, with_value: bool,
                 checkpoint: int | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"hydra.grad needs a function, not {type(fn).__name__}")
        if checkpoint is not None and (isinstance(checkpoint, bool) or not isinstance(
                checkpoint, (int, np.integer)) or checkpoint < 1):
            raise TypeError(f"hydra.grad: checkpoint must be a positive int (trips between "
                            f"saved loop states), not {checkpoint!r}")
        self.checkpoint = None if checkpoint is None else int(checkpoint)
        names = list(inspect.signature(fn).parameters)
        if argnums is not None and wrt is not None:
            raise TypeError("hydra.grad: give argnums or wrt, not both")
        if wrt is not None:
            single = isinstance(wrt, str)
            wanted = (wrt,) if single else tuple(wrt)
            unknown = [w for w in wanted if w not in names]
            if unknown:
                raise TypeError(f"hydra.grad: wrt names {unknown} are not parameters of "
                                f"{fn.__name__}{tuple(names)}")
            indices = tuple(names.index(w) for w in wanted)
        else:
            argnums = 0 if argnums is None else argnums
            single = isinstance(argnums, int)
            indices = (argnums,) if single else tuple(argnums)
            for i in indices:
                if not isinstance(i, int) or not -len(names) <= i < len(names):
                    raise TypeError(f"hydra.grad: argnums {argnums!r} do not name "
                                    f"parameters of {fn.__name__}{tuple(names)}")
            indices = tuple(i % len(names) for i in indices)
        functools.update_wrapper(self, fn)
        self.__hydra_grad__ = self
        self.indices, self.single = indices, single
        self.has_aux, self.with_value = has_aux, with_value
        self.names = names
        self._kernel = None

    def __repr__(self) -> str:
        kind = "value_and_grad" if self.with_value else "grad"
        return f"<hydra.{kind} of {self.__wrapped__.__name__} wrt {self.indices}>"

    def build(self, types: list[Type]):
        """The typed SSA of this gradient for arguments of ``types``."""
        from ..frontend.build import build_function
        from .analysis import prune
        from .transform import differentiate
        for i in self.indices:
            _check_param(self.names[i], types[i])
        fn = build_function(self.__wrapped__, list(types))
        tree = fn.notes["result_tree"]
        leaves = fn.body.terminator.operands
        shown = self.__wrapped__.__name__
        if self.has_aux:
            if not (tree.kind == "tuple" and len(tree.children) == 2
                    and tree.children[0] == trees.LEAF):
                raise TypeError(f"hydra.grad: {shown} must return (value, aux) with "
                                f"has_aux=True, a float scalar and anything")
        elif tree != trees.LEAF:
            raise TypeError(f"hydra.grad: {shown} must return one float scalar per lane "
                            f"(float32 or float64), not "
                            + ("None" if tree == trees.NONE else f"a {tree.kind}") +
                            " (has_aux=True takes (value, aux))")
        value = leaves[0]
        if not (isinstance(value.type, ScalarType) and value.type.kind == "f"):
            raise TypeError(f"hydra.grad: {shown} must return one float scalar per lane "
                            f"(float32 or float64), not {value.type}")
        starts = [0]
        for t in types:
            starts.append(starts[-1] + _leaf_count(t))
        wrt = [p for i in self.indices for p in fn.params[starts[i]:starts[i + 1]]]
        out = differentiate(fn, wrt, len(leaves), self.checkpoint)
        aux_tree = tree.children[1] if self.has_aux else None
        grads = [_tree(types[i]) for i in self.indices]
        grads = grads[0] if self.single else _tuple(grads)
        value_tree = _tuple([trees.LEAF, aux_tree]) if self.has_aux else trees.LEAF
        if self.with_value:
            out.notes["result_tree"] = _tuple([value_tree, grads])
        elif self.has_aux:
            out.notes["result_tree"] = _tuple([grads, aux_tree])
        else:
            out.notes["result_tree"] = grads
        if not self.with_value:  # grad: (grads, aux) or grads, without the value
            y = out.body.terminator
            n = len(leaves)
            y.operands = y.operands[n:] + y.operands[1:n]
        prune(out)  # what the result does not need (grad alone: the value)
        return out

    def __call__(self, *args, **kwargs):
        """One example in plain Python: a one-lane kernel on the reference backend."""
        if self._kernel is None:
            self._kernel = KERNEL(self, lanes=1, backend="numpy")
        k = self._kernel
        prepared = k.prepare(k.bind(*args, **kwargs))
        result = k.run_prepared(prepared)
        fn = prepared[0]
        flags = iter([v.varying for v in fn.body.terminator.operands])
        return _one_example(result, fn.notes["result_tree"], flags)


def _one_example(x, tree, flags):
    """A one-lane kernel's result as plain Python gives it: a value the compiler kept per
    lane (one lane's row) as that lane's value, a number as a Python float."""
    leaves, _ = trees.flatten(x) if tree != trees.LEAF else ([x], None)
    out = []
    for leaf in leaves:
        if next(flags) and isinstance(leaf, np.ndarray):
            leaf = leaf[0]
            if isinstance(leaf, np.generic) and leaf.dtype in (np.float64, np.int64,
                                                               np.bool_):
                leaf = leaf.item()
        out.append(leaf)
    return trees.unflatten(tree, out)


def _tuple(children) -> "trees.TreeDef":
    return trees.TreeDef("tuple", None, (), tuple(children))


def _tree(t: Type) -> "trees.TreeDef":
    """The structure of a gradient of an argument of type ``t`` (its own)."""
    if isinstance(t, TreeType):
        return t.treedef
    return _tuple([_tree(e) for e in t.elems]) if isinstance(t, TupleType) else trees.LEAF


__all__ = ["grad", "value_and_grad", "stop_gradient", "GradFunction"]
