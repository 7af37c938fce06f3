"""European call prices by Black-Scholes, one lane per option (float64, math.erf).

    python examples/black_scholes.py [--options 1000000]
"""

import argparse
import math
import time

import numpy as np

import hydra

RATE = 0.02
VOLATILITY = 0.30


def normal_cdf(x):
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def call_price(spot, strike, years):
    """The price of a European call: spot and strike prices, time to expiry in years."""
    sqrt_t = math.sqrt(years)
    d1 = (math.log(spot / strike) + (RATE + 0.5 * VOLATILITY * VOLATILITY) * years) / (
        VOLATILITY * sqrt_t)
    d2 = d1 - VOLATILITY * sqrt_t
    return spot * normal_cdf(d1) - strike * math.exp(-RATE * years) * normal_cdf(d2)


kernel = hydra.compile(call_price, varying=("spot", "strike", "years"))


def market(n: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    return (rng.uniform(10.0, 200.0, n), rng.uniform(10.0, 200.0, n), rng.uniform(0.1, 3.0, n))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--options", type=int, default=1_000_000)
    args = parser.parse_args()
    spot, strike, years = market(args.options)
    start = time.perf_counter()
    prices = kernel(spot, strike, years)
    elapsed = time.perf_counter() - start
    check = [call_price(spot[i], strike[i], years[i]) for i in range(min(1000, args.options))]
    err = float(np.max(np.abs(prices[: len(check)] - np.array(check))))
    print(f"{args.options} options: mean price {prices.mean():.4f}, "
          f"max |hydra - plain Python| over the first {len(check)} = {err:.2e}")
    print(f"{elapsed:.3f} s on the {kernel.backend_name} backend (compile included)")


if __name__ == "__main__":
    main()
