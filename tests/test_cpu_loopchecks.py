"""Induction variables of ``for i in range(start, stop)`` loops with a varying start or
stop (``cpu/loopchecks.py``): NumPy 2's range check of ``np.uint32(a * i + b)`` is
decided once per gang before the loop, and the cast comes from a 32-bit copy of ``i``.
Results and errors (kind, lane, message) stay those of the numpy backend and of plain
Python, at lane counts with partial gangs, with wrapping values and failing lanes."""

import re

import numpy as np
import pytest

import hydra
from hydra import lane
from hydra.backends.cpu.backend import CpuBackend

G = np.uint32(0x9E3779B1)


def llvm(k, *args) -> str:
    fn, _ = k.specialize(k.signature(args)[1])
    return CpuBackend.dump(fn, "llvm", k.options)


def hashed(n: int, block: int) -> np.uint32:
    """Python-int arguments: ``i`` is a Python int, so NumPy 2 checks each cast."""
    start = lane() * block
    acc = np.uint32(0)
    for i in range(start, min(start + block, n)):
        acc = acc ^ (np.uint32(3 * i + 7) * G)
        acc = acc + np.uint32(np.int32(1000 - 2 * i))
    return acc


def hashed_python(lanes: int, n: int, block: int) -> np.ndarray:
    out = []
    for ln in range(lanes):
        acc = 0
        for i in range(ln * block, min(ln * block + block, n)):
            acc ^= ((3 * i + 7) * 0x9E3779B1) & 0xFFFFFFFF
            acc = (acc + ((1000 - 2 * i) & 0xFFFFFFFF)) & 0xFFFFFFFF
        out.append(acc)
    return np.array(out, dtype=np.uint32)


@pytest.mark.parametrize("lanes", [1, 7, 32, 33, 100])
def test_results_agree_with_python_and_numpy(lanes):
    n, block = lanes * 41 - 13, 41  # the last lane's range is short, others are full
    k = hydra.compile(hashed, lanes=lanes, backend="cpu")
    ref = hydra.compile(hashed, lanes=lanes, backend="numpy")
    got = k(n, block)
    np.testing.assert_array_equal(got, ref(n, block))
    np.testing.assert_array_equal(got, hashed_python(lanes, n, block))


def test_the_check_is_decided_before_the_loop_and_the_cast_is_narrow():
    k = hydra.compile(hashed, lanes=64, backend="cpu")
    text = llvm(k, 1000, 10)
    assert re.search(r"br i1 %safe\d+, label %checked\d+, label %check\d+", text)
    # the two casts of a * i + b read a 32-bit copy of i that steps beside it
    assert re.search(r"%n\d+ = phi <\d+ x i32>", text)


def squared(n: int, block: int) -> np.uint32:
    start = lane() * block
    acc = np.uint32(0)
    for i in range(start, min(start + block, n)):
        acc = acc + np.uint32(i * i)  # not affine in i: checked on every trip
    return acc


def test_a_check_that_is_not_affine_stays_in_the_loop():
    k = hydra.compile(squared, lanes=64, backend="cpu")
    assert "%safe" not in llvm(k, 1000, 10)
    ref = hydra.compile(squared, lanes=64, backend="numpy")
    np.testing.assert_array_equal(k(1000, 10), ref(1000, 10))


def late_overflow(big: int) -> np.uint32:
    """Lane 2 and later overflow uint32 at their first trip; lanes 0 and 1 never."""
    start = lane() * big
    acc = np.uint32(0)
    for i in range(start, start + 3):
        acc = acc + np.uint32(2 * i)
    return acc


def early_overflow(block: int) -> np.uint32:
    """Lanes 0-5 go negative at their first trip."""
    start = lane() * block
    acc = np.uint32(0)
    for i in range(start, start + block):
        acc = acc + np.uint32(2 * i - 12)
    return acc


def later_trip(trips: int) -> np.uint32:
    """A falling function of i: lane L fails at trip 16 - L (first in lockstep order:
    the earliest trip, then the lowest lane), lanes above 16 at their first trip."""
    start = lane()
    acc = np.uint32(0)
    for i in range(start, start + trips):
        acc = acc + np.uint32(30 - 2 * i)
    return acc


@pytest.mark.parametrize("fn,arg,lanes", [
    (late_overflow, 2 ** 30 + 1, 5),
    (late_overflow, 2 ** 30 + 1, 70),
    (early_overflow, 1, 40),
    (early_overflow, 1, 6),
    (later_trip, 4, 15),  # lane 14 at trip 2, before lane 13 at trip 3
    (later_trip, 4, 40),  # lane 16 at trip 0
])
def test_failing_lanes_raise_as_the_reference_does(fn, arg, lanes):
    k = hydra.compile(fn, lanes=lanes, backend="cpu")
    ref = hydra.compile(fn, lanes=lanes, backend="numpy")
    with pytest.raises(OverflowError) as want:
        ref(arg)
    with pytest.raises(OverflowError) as got:
        k(arg)
    assert str(got.value) == str(want.value)
    assert "lane" in str(got.value)
    if fn is later_trip:
        assert f"(lane {14 if lanes == 15 else 16})" in str(got.value)


def test_safe_gangs_run_and_unsafe_ones_raise_in_one_call():
    """Lanes 0-1 are fine; with 2 lanes the whole run is safe and returns values."""
    k = hydra.compile(late_overflow, lanes=2, backend="cpu")
    big = 2 ** 30 + 1
    want = [sum((2 * i) & 0xFFFFFFFF for i in range(ln * big, ln * big + 3)) & 0xFFFFFFFF
            for ln in range(2)]
    np.testing.assert_array_equal(k(big), np.array(want, dtype=np.uint32))


def wrapping(base: np.int64, trips: np.int64) -> np.uint32:
    """int64 arguments: no check, the casts wrap (the 32-bit copy of i must too)."""
    start = lane() * trips + base
    acc = np.uint32(0)
    for i in range(start, start + trips):
        acc = acc ^ (np.uint32(3 * i + 7) + np.uint32(np.int32(5 - 7 * i)))
    return acc


@pytest.mark.parametrize("lanes", [1, 33, 70])
@pytest.mark.parametrize("base", [0, 2 ** 40 - 5, -(2 ** 35) - 3])
def test_narrow_casts_wrap_as_int64_casts_do(lanes, base):
    trips = 9
    k = hydra.compile(wrapping, lanes=lanes, backend="cpu")
    got = k(np.int64(base), np.int64(trips))
    want = []
    for ln in range(lanes):
        acc = 0
        for i in range(ln * trips + base, ln * trips + base + trips):
            low = (5 - 7 * i) & 0xFFFFFFFF
            acc ^= (((3 * i + 7) & 0xFFFFFFFF) + low) & 0xFFFFFFFF
        want.append(acc)
    np.testing.assert_array_equal(got, np.array(want, dtype=np.uint32))
    ref = hydra.compile(wrapping, lanes=lanes, backend="numpy")
    np.testing.assert_array_equal(got, ref(np.int64(base), np.int64(trips)))
    assert re.search(r"%n\d+ = phi <\d+ x i32>", llvm(k, np.int64(base), np.int64(trips)))


def test_a_check_branches_on_any_lane_and_packs_lane_bits_only_on_failure():
    k = hydra.compile(squared, lanes=64, backend="cpu")
    text = llvm(k, 1000, 10)
    lines = text.splitlines()
    branches = [i for i, line in enumerate(lines) if re.search(r"br i1 \S+, label %err\d+", line)]
    assert branches
    for i in branches:
        cond = lines[i].split()[2].rstrip(",")
        made = next(line for line in lines[:i] if line.strip().startswith(f"{cond} ="))
        assert "reduce.or" in made or re.search(r"= or i1 ", made), made
        # the i64 of lane bits (for the first failing lane) is built after the branch
        err = re.search(r"label %(err\d+)", lines[i]).group(1)
        body = lines[lines.index(f"{err}:"):]
        assert "llvm.cttz.i64" in "\n".join(body[:40])
