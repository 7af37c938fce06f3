"""Black-Scholes Greeks by reverse mode: one option per lane, its price written once,
its delta, vega, rho and theta by ``hydra.value_and_grad`` (SPEC section 11), checked
against the closed forms; then a Monte Carlo pathwise delta (Broadie and Glasserman
1996): each lane one path of ``hydra.random.normal``, the derivative of its discounted
payoff by ``hydra.grad``, averaged with ``lanesum``, against the closed-form delta.

    python examples/greeks.py [--options 1000000] [--paths 1000000] [--backend cpu|numpy]
"""

import argparse
import math
import time

import numpy as np

import hydra
from hydra import lanesum, nlanes


def norm_cdf(x):
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def price_one(s, k, t, r, sigma):
    """A European call: spot ``s``, strike ``k``, years to expiry ``t``, rate ``r``,
    volatility ``sigma``."""
    d1 = (math.log(s / k) + (r + 0.5 * sigma * sigma) * t) / (sigma * math.sqrt(t))
    d2 = d1 - sigma * math.sqrt(t)
    return s * norm_cdf(d1) - k * math.exp(-r * t) * norm_cdf(d2)


#: (price, (delta, vega, rho, dV/dt)); theta is -dV/dt (time passing shortens t)
price_and_greeks = hydra.value_and_grad(price_one, argnums=(0, 4, 3, 2))


def price_kernel_fn(s, k, t, r, sigma):
    return price_one(s, k, t, r, sigma)


def greeks_fn(s, k, t, r, sigma):
    price, (delta, vega, rho, dt) = price_and_greeks(s, k, t, r, sigma)
    return price, delta, vega, rho, -dt


def closed_forms(s, k, t, r, sigma):
    """(price, delta, vega, rho, theta) of calls, NumPy, from the textbook formulas."""
    from scipy.special import ndtr
    sq = sigma * np.sqrt(t)
    d1 = (np.log(s / k) + (r + 0.5 * sigma ** 2) * t) / sq
    d2 = d1 - sq
    pdf = np.exp(-0.5 * d1 ** 2) / math.sqrt(2 * math.pi)
    disc = k * np.exp(-r * t)
    return (s * ndtr(d1) - disc * ndtr(d2), ndtr(d1), s * pdf * np.sqrt(t),
            t * disc * ndtr(d2), -s * pdf * sigma / (2 * np.sqrt(t)) - r * disc * ndtr(d2))


def market(n, seed=0):
    """``n`` options: spots, strikes and expiries per option; one rate and volatility."""
    rng = np.random.default_rng(seed)
    return (rng.uniform(50.0, 150.0, n), rng.uniform(60.0, 140.0, n),
            rng.uniform(0.1, 3.0, n), 0.03, 0.25)


def payoff_one(s, k, t, r, sigma, seed):
    """One Monte Carlo path's discounted call payoff (the lane's own normal draw)."""
    z = hydra.random.normal(seed, 0)
    st = s * math.exp((r - 0.5 * sigma * sigma) * t + sigma * math.sqrt(t) * z)
    return math.exp(-r * t) * max(st - k, 0.0)


pathwise = hydra.value_and_grad(payoff_one, argnums=0)


def mc_delta(s, k, t, r, sigma, seed):
    """(price, delta) of one call: each lane one path, averaged over the lanes."""
    v, d = pathwise(s, k, t, r, sigma, seed)
    return lanesum(v) / nlanes(), lanesum(d) / nlanes()


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--options", type=int, default=1_000_000)
    parser.add_argument("--paths", type=int, default=1_000_000)
    parser.add_argument("--backend", default="cpu", choices=("cpu", "numpy"))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    s, k, t, r, sigma = market(args.options)
    price = hydra.compile(price_kernel_fn, varying=("s", "k", "t"), backend=args.backend)
    greeks = hydra.compile(greeks_fn, varying=("s", "k", "t"), backend=args.backend)
    got = greeks(s, k, t, r, sigma)
    want = closed_forms(s, k, t, r, sigma)
    names = ("price", "delta", "vega", "rho", "theta")
    errors = {n: float(np.max(np.abs(g - w)) / max(float(np.max(np.abs(w))), 1e-30))
              for n, g, w in zip(names, got, want)}
    times = {"price": [], "greeks": []}
    for _ in range(args.repeat):
        for name, kernel in (("price", price), ("greeks", greeks)):
            t0 = time.perf_counter()
            kernel(s, k, t, r, sigma)
            times[name].append(time.perf_counter() - t0)
    best = {n: min(v) * 1e3 for n, v in times.items()}
    print(f"{args.options} options ({args.backend}): price {best['price']:.2f} ms, price + "
          f"delta, vega, rho, theta {best['greeks']:.2f} ms "
          f"({best['greeks'] / best['price']:.1f}x the price alone)")
    print("max relative difference from the closed forms: " +
          ", ".join(f"{n} {e:.1e}" for n, e in errors.items()))
    mc = hydra.compile(mc_delta, varying=(), lanes=args.paths, backend=args.backend)
    s0, k0, t0_, r0, v0 = 100.0, 105.0, 1.0, 0.03, 0.25
    mc_price, mc_d = mc(s0, k0, t0_, r0, v0, 7)
    exact = closed_forms(np.array([s0]), np.array([k0]), np.array([t0_]), r0, v0)
    print(f"Monte Carlo, {args.paths} paths (one per lane): price {mc_price:.4f} (closed "
          f"form {exact[0][0]:.4f}), pathwise delta {mc_d:.4f} (closed form "
          f"{exact[1][0]:.4f})")
    return {"errors": errors, "ratio": best["greeks"] / best["price"],
            "mc": (mc_price, mc_d), "exact": (float(exact[0][0]), float(exact[1][0]))}


if __name__ == "__main__":
    main()
