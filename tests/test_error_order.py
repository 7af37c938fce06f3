"""Run-time errors are deterministic (SPEC section 6): the same exception, line and
lane on every run and with any number of threads, the one the numpy backend reports
(the first failing statement in lockstep order, its lowest lane), and the stores of
every statement before it have landed.  The cpu backend used to report whichever gang
failed first, and its gangs skipped the rest of the phase after an error."""

import inspect

import numpy as np
import pytest

import hydra
from conftest import BACKENDS
from hydra import lane

LANES = 8192  # enough gangs for the cpu backend's thread team


def configurations():
    for backend in BACKENDS:
        if backend == "cpu":
            for threads in (1, 2, 4):
                yield backend, {"threads": threads}
        else:
            yield backend, {}


CONFIGS = list(configurations())
IDS = [f"{b}-{o.get('threads', '')}" for b, o in CONFIGS]


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, ln in enumerate(lines) if text in ln)


def between(out1, out2, bad):
    out1[lane()] = 1.0
    assert lane() % 1000 != bad
    out2[lane()] = 1.0


def two_statements(out, a, b):
    out[lane()] = 1.0
    assert lane() < a, "first"  # fails on the high lanes only
    assert lane() > b, "second"  # would fail on lane 0, but comes later in lockstep


def in_a_loop(out):
    i = 0
    while i < 100:
        out[lane()] = i
        if i == 60 - lane():
            assert lane() % 7 != 3, "late lanes fail early"
        i += 1


def then_forever(out, bad):
    out[lane()] = 1.0
    assert lane() != bad
    i = 0
    while lane() != bad:  # every other lane would loop forever, after the failure
        i += 1
        if i > 1_000_000:  # ... almost: a test that fails does not hang
            out[lane()] = -1.0
            break


def lanes_for(backend: str) -> int:
    return 64 if backend == "cuda" else LANES


def expect(fn, backend, options, args, lanes):
    """The error (type, lane, line) of a run, run three times: always the same."""
    seen = set()
    k = hydra.compile(fn, lanes=lanes, backend=backend, **options)
    for _ in range(3):
        with pytest.raises(hydra.HydraError) as info:
            k(*args)
        seen.add((type(info.value), info.value.lane, info.value.loc.line))
    assert len(seen) == 1, seen
    return seen.pop()


@pytest.mark.parametrize("backend, options", CONFIGS, ids=IDS)
def test_lowest_lane_and_earlier_stores(backend, options):
    n = lanes_for(backend)
    out1, out2 = np.zeros(n), np.zeros(n)
    kind, failed, line = expect(between, backend, options, (out1, out2, 37), n)
    assert (kind, failed, line) == (hydra.errors.KernelAssertionError, 37,
                                    line_of(between, "assert"))
    if backend != "cuda":  # cuda may drop its device copies of host arrays (the guide)
        np.testing.assert_array_equal(out1, np.ones(n))  # the statement before: all lanes


@pytest.mark.parametrize("backend, options", CONFIGS, ids=IDS)
def test_first_failing_statement_in_lockstep_order(backend, options):
    n = lanes_for(backend)
    _, failed, line = expect(two_statements, backend, options, (np.zeros(n), n - 9, 0), n)
    assert (failed, line) == (n - 9, line_of(two_statements, '"first"'))


@pytest.mark.parametrize("backend, options", CONFIGS, ids=IDS)
def test_first_failing_iteration(backend, options):
    n = lanes_for(backend)
    # lanes 3, 10, ..., 59 fail at iterations 57, 50, ..., 1: lane 59 first
    _, failed, _ = expect(in_a_loop, backend, options, (np.zeros(n),), n)
    assert failed == 59


@pytest.mark.parametrize("backend, options", [c for c in CONFIGS if c[0] != "cuda"],
                         ids=[i for i in IDS if not i.startswith("cuda")])
def test_lanes_stop_after_another_lanes_failure(backend, options):
    """The failure is in the first gang, which the cpu backend starts first: the other
    gangs leave their loops once it is recorded.  (A failure found only after another
    gang entered an endless loop cannot stop it: the guide says so.  Not on cuda: one
    kernel launch runs every lane to its end.)"""
    n = lanes_for(backend)
    out = np.zeros(n)
    _, failed, _ = expect(then_forever, backend, options, (out, 0), n)
    assert failed == 0 and not (out < 0).any()
