"""The Hydra.jl demos, with their exact output."""

import hydra
from hydra import lane, lanesum


def test_hello_world(capsys, backend):
    hydra.spmd(4, lambda: print("Hello, World!"), backend=backend)
    assert capsys.readouterr().out == "Hello, World!\n" * 4


def hello_goodbye():
    print("Hello from lane", lane() + 1)
    print("Goodbye from lane", lane() + 1)


def test_hello_goodbye_in_lockstep(capsys, backend):
    hydra.spmd(4, hello_goodbye, backend=backend)
    want = "".join(f"Hello from lane {i}\n" for i in range(1, 5))
    want += "".join(f"Goodbye from lane {i}\n" for i in range(1, 5))
    assert capsys.readouterr().out == want


def test_lanesum_demo(backend):
    got = hydra.spmd(4, lambda: lanesum((lane() + 1) * 2), backend=backend)
    assert got == 20 and isinstance(got, int)


def even_lanes():
    i = lane() + 1
    if i % 2 == 0:
        print("lane", i, "is even")


def test_print_only_even_lanes(capsys, backend):
    hydra.spmd(4, even_lanes, backend=backend)
    assert capsys.readouterr().out == "lane 2 is even\nlane 4 is even\n"
