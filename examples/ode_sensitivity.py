"""Sensitivities of an adaptive ODE solver: the gradient of the final state with
respect to the model's parameters, through the solver's own step-size control.

Lotka-Volterra (``x' = a x - b x y``, ``y' = -c y + d x y``) integrated to ``T`` by
Bogacki-Shampine's embedded Runge-Kutta 3(2) pair with an error controller: each lane
one initial condition, each lane its own accepted and rejected steps (a ``while``
whose trip count depends on the lane's data).  ``hydra.grad`` differentiates the
program as it ran on each lane (discretize-then-differentiate): the step sizes the
controller chose are part of it, so it agrees with central finite differences of the
same solver to rounding wherever a small change of the parameters leaves the lane's
accept/reject pattern as it was.

Peers: JAX's reverse mode refuses this loop written with ``lax.while_loop`` ("Reverse-
mode differentiation does not work for lax.while_loop or lax.fori_loop with dynamic
start/stop values"); diffrax differentiates its adaptive solvers only with a declared
``max_steps`` and checkpointing (``RecursiveCheckpointAdjoint``); ``torch.func.vmap``
refuses the data-dependent control flow.  Where jax is importable the script runs the
same solver (``rk_step`` in a ``lax.while_loop``, ``jax_solve``) forward, checks it
against ``solve``, and shows ``jax.grad``'s error.

    python examples/ode_sensitivity.py [--lanes 256] [--backend cpu|numpy]
"""

import argparse
import importlib.util
import time

import numpy as np

import hydra

T_END = 5.0


def rk_step(x, y, h, a, b, c, d):
    """One Bogacki-Shampine 3(2) step of size ``h`` from (x, y): the third-order state
    and the embedded error estimate, (nx, ny, ex, ey).  Arithmetic only: the JAX port
    (``jax_solve``) runs the same function on its tracers."""
    k1x, k1y = a * x - b * x * y, -c * y + d * x * y
    x2, y2 = x + 0.5 * h * k1x, y + 0.5 * h * k1y
    k2x, k2y = a * x2 - b * x2 * y2, -c * y2 + d * x2 * y2
    x3, y3 = x + 0.75 * h * k2x, y + 0.75 * h * k2y
    k3x, k3y = a * x3 - b * x3 * y3, -c * y3 + d * x3 * y3
    nx = x + h * (2.0 * k1x + 3.0 * k2x + 4.0 * k3x) / 9.0
    ny = y + h * (2.0 * k1y + 3.0 * k2y + 4.0 * k3y) / 9.0
    k4x, k4y = a * nx - b * nx * ny, -c * ny + d * nx * ny
    ex = h * (-5.0 * k1x / 72.0 + k2x / 12.0 + k3x / 9.0 - k4x / 8.0)
    ey = h * (-5.0 * k1y / 72.0 + k2y / 12.0 + k3y / 9.0 - k4y / 8.0)
    return nx, ny, ex, ey


def solve(x0, y0, a, b, c, d):
    """(x(T_END), the number of steps, accepted and rejected) of one initial condition:
    Bogacki-Shampine 3(2) with an error controller, each lane its own steps."""
    x, y, t, h, n = x0, y0, 0.0, 0.05, 0
    while t < T_END:
        n += 1
        h = min(h, T_END - t)
        nx, ny, ex, ey = rk_step(x, y, h, a, b, c, d)
        err = max(abs(ex), abs(ey)) / 1e-6
        if err <= 1.0:  # accept the step
            x, y, t = nx, ny, t + h
        h = h * min(4.0, max(0.2, 0.9 * (1.0 / max(err, 1e-10)) ** (1.0 / 3.0)))
    return x, n


def final_x(x0, y0, a, b, c, d):
    """x(T_END) of one initial condition; the steps it took are the lane's own."""
    x, _ = solve(x0, y0, a, b, c, d)
    return x


def steps_of(x0, y0, a, b, c, d):
    """How many steps (accepted and rejected) the solver takes from (x0, y0)."""
    return solve(x0, y0, a, b, c, d)[1]


PARAMS = (1.1, 0.4, 0.4, 0.1)
sensitivities = hydra.value_and_grad(final_x, argnums=(2, 3, 4, 5))


def finite_differences(x0, y0, params, eps=1e-6):
    """Central differences of the plain Python solver, one parameter at a time."""
    out = []
    for i in range(4):
        up, down = list(params), list(params)
        up[i] += eps
        down[i] -= eps
        out.append((final_x(x0, y0, *up) - final_x(x0, y0, *down)) / (2 * eps))
    return np.array(out)


def jax_solve(x0, y0, a, b, c, d):
    """``solve`` ported to JAX: the same steps (``rk_step``) in a ``lax.while_loop``, the
    natural port of a loop whose trip count depends on the data; (x(T_END), steps)."""
    import jax.numpy as jnp
    from jax import lax

    def trip(s):
        x, y, t, h, n = s
        h = jnp.minimum(h, T_END - t)
        nx, ny, ex, ey = rk_step(x, y, h, a, b, c, d)
        err = jnp.maximum(jnp.abs(ex), jnp.abs(ey)) / 1e-6
        ok = err <= 1.0
        x, y, t = jnp.where(ok, nx, x), jnp.where(ok, ny, y), jnp.where(ok, t + h, t)
        grow = 0.9 * (1.0 / jnp.maximum(err, 1e-10)) ** (1.0 / 3.0)
        return x, y, t, h * jnp.minimum(4.0, jnp.maximum(0.2, grow)), n + 1
    x0 = jnp.asarray(x0)
    start = (x0, jnp.asarray(y0, x0.dtype), jnp.zeros_like(x0), jnp.full_like(x0, 0.05),
             jnp.asarray(0))
    x, _, _, _, n = lax.while_loop(lambda s: s[2] < T_END, trip, start)
    return x, n


def jax_peer(x0, y0, lanes=4) -> dict:
    """JAX on the same problem, where installed: the forward of ``jax_solve`` (float64)
    on ``lanes`` initial conditions against ``solve``, then ``jax.grad`` of it with
    respect to the parameters, which JAX refuses.  {"line": what to print, and where jax
    ran: "forward": max relative difference of x(T), "steps": same step counts,
    "error": JAX's error, or None if it differentiated the loop}."""
    if importlib.util.find_spec("jax") is None:
        return {"line": "jax is not installed here: its refusal is not shown"}
    import jax
    with jax.enable_x64(True):
        xs, ns = jax.jit(jax.vmap(jax_solve, in_axes=(0, 0, None, None, None, None)))(
            x0[:lanes], y0[:lanes], *PARAMS)
        want = [solve(x0[i], y0[i], *PARAMS) for i in range(lanes)]
        forward = float(max(abs(float(xs[i]) - w[0]) / abs(w[0]) for i, w in enumerate(want)))
        steps = all(int(ns[i]) == w[1] for i, w in enumerate(want))
        try:
            jax.grad(lambda p: jax_solve(x0[0], y0[0], *p)[0])(jax.numpy.array(PARAMS))
            error = None
        except Exception as e:  # noqa: BLE001 (the peer's own error, shown as it is)
            error = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    line = (f"JAX {jax.__version__}, the same solver as lax.while_loop: forward agrees on "
            f"{lanes} lanes (max rel. diff. {forward:.1e}, same step counts: {steps}); "
            + (f"jax.grad refuses it: {error}" if error else "jax.grad differentiated it"))
    return {"line": line, "forward": forward, "steps": steps, "error": error}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lanes", type=int, default=256)
    parser.add_argument("--backend", default="cpu", choices=("cpu", "numpy"))
    parser.add_argument("--check", type=int, default=16, help="lanes checked by differences")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    x0, y0 = rng.uniform(2.0, 6.0, args.lanes), rng.uniform(1.0, 4.0, args.lanes)
    kernel = hydra.compile(sensitivities, varying=("x0", "y0"), backend=args.backend)
    forward = hydra.compile(final_x, varying=("x0", "y0"), backend=args.backend)
    value, grads = kernel(x0, y0, *PARAMS)
    forward(x0, y0, *PARAMS)  # compiled before it is timed
    t0 = time.perf_counter()
    kernel(x0, y0, *PARAMS)
    t_grad = time.perf_counter() - t0
    t0 = time.perf_counter()
    forward(x0, y0, *PARAMS)
    t_fwd = time.perf_counter() - t0
    grads = np.stack(grads, axis=1)
    steps = np.array([steps_of(x0[i], y0[i], *PARAMS) for i in range(args.lanes)])
    worst = 0.0
    for i in range(min(args.check, args.lanes)):
        fd = finite_differences(x0[i], y0[i], PARAMS)
        worst = max(worst, float(np.max(np.abs(grads[i] - fd) / (np.abs(fd) + 1e-3))))
    print(f"{args.lanes} initial conditions, Bogacki-Shampine 3(2) to T={T_END}: "
          f"{steps.min()}..{steps.max()} steps per lane (mean {steps.mean():.1f})")
    print(f"d x(T) / d (a, b, c, d) of lane 0: {np.array2string(grads[0], precision=5)}")
    print(f"against central differences ({min(args.check, args.lanes)} lanes): max "
          f"relative difference {worst:.1e}")
    print(f"forward {t_fwd * 1e3:.1f} ms, value and gradient {t_grad * 1e3:.1f} ms "
          f"({args.backend})")
    jax = jax_peer(x0, y0)
    print(jax["line"])
    return {"worst": worst, "steps": steps, "grads": grads, "value": value, "jax": jax}


if __name__ == "__main__":
    main()
