"""The adjoint rules of the array operations that only the adjoint rules emit
(``hydra.grad.arrays.EMITTED``), so that a gradient of a gradient runs through them; same
signature as ``hydra.grad.rules``.

Each is linear in the adjoint it carries, so its rule is its transpose (JAX's model): a
scatter-add's is a gather (``take``), ``avg_pool2d_grad``'s averages over the windows
(``avg_pool2d``), ``max_pool2d_grad``'s picks each window's value
at its first maximum (``max_pool2d_pick``) and back; the layers' adjoints are bilinear
(a transposed convolution of the output adjoint and the weights, a correlation of the
images and the output adjoint), so each operand's adjoint is another of the three
convolutions.  A singular-value norm's gradient has no rule: a ``CompileError`` says so.
"""

from __future__ import annotations

from ..errors import CompileError
from .arrays import shape_of


def scatter_add(e, op, args, out, g):
    """A scatter-add's transpose is the gather (``take`` along the axis)."""
    return [e.arr("take", [g, args[1]], {"axis": op.attrs["params"].get("axis", 0)}), None]


def max_pool2d_grad(e, op, args, out, g):
    """Linear in the window gradients: its transpose picks ``g`` at each window's first
    maximum; the images only choose the places (no gradient, as a max's choice)."""
    p = {"k": op.attrs["params"]["k"], "stride": op.attrs["params"].get("stride")}
    return [None, e.arr("max_pool2d_pick", [args[0], g], p)]


def max_pool2d_pick(e, op, args, out, g):
    p = {"k": op.attrs["params"]["k"], "stride": op.attrs["params"].get("stride")}
    return [None, e.arr("max_pool2d_grad", [args[0], g], p)]


def conv2d_grad_input(e, op, args, out, g):
    """The transposed convolution ``T(gy, w)`` is bilinear: <T(gy, w), h> = <gy,
    conv2d(h, w)>, so gy's adjoint is conv2d(h, w) and w's the correlation of h with gy."""
    gy, w = args
    p = op.attrs["params"]
    conv = {"stride": p.get("stride", 1), "padding": p.get("padding", 0)}
    kh, kw = shape_of(w)[-2:]
    return [e.arr("conv2d", [g, w], conv),
            e.arr("conv2d_grad_weight", [g, gy], {"kh": kh, "kw": kw, **conv})]


def conv2d_grad_weight(e, op, args, out, g):
    """The correlation ``C(x, gy)``: <C(x, gy), H> = <gy, conv2d(x, H)>, so gy's adjoint
    is conv2d(x, H) and x's the transposed convolution of gy through H."""
    x, gy = args
    p = op.attrs["params"]
    conv = {"stride": p.get("stride", 1), "padding": p.get("padding", 0)}
    if len(shape_of(g)) != 4:
        raise CompileError("hydra.grad: a gradient of a gradient through conv2d's weights is "
                           "written for one lane's images [C, H, W], not a stack of them",
                           op.loc)
    height, width = shape_of(x)[-2:]
    return [e.arr("conv2d_grad_input", [gy, g], {"height": height, "width": width, **conv}),
            e.arr("conv2d", [x, g], conv)]


def avg_pool2d_grad(e, op, args, out, g):
    """Linear: each window's gradient shared by its ``k*k`` pixels; its transpose
    averages the pixels' adjoints over each window (``avg_pool2d``)."""
    p = op.attrs["params"]
    return [e.arr("avg_pool2d", [g], {"k": p["k"], "stride": p.get("stride")})]


def svd_norm_grad(e, op, args, out, g):
    raise CompileError("hydra.grad: a gradient of a gradient through np.linalg.norm of "
                       "ord 2, -2 or 'nuc' is not supported (the derivative of the SVD is "
                       "not written); the other norms have one", op.loc)


#: array fn -> rule
EMITTED_RULES = {
    "scatter_add": scatter_add, "max_pool2d_grad": max_pool2d_grad,
    "max_pool2d_pick": max_pool2d_pick, "svd_norm_grad": svd_norm_grad,
    "conv2d_grad_input": conv2d_grad_input, "conv2d_grad_weight": conv2d_grad_weight,
    "avg_pool2d_grad": avg_pool2d_grad,
}
