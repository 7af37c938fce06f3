"""Lockstep semantics (SPEC section 4): prints come out statement by statement in lane
order, inactive lanes print nothing, and a store in one statement is seen by every lane
in the next."""

import numpy as np

import hydra
from hydra import lane, nlanes


def prints(x):
    print("a", x, sep="-", end=";\n")
    print(f"lane {lane()}: {x * 1.5:.2f} {x!r:>4}")
    if x % 2:
        print("odd", x, end="")
        print()
    print("t", (x, x + 1), True)


def test_prints_in_lane_order_per_statement(capsys, backend):
    x = np.array([3, 4, 5], dtype=np.int64)
    hydra.compile(prints, varying="x", backend=backend)(x)
    want = "".join(f"a-{v};\n" for v in x)
    want += "".join(f"lane {i}: {v * 1.5:.2f} {v!r:>4}\n" for i, v in enumerate(x.tolist()))
    want += "odd 3odd 5\n\n"
    want += "".join(f"t {(v, v + 1)} True\n" for v in x.tolist())
    assert capsys.readouterr().out == want


def loop_prints(n):
    i = 0
    while i < n:
        print("iter", i, "lane", lane())
        i += 1
    print("done", lane())


def test_prints_inside_divergent_loops(capsys, backend):
    hydra.compile(loop_prints, varying="n", backend=backend)(np.array([2, 0, 3]))
    want = ["iter 0 lane 0", "iter 0 lane 2", "iter 1 lane 0", "iter 1 lane 2",
            "iter 2 lane 2", "done 0", "done 1", "done 2"]
    assert capsys.readouterr().out == "\n".join(want) + "\n"


def test_prints_interleave_with_the_callers(capsys, backend):
    k = hydra.compile(lambda: print("k", lane()), lanes=2, backend=backend)
    print("before")
    k()
    print("after")
    assert capsys.readouterr().out == "before\nk 0\nk 1\nafter\n"


def float32_print(x):
    print(x, x * 2.0, np.float64(x))


def test_prints_show_the_lanes_python_values(capsys, backend):
    x = np.array([0.1, 2.5], dtype=np.float32)
    hydra.compile(float32_print, varying="x", backend=backend)(x)
    want = "".join(" ".join(map(str, (v, v * 2.0, np.float64(v)))) + "\n" for v in x)
    assert capsys.readouterr().out == want


def neighbours(a):
    a[lane()] = lane() * 10
    b = a[(lane() + 1) % nlanes()]
    a[lane()] = b + 1
    return b, a[(lane() + 2) % nlanes()]


def test_store_is_seen_by_other_lanes_next_statement(backend):
    for lanes in (1, 3, 8, backend.lanes(100)):
        a = np.zeros(lanes, np.int64)
        b, c = hydra.compile(neighbours, lanes=lanes, backend=backend)(a)
        ids = np.arange(lanes)
        np.testing.assert_array_equal(b, ((ids + 1) % lanes) * 10)
        np.testing.assert_array_equal(a, b + 1)
        np.testing.assert_array_equal(c, b[(ids + 2) % lanes] + 1)


def relax(a, n):
    for _ in range(n):
        left = a[(lane() - 1) % nlanes()]
        right = a[(lane() + 1) % nlanes()]
        a[lane()] = (left + right) / 2.0


def test_stencil_in_a_loop_reads_previous_statement(backend):
    lanes = backend.lanes(16)
    a = np.arange(lanes, dtype=np.float64) ** 2
    want = a.copy()
    for _ in range(5):
        left, right = np.roll(want, 1), np.roll(want, -1)
        want = (left + right) / 2.0
    hydra.compile(relax, lanes=lanes, backend=backend)(a, 5)
    np.testing.assert_array_equal(a, want)
