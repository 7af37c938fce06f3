"""Monte Carlo price of a European call option: one price path per lane, its normal
increments from ``hydra.random.normal`` (draw ``k`` of the lane's stream is step ``k``),
checked against the Black-Scholes closed form.

    python examples/mc_option.py [--paths 200000] [--steps 64] [--seed 2024]
"""

import argparse
import math
import time

import hydra
from hydra import lanesum, nlanes

S0, STRIKE, RATE, SIGMA, YEARS = 100.0, 105.0, 0.03, 0.25, 1.0


def payoff(steps, seed, lane=None):
    """One path of geometric Brownian motion in ``steps`` exact log-normal steps; the
    call's payoff at the end.  ``lane=`` only outside a kernel (plain Python)."""
    dt = YEARS / steps
    drift = (RATE - 0.5 * SIGMA * SIGMA) * dt
    vol = SIGMA * math.sqrt(dt)
    log_s = math.log(S0)
    for k in range(steps):
        log_s += drift + vol * hydra.random.normal(seed, k, lane=lane)
    return max(math.exp(log_s) - STRIKE, 0.0)


def price(steps, seed):
    """The discounted mean payoff over all lanes' paths and its standard error."""
    p = payoff(steps, seed)
    n = nlanes()
    mean = lanesum(p) / n
    var = lanesum((p - mean) * (p - mean)) / (n - 1)
    discount = math.exp(-RATE * YEARS)
    return discount * mean, discount * math.sqrt(var / n), p


def black_scholes_call(s, k, r, sigma, t):
    d1 = (math.log(s / k) + (r + 0.5 * sigma * sigma) * t) / (sigma * math.sqrt(t))
    d2 = d1 - sigma * math.sqrt(t)
    cdf = lambda x: 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))  # noqa: E731
    return s * cdf(d1) - k * math.exp(-r * t) * cdf(d2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paths", type=int, default=200_000)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args()
    kernel = hydra.compile(price, lanes=args.paths)
    start = time.perf_counter()
    mc, se, payoffs = kernel(args.steps, args.seed)
    elapsed = time.perf_counter() - start
    exact = black_scholes_call(S0, STRIKE, RATE, SIGMA, YEARS)
    print(f"{args.paths} paths of {args.steps} steps: call = {mc:.4f} +- {se:.4f} "
          f"(Black-Scholes {exact:.4f}, off by {abs(mc - exact) / se:.2f} standard errors)")
    print(f"within 3 standard errors: {abs(mc - exact) < 3 * se}")
    print(f"{elapsed:.3f} s on the {kernel.backend_name} backend (compile included)")
    lane = args.paths // 2  # its path again in plain Python: the same normals
    again = payoff(args.steps, args.seed, lane=lane)
    same = math.isclose(again, payoffs[lane], rel_tol=1e-12)  # exp, log: a few ulp apart
    print(f"plain Python agrees on lane {lane}: {same}")


if __name__ == "__main__":
    main()
