"""The cpu code generator's varying-loop shortcuts (``cpu/loopselects.py``): carried
values nothing reads after the loop lose their keep-old select, and counters that all
active lanes share run as one scalar.  Results stay those of plain Python lane by lane."""

import re

import numpy as np
import pytest

import hydra
from bench import mandelbrot as mb
from hydra.backends.cpu.backend import CpuBackend


def llvm(k, *args) -> str:
    fn, _ = k.specialize(k.signature(args)[1])
    return CpuBackend.dump(fn, "llvm", k.options)


def escape(c_re: np.float32, c_im: np.float32, max_iter: np.int32) -> np.int32:
    return mb.kernel(c_re, c_im, max_iter)


def test_mandelbrot_loop_has_no_float_select_and_a_scalar_counter():
    k = hydra.compile(mb.kernel, varying=mb.VARYING, backend="cpu")
    c_re, c_im, it = mb.setup()
    args = c_re[:2000], c_im[:2000], it
    text = llvm(k, *args)
    # z is not read after the loop: no keep-old select of float vectors remains
    assert not re.search(r"select <\d+ x i1> [^,]+, <\d+ x float>", text)
    # i < max_iter is one scalar compare of a scalar counter phi
    assert re.search(r"%s\d* = phi i32", text)
    ref = hydra.compile(mb.kernel, varying=mb.VARYING, backend="numpy")
    np.testing.assert_array_equal(k(*args), ref(*args))


def counted(x: np.int64, start: np.int64) -> np.int64:
    """A counter starting at a uniform value, stepping by 3, lanes leaving at different
    iterations through the condition and through a break."""
    k = start
    y = x
    while k < 200:
        if y % 7 == 3:
            break
        y = (y * 5 + 1) & 0xFFFFF
        k += 3
    return k * 1000 + y % 1000


def counted_continue(x: np.int64) -> np.int64:
    """The increment is skipped by ``continue`` on some lanes: not a shared counter."""
    k = 0
    n = 0
    while n < 50:
        n += 1
        if (x + n) % 3 == 0:
            continue
        k += 2
    return k


def carried_used_after(x: np.float64) -> np.float64:
    """A carried float read after the loop keeps its per-lane value."""
    z = x
    i = 0
    while i < 40:
        if z > 100.0:
            break
        z = z * 1.5 + 1.0
        i += 1
    return z + i


def varying_start(x: np.int64) -> np.int64:
    """A counter whose initial value varies: not shared by the active lanes."""
    k = x % 5
    while k < 30:
        if (k * x) % 11 == 4:
            break
        k += 1
    return k


def nested(x: np.int64) -> np.int64:
    s = 0
    for i in range(x % 6):
        j = 0
        while j < 9:
            if (x + i * j) % 4 == 1:
                break
            j += 1
        s += j * (i + 1)
    return s


@pytest.mark.parametrize("lanes", [1, 17, 1000])
@pytest.mark.parametrize("fn,args", [
    (counted, lambda x: (x, 7)),
    (counted_continue, lambda x: (x,)),
    (carried_used_after, lambda x: (x.astype(np.float64) / 10,)),
    (varying_start, lambda x: (x,)),
    (nested, lambda x: (x,)),
], ids=["counter", "continue", "used-after", "varying-start", "nested"])
def test_loops_agree_with_python(fn, args, lanes):
    x = (np.arange(lanes, dtype=np.int64) - lanes // 2) * 37 + 5
    a = args(x)
    k = hydra.compile(fn, varying=(fn.__code__.co_varnames[0],), backend="cpu")
    want = [fn(*(v[i] if isinstance(v, np.ndarray) else v for v in a)) for i in range(lanes)]
    np.testing.assert_array_equal(k(*a), want)


def test_the_shared_counter_applies_to_the_counter_only():
    k = hydra.compile(counted, varying=("x",), backend="cpu")
    text = llvm(k, np.arange(40, dtype=np.int64), 7)
    assert re.search(r"%s\d* = phi i64", text)
    k = hydra.compile(varying_start, varying=("x",), backend="cpu")
    assert not re.search(r"%s\d* = phi i64", llvm(k, np.arange(40, dtype=np.int64)))


def test_a_scalar_loop_bound_is_a_scalar_branch_not_a_mask_and():
    """i < max_iter on the shared counter is one scalar compare; the loop goes on while
    it holds and any lane is active (``and i1``), and the body's mask is the loop mask
    itself: no and of the compare into every mask part each trip."""
    k = hydra.compile(mb.kernel, varying=mb.VARYING, backend="cpu")
    c_re, c_im, _ = mb.setup()
    text = llvm(k, c_re[:300], c_im[:300], np.int32(40))
    head = text[text.index("\nwhile"):]
    head = head[:head.index("\ndo")]
    cond = re.search(r"br i1 (%\S+), label %do", head).group(1)
    made = re.search(rf"{cond} = and i1 (%\S+), (%\S+)", head)
    assert made
    assert re.search(rf"{made.group(1)} = icmp slt i32 %s\d+, %in\d+", head)
    for lanes, it in [(1, 0), (33, 1), (100, 5), (300, 40)]:
        args = c_re[:lanes], c_im[:lanes], np.int32(it)
        want = [mb.kernel(a, b, np.int32(it)) for a, b in zip(*args[:2])]
        np.testing.assert_array_equal(k(*args), want)
