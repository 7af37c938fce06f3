"""The peers of ``bench/grad.py``: the same losses' gradient steps in PyTorch (batched
autograd and ``torch.func`` ``vmap(grad)``, per-example gradients) on the CPU, then
JAX's (``bench/jaxpeers.py``: ``jit(grad)``, ``jit(vmap(grad))``, ``scan``,
``fori_loop``/``while_loop``), each where its library is importable.

Each peer takes the workload's NumPy arguments and returns the step's outputs as NumPy
arrays in hydra's order (mean loss, then the mean gradients; for DP-SGD the sums of the
clipped per-example gradients), so that ``bench/grad.py`` checks them against hydra's.
Threads: one when ``HYDRA_THREADS=1`` (the one-thread table), else every core.
"""

from __future__ import annotations

import os

import numpy as np

from . import jaxpeers


def peers(name: str):
    """(row name, step function) of every peer of workload ``name``: PyTorch's, then
    JAX's."""
    yield from torch_peers(name)
    yield from jaxpeers.grad_peers(name)


def torch_peers(name: str):
    """(row name, step function) of the PyTorch peers of workload ``name``."""
    try:
        import torch
        import torch.nn.functional as F
        from torch.func import grad, vmap
    except ImportError:
        return
    torch.set_num_threads(1 if os.environ.get("HYDRA_THREADS") == "1" else os.cpu_count() or 1)

    def t(a):
        return torch.from_numpy(np.ascontiguousarray(a))

    def params(arrays):
        return [t(a).clone().requires_grad_(True) for a in arrays]

    def back(loss, ps):
        gs = torch.autograd.grad(loss, ps)
        return (float(loss.detach()),) + tuple(g.numpy() for g in gs)

    if name == "mlp":
        def forward(x, W1, b1, W2, b2, W3, b3):
            h = torch.tanh(x @ W1.T + b1)
            h = torch.relu(h @ W2.T + b2)
            return h @ W3.T + b3

        def batched(x, label, *ws):
            ps = params(ws)
            return back(F.cross_entropy(forward(t(x), *ps), t(label)), ps)

        def one(ws, x, label):
            return F.cross_entropy(forward(x[None], *ws), label[None])

        def per_example(x, label, *ws):
            ps = tuple(t(w) for w in ws)
            loss = F.cross_entropy(forward(t(x), *ps), t(label))
            gs = vmap(grad(one), in_dims=(None, 0, 0))(ps, t(x), t(label))
            return (float(loss),) + tuple(g.mean(0).numpy() for g in gs)
        yield "torch batched autograd", batched
        yield "torch.func vmap(grad)", per_example
    elif name == "rnn":
        def padded(xs, n, label, Wx, Wh, b, Wo):
            ps = params((Wx, Wh, b, Wo))
            Wx_, Wh_, b_, Wo_ = ps
            xs_, n_ = t(xs), t(n)
            h = torch.zeros(len(xs), Wh.shape[0])
            for step in range(int(n.max())):
                new = torch.tanh(xs_[:, step] @ Wx_.T + h @ Wh_.T + b_)
                h = torch.where((step < n_)[:, None], new, h)
            return back(F.cross_entropy(h @ Wo_.T, t(label)), ps)

        def packed(xs, n, label, Wx, Wh, b, Wo):
            from torch.nn.utils.rnn import pack_padded_sequence
            ps = params((Wx, Wh, b, Wo))
            Wx_, Wh_, b_, Wo_ = ps
            # nn.RNN's own weights are leaves: its cell is tanh(W_ih x + b_ih + W_hh h
            # + b_hh), the same with b_ih = b, b_hh = 0 (functional_call keeps ours)
            rnn = torch.nn.RNN(Wx.shape[1], Wh.shape[0], batch_first=True)
            packed_in = pack_padded_sequence(t(xs), t(n), batch_first=True,
                                             enforce_sorted=False)
            _, hn = torch.func.functional_call(
                rnn, {"weight_ih_l0": Wx_, "weight_hh_l0": Wh_, "bias_ih_l0": b_,
                      "bias_hh_l0": torch.zeros_like(b_)}, (packed_in,))
            return back(F.cross_entropy(hn[0] @ Wo_.T, t(label)), ps)
        yield "torch padded + masked", padded
        yield "torch nn.RNN pack_padded_sequence", packed
    elif name == "early exit":
        def masked(x, label, Ws, bs, Wc, bc, thr):
            ps = params((Ws, bs, Wc, bc))
            Ws_, bs_, Wc_, bc_ = ps
            h = t(x)
            z_exit = h @ Wc_.T + bc_
            done = torch.zeros(len(x), dtype=torch.bool)
            for layer in range(len(Ws)):
                new = h + torch.relu(h @ Ws_[layer].T + bs_[layer])
                h = torch.where(done[:, None], h, new)
                z = h @ Wc_.T + bc_
                z_exit = torch.where(done[:, None], z_exit, z)
                with torch.no_grad():
                    e = torch.exp(z - z.max(dim=1, keepdim=True).values)
                    done = done | (e.max(dim=1).values / e.sum(dim=1) > t(thr))
                if bool(done.all()):
                    break
            return back(F.cross_entropy(z_exit, t(label)), ps)
        yield "torch masked", masked
    elif name == "dp-sgd":
        def forward(x, W1, b1, W2, b2):
            return torch.tanh(x @ W1.T + b1) @ W2.T + b2

        def one(ws, x, label):
            return F.cross_entropy(forward(x[None], *ws), label[None])

        def clipped(x, label, W1, b1, W2, b2, clip):
            ps = tuple(t(w) for w in (W1, b1, W2, b2))
            loss = F.cross_entropy(forward(t(x), *ps), t(label))
            gs = vmap(grad(one), in_dims=(None, 0, 0))(ps, t(x), t(label))
            norm = torch.sqrt(sum((g.reshape(len(x), -1) ** 2).sum(1) for g in gs))
            scale = torch.clamp(clip / norm, max=1.0)
            return (float(loss),) + tuple(
                (g * scale.reshape((-1,) + (1,) * (g.dim() - 1))).sum(0).numpy() for g in gs)
        yield "torch.func vmap(grad) + clipping", clipped
    elif name == "digits":
        def forward(x, W, b, V, c):
            h = F.max_pool2d(torch.relu(F.conv2d(x, W, b)), 2)
            return h.reshape(len(x), -1) @ V.T + c

        def batched(x, label, W, b, V, c):
            ps = params((W, b, V, c))
            return back(F.cross_entropy(forward(t(x), *ps), t(label)), ps)

        def one(ws, x, label):
            return F.cross_entropy(forward(x[None], *ws), label[None])

        def per_example(x, label, W, b, V, c):
            ps = tuple(t(w) for w in (W, b, V, c))
            loss = F.cross_entropy(forward(t(x), *ps), t(label))
            gs = vmap(grad(one), in_dims=(None, 0, 0))(ps, t(x), t(label))
            return (float(loss),) + tuple(g.mean(0).numpy() for g in gs)
        yield "torch batched autograd", batched
        yield "torch.func vmap(grad)", per_example
