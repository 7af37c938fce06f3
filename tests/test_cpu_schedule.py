"""The cpu backend starts no thread team for work one core finishes in well under a
millisecond (issue 11, item 14): the decision, not a time, is tested here; the timings
are in bench/RESULTS.md (bench/threads_cutoff.py)."""

import math

import numba
import numpy as np
import pytest

import hydra
from hydra import lane
from hydra.backends import available
from hydra.backends.cpu import schedule
from hydra.backends.cpu.driver import Driver

pytestmark = pytest.mark.skipif(not available("cpu"), reason="no cpu backend")


def tiny(x, out):
    out[lane()] = x * 2.0 + 1.0


def looping(x, n, out):
    s = x
    for _ in range(n):
        s = s * 0.5 + 1.0
    out[lane()] = s


def with_math(x, out):
    out[lane()] = math.exp(x) * 2.0 + 1.0


@pytest.fixture
def threads_used(monkeypatch):
    """The threads each phase run was given."""
    seen = []
    real = Driver.run

    def run(self, n, args, err, threads, one_gang=False):
        seen.append(threads)
        return real(self, n, args, err, threads, one_gang)
    monkeypatch.setattr(Driver, "run", run)
    return seen


def phase_costs(kernel):
    _, runner = next(iter(kernel._cache.values()))
    return [s.cost for s in runner.__self__.steps if hasattr(s, "cost")]


def test_a_tiny_kernel_on_a_few_thousand_lanes_runs_on_one_thread(threads_used):
    k = hydra.compile(tiny, varying="x", backend="cpu", threads=4)
    x = np.arange(4000.0)
    out = np.zeros(4000)
    k(x, out)
    np.testing.assert_array_equal(out, x * 2 + 1)
    assert threads_used == [1]
    (cost,) = phase_costs(k)
    assert 4000 * cost < schedule.SERIAL_BELOW_NS


def test_enough_work_keeps_the_team(threads_used):
    team = min(4, numba.config.NUMBA_NUM_THREADS)
    k = hydra.compile(tiny, varying="x", backend="cpu", threads=4)
    n = 2_000_000
    k(np.zeros(n), np.zeros(n))
    (cost,) = phase_costs(k)
    assert n * cost >= schedule.SERIAL_BELOW_NS
    assert threads_used == [team]


def test_a_loop_makes_the_cost_unknown_and_keeps_the_team(threads_used):
    team = min(4, numba.config.NUMBA_NUM_THREADS)
    k = hydra.compile(looping, varying="x", backend="cpu", threads=4)
    k(np.zeros(4000), 3, np.zeros(4000))
    assert phase_costs(k) == [None]
    assert threads_used == [team]


def test_math_functions_weigh_more_than_arithmetic():
    x, out = np.zeros(64), np.zeros(64)
    plain = hydra.compile(tiny, varying="x", backend="cpu")
    expo = hydra.compile(with_math, varying="x", backend="cpu")
    plain(x, out)
    expo(x, out)
    (a,), (b,) = phase_costs(plain), phase_costs(expo)
    assert b - a >= (schedule.MATH_OPS - 1) * schedule.NS_PER_OP


@pytest.mark.parametrize("lanes, threads, cost, chosen", [
    (4000, 8, 1.0, 1),          # 4 us of work: one thread
    (10**6, 8, 1.0, 8),         # 1 ms: the team
    (10**6, 8, None, 8),        # unknown (a loop): the team
    (50, 1, 1.0, 1),
    (99_999, 2, 1.0, 1),
    (100_000, 2, 1.0, 2),
])
def test_threads_for(lanes, threads, cost, chosen):
    assert schedule.SERIAL_BELOW_NS == 100_000
    assert schedule.threads_for(lanes, threads, cost) == chosen
