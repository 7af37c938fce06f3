"""``python -m bench async``: asynchronous launches (SPEC section 9).

Two measurements, each the best of ``repeat`` runs (the overlap: of at least 10
interleaved rounds):

- **overlap**: two independent one-thread cpu launches of a ~0.2 s kernel, called one
  after the other, then submitted together and waited for; on two free cores the
  submitted pair should take about the time of one;
- **per-launch overhead**: 10,000 launches of a tiny kernel (8 lanes, one store), as
  plain calls with nothing outstanding (and, to show what that check costs, the call
  path without it), as plain calls while a launch is outstanding
  (they go through the dependency tracking), as ``submit(...).result()`` one at a time,
  and as 10,000 submits then one ``hydra.wait()`` (independent arrays, and one array:
  a chain of write-after-write dependencies); and JAX's asynchronous dispatch of a
  jitted tiny function where jax is importable.
"""

from __future__ import annotations

import time

import numpy as np

import hydra
from hydra import lane

N_TINY = 10_000


def churn(a, n):
    i = lane()
    x = a[i]
    for _ in range(n):
        x = x * 0.5 + 1.0
    a[i] = x


def tiny(a, v):
    a[lane()] = v


def _best(fn, repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def overlap(repeat: int) -> list[tuple[str, float]]:
    """Best times of one launch, two in turn and two submitted together, timed in
    interleaved rounds (at least 10) so that a disturbance of the machine hits all three
    alike."""
    k = hydra.compile(churn, lanes=8, backend="cpu", threads=1)
    a, b = np.ones(8), np.ones(8)
    n = 60_000_000

    def sequential():
        k(a, n)
        k(b, n)

    def submitted():
        f, g = k.submit(a, n), k.submit(b, n)
        f.result(), g.result()
    ways = {"one launch": lambda: k(a, n), "two, called in turn": sequential,
            "two, submitted together": submitted}
    best = dict.fromkeys(ways, float("inf"))
    sequential()
    for _ in range(max(repeat, 10)):
        for label, fn in ways.items():
            t = time.perf_counter()
            fn()
            best[label] = min(best[label], time.perf_counter() - t)
    return list(best.items())


def overhead(backend: str, repeat: int) -> list[tuple[str, float]]:
    """Seconds per launch of the tiny kernel, in each way of launching it."""
    k = hydra.compile(tiny, lanes=8, backend=backend)
    arrays = [np.zeros(8) for _ in range(64)]
    slow = hydra.compile(churn, lanes=8, backend="cpu", threads=1)

    def plain():
        for i in range(N_TINY):
            k(arrays[i & 63], 1.0)

    def bare():  # what a call did before asynchronous launches existed
        for i in range(N_TINY):
            k._run(k._prepare((arrays[i & 63], 1.0)))

    def submit_result():
        for i in range(N_TINY):
            k.submit(arrays[i & 63], 1.0).result()

    def submit_all_independent():
        for i in range(N_TINY):
            k.submit(arrays[i & 63], 1.0)
        hydra.wait()

    def submit_all_chain():
        a = arrays[0]
        for _ in range(N_TINY):
            k.submit(a, 1.0)
        hydra.wait()
    rows = [("call without the dataflow check", _best(bare, repeat)),
            ("plain call, nothing outstanding", _best(plain, repeat))]
    if backend == "cpu":
        rows.append(("plain call, a launch outstanding", _outstanding(plain, slow)))
    rows += [("submit(...).result(), one by one", _best(submit_result, repeat)),
             ("10,000 submits, independent, wait()", _best(submit_all_independent, repeat)),
             ("10,000 submits, one array (chain), wait()", _best(submit_all_chain, repeat))]
    return [(label, t / N_TINY) for label, t in rows]


def _outstanding(plain, slow) -> float:
    """``plain`` timed while a long launch (about a second, on the other core, touching
    none of its arrays) is outstanding; nan if the launch ended first."""
    busy = np.ones(8)
    f = slow.submit(busy, 300_000_000)
    t = time.perf_counter()
    plain()
    took = time.perf_counter() - t
    still = not f.done()
    f.result()
    return took if still else float("nan")


def jax_dispatch(repeat: int) -> float | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    f = jax.jit(lambda a, v: a.at[jnp.arange(8)].set(v))
    a = jnp.zeros(8)

    def run():
        x = a
        for _ in range(N_TINY):
            x = f(x, 1.0)
        x.block_until_ready()
    return _best(run, repeat) / N_TINY


def main(repeat: int = 3) -> None:
    import numba
    print(f"# async launches: {numba.config.NUMBA_NUM_THREADS} cores, "
          f"threading layer {_layer()}")
    print("## overlap of two independent one-thread cpu launches (best of "
          f"{max(repeat, 10)} interleaved rounds)")
    rows = overlap(repeat)
    for label, t in rows:
        print(f"{label:34} {t * 1e3:9.1f} ms")
    one, seq, par = (t for _, t in rows)
    print(f"{'submitted / called in turn':34} {par / seq:9.2f}   (1.00 = no overlap, "
          f"0.50 = perfect on two cores)")
    for backend in ("cpu", "numpy"):
        print(f"## per-launch cost, {N_TINY} launches of an 8-lane one-store kernel, "
              f"{backend} backend (best of {repeat})")
        for label, t in overhead(backend, repeat):
            print(f"{label:44} {t * 1e6:9.1f} us")
    jt = jax_dispatch(repeat)
    if jt is None:
        print("## jax: not installed here; its async dispatch was not measured")
    else:
        print(f"## jax jit async dispatch, {N_TINY} calls then block_until_ready: "
              f"{jt * 1e6:.1f} us per call")


def _layer() -> str:
    import numba
    try:
        return numba.threading_layer()
    except ValueError:
        return "not started yet"
