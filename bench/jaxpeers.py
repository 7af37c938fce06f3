"""The JAX peers of ``bench/grad.py`` and ``bench/cnn.py``, in one place: the same losses
and networks as hydra's and PyTorch's rows, on JAX's CPU backend (XLA), given the same
NumPy weights and inputs, returning NumPy arrays in hydra's order so that the caller
checks them against hydra's results.

- ``grad_peers(name)``: training steps of ``bench/grad.py``'s workloads: ``jit(grad)`` of
  the batched mean loss and ``jit(vmap(grad))`` (per-example gradients, then their mean)
  for the MLP and the digits CNN; the ragged RNN as a ``lax.scan`` over the padded length
  with the state masked past each sequence's end; early exit rewritten as
  ``fori_loop(0, layers)`` + ``where`` (differentiable), and its natural ``while_loop``
  port, whose reverse mode JAX refuses (the row shows the error); DP-SGD as
  ``jit(vmap(grad))`` + per-example clipping.  Each step returns (mean loss, mean
  gradients...), or for DP-SGD (mean loss, sums of the clipped gradients...).
- ``cnn_forward(layers, threads, split)``: ``jit(vmap)`` of a per-image network
  described by ``bench/cnn.py``'s layer list (conv + relu, max-pool, dense); ``split``:
  its convolutions and its dense layers as two ``jit(vmap)`` calls.

JAX is optional (the ``peers`` extra): where it is not importable every function here
says so (``missing()``) and yields no rows.  Threads: XLA's CPU thread pool is made when
jax is imported, so the thread count is fixed then: ``configure(1)`` before the first
import sets ``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1`` (one thread; checked on this machine: CPU time equals
wall time for a large matmul), anything else leaves XLA its default pool (every core).
A later ``configure`` with another count cannot change it: ``thread_mismatch`` says so.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np

ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
_imported_for: list[int] = []  # the thread count XLA's pool was made for (at import)


def missing() -> str | None:
    """Why there are no JAX rows here, or None where jax is importable."""
    if importlib.util.find_spec("jax") is None:
        return "jax not installed (pip install -e '.[peers]'): no JAX rows"
    return None


def configure(threads: int):
    """Import jax with XLA's CPU pool for ``threads`` (1, or any other count = every
    core); the module, or None where jax is missing."""
    if missing():
        return None
    if not _imported_for:
        flags = os.environ.get("XLA_FLAGS", "")
        if threads == 1 and "jax" not in sys.modules and "multi_thread_eigen" not in flags:
            os.environ["XLA_FLAGS"] = flags = f"{flags} {ONE_THREAD}".strip()
        # (jax imported already, by someone else: its pool is what the flags said then)
        _imported_for.append(1 if "multi_thread_eigen=false" in flags else 0)
    import jax
    return jax


def thread_mismatch(threads: int) -> str | None:
    """A line saying why JAX cannot run on ``threads`` in this process, or None."""
    if _imported_for and _imported_for[0] != (1 if threads == 1 else 0):
        was = "one thread" if _imported_for[0] == 1 else "every core"
        return (f"jax: XLA's pool was made for {was} when jax was imported in this process;"
                f" run --threads {threads} on its own")
    return None


def describe(threads: int) -> str:
    """Versions and the thread setting, for a bench's header."""
    jax = configure(threads)
    if jax is None:
        return missing()
    import jaxlib
    # the pool jax was imported with (which may not be ``threads``': thread_mismatch)
    pool = f"one thread (XLA_FLAGS={os.environ.get('XLA_FLAGS')})" if _imported_for[0] == 1 \
        else "XLA's default pool"
    return f"jax {jax.__version__}, jaxlib {jaxlib.__version__}, CPU, {pool}"


def _xent(jnp, jax, z, label):
    """Softmax cross-entropy of logits ``z`` [..., classes] against int ``label`` [...]."""
    return jax.nn.logsumexp(z, axis=-1) - jnp.take_along_axis(z, label[..., None], -1)[..., 0]


def _out(loss, grads):
    return (float(loss),) + tuple(np.asarray(g) for g in grads)


def _mean_and_per_example(jax, loss_batched, loss_one, nweights):
    """(jit(grad) of the batched mean loss, jit(vmap(grad)) then the gradients' mean) as
    steps over (x, label, *weights)."""
    batched = jax.jit(jax.value_and_grad(loss_batched))

    @jax.jit
    def per_example(ws, x, label):
        losses, gs = jax.vmap(jax.value_and_grad(loss_one), in_axes=(None, 0, 0))(ws, x, label)
        return losses.mean(), [g.mean(0) for g in gs]

    def step_batched(x, label, *ws):
        return _out(*batched(list(ws[:nweights]), x, label.astype(np.int32)))

    def step_per_example(x, label, *ws):
        return _out(*per_example(list(ws[:nweights]), x, label.astype(np.int32)))
    return step_batched, step_per_example


def grad_peers(name: str, threads: int | None = None):
    """(row name, step) of the JAX peers of ``bench/grad.py``'s workload ``name``; the
    steps take that workload's NumPy arguments."""
    if threads is None:
        threads = 1 if os.environ.get("HYDRA_THREADS") == "1" else 0
    jax = configure(threads)
    if jax is None:
        return
    import jax.numpy as jnp
    from jax import lax

    def xent(z, label):
        return _xent(jnp, jax, z, label)

    if name == "mlp":
        def logits(x, W1, b1, W2, b2, W3, b3):
            h = jnp.tanh(x @ W1.T + b1)
            h = jax.nn.relu(h @ W2.T + b2)
            return h @ W3.T + b3

        def loss_batched(ws, x, label):
            return xent(logits(x, *ws), label).mean()

        def loss_one(ws, x, label):
            return xent(logits(x, *ws), label)
        batched, per_example = _mean_and_per_example(jax, loss_batched, loss_one, 6)
        yield "jax jit(grad) of the batched mean loss", batched
        yield "jax jit(vmap(grad))", per_example
    elif name == "digits":
        def logits(x, W, b, V, c):  # x [images, 1, 10, 10] (padded): conv 3x3 valid
            y = lax.conv_general_dilated(x, W, (1, 1), "VALID",
                                         dimension_numbers=("NCHW", "OIHW", "NCHW"))
            y = jax.nn.relu(y + b[None, :, None, None])
            y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
            return y.reshape(y.shape[0], -1) @ V.T + c

        def loss_batched(ws, x, label):
            return xent(logits(x, *ws), label).mean()

        def loss_one(ws, x, label):
            return xent(logits(x[None], *ws)[0], label)
        batched, per_example = _mean_and_per_example(jax, loss_batched, loss_one, 4)
        yield "jax jit(grad) of the batched mean loss", batched
        yield "jax jit(vmap(grad))", per_example
    elif name == "rnn":
        def loss(ws, xs, n, label):
            Wx, Wh, b, Wo = ws

            def trip(h, inp):
                x_t, t = inp
                new = jnp.tanh(x_t @ Wx.T + h @ Wh.T + b)
                return jnp.where((t < n)[:, None], new, h), None
            h0 = jnp.zeros((xs.shape[0], Wh.shape[0]), xs.dtype)
            h, _ = lax.scan(trip, h0, (jnp.swapaxes(xs, 0, 1), jnp.arange(xs.shape[1])))
            return xent(h @ Wo.T, label).mean()
        scan_grad = jax.jit(jax.value_and_grad(loss))

        def padded(xs, n, label, Wx, Wh, b, Wo):
            # the padded length as the peers' (the longest sequence): a static shape
            steps = int(np.max(n))
            return _out(*scan_grad([Wx, Wh, b, Wo], xs[:, :steps], n.astype(np.int32),
                                   label.astype(np.int32)))
        yield "jax lax.scan over the padded length, masked, jit(grad)", padded
    elif name == "early exit":
        def confident(z, thr):
            e = jnp.exp(z - z.max())
            return e.max() / e.sum() > thr

        def loss_fori(ws, x, label, thr):
            Ws, bs, Wc, bc = ws

            def layer(l, s):  # noqa: E741
                h, z, done = s
                new = h + jax.nn.relu(Ws[l] @ h + bs[l])
                h = jnp.where(done, h, new)
                zl = Wc @ h + bc
                return h, jnp.where(done, z, zl), done | confident(zl, thr)
            _, z, _ = lax.fori_loop(0, Ws.shape[0], layer, (x, Wc @ x + bc, jnp.array(False)))
            return xent(z, label)

        def loss_while(ws, x, label, thr):
            Ws, bs, Wc, bc = ws

            def layer(s):
                h, z, l, _ = s  # noqa: E741
                h = h + jax.nn.relu(Ws[l] @ h + bs[l])
                z = Wc @ h + bc
                return h, z, l + 1, confident(z, thr)
            _, z, _, _ = lax.while_loop(lambda s: (s[2] < Ws.shape[0]) & ~s[3], layer,
                                        (x, Wc @ x + bc, 0, jnp.array(False)))
            return xent(z, label)

        def mean_of(loss_one):
            def mean(ws, x, label, thr):
                return jax.vmap(loss_one, in_axes=(None, 0, 0, 0))(ws, x, label, thr).mean()
            return jax.jit(jax.value_and_grad(mean))
        fori, natural = mean_of(loss_fori), mean_of(loss_while)

        def step(fn):
            def run(x, label, Ws, bs, Wc, bc, thr):
                return _out(*fn([Ws, bs, Wc, bc], x, label.astype(np.int32), thr))
            return run
        yield "jax fori_loop(0, 8) + where, jit(grad)", step(fori)
        yield "jax while_loop (natural port), jit(grad)", step(natural)
    elif name == "dp-sgd":
        def loss_one(ws, x, label):
            W1, b1, W2, b2 = ws
            return xent(jnp.tanh(W1 @ x + b1) @ W2.T + b2, label)

        @jax.jit
        def clipped(ws, x, label, clip):
            losses, gs = jax.vmap(jax.value_and_grad(loss_one), in_axes=(None, 0, 0))(
                ws, x, label)
            norm = jnp.sqrt(sum((g.reshape(g.shape[0], -1) ** 2).sum(1) for g in gs))
            scale = jnp.minimum(1.0, clip / jnp.maximum(norm, 1e-12))
            # the clipped sum as a contraction with the scales: XLA's column sum of
            # g * scale (PyTorch's form) took 3-4x longer here
            return losses.mean(), [jnp.tensordot(scale, g, axes=(0, 0)) for g in gs]

        def step(x, label, W1, b1, W2, b2, clip):
            return _out(*clipped([W1, b1, W2, b2], x, label.astype(np.int32),
                                 np.float32(clip)))
        yield "jax jit(vmap(grad)) + clipping", step


def cnn_forward(layers, threads: int, split: bool = False):
    """(function (x, params) -> logits as NumPy, None), or (None, why not): ``jit(vmap)``
    of the network for ONE image described by ``layers`` (``bench/cnn.py``'s ARCH
    entries: ("conv", O, C, k, padding) with relu, ("pool", k), ("dense", out, in,
    relu)).  ``split``: the convolutional part and the dense layers as two ``jit(vmap)``
    calls, one after the other: jaxlib 0.10.2 on this CPU makes VGG-19's last pool and
    its three dense layers one YNN fusion that takes ~15 s per image (the convolutions
    ~0.4 s), and the split keeps them apart."""
    why = missing() or thread_mismatch(threads)
    if why:
        return None, why
    jax = configure(threads)
    if split:
        cut = next(i for i, layer in enumerate(layers) if layer[0] == "dense")
        nconv = 2 * sum(1 for layer in layers[:cut] if layer[0] != "pool")
        (features, _), (classifier, _) = (cnn_forward(layers[:cut], threads),
                                          cnn_forward(layers[cut:], threads))
        return (lambda x, params: classifier(features(x, params[:nconv]),
                                             params[nconv:])), None
    import jax.numpy as jnp
    from jax import lax

    def one(x, params):  # x [C, H, W] (or the features the dense layers flatten)
        it = iter(params)
        h = x[None]
        for layer in layers:
            if layer[0] == "conv":
                w, b, p = next(it), next(it), layer[4]
                h = lax.conv_general_dilated(h, w, (1, 1), [(p, p), (p, p)],
                                             dimension_numbers=("NCHW", "OIHW", "NCHW"))
                h = jax.nn.relu(h + b[None, :, None, None])
            elif layer[0] == "pool":
                k = layer[1]
                h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, k, k), (1, 1, k, k),
                                      "VALID")
            else:
                w, b = next(it), next(it)
                h = h.reshape(-1) @ w.T + b
                if layer[3]:
                    h = jax.nn.relu(h)
        return h

    f = jax.jit(jax.vmap(one, in_axes=(0, None)))
    return (lambda x, params: np.asarray(f(x, list(params)))), None
