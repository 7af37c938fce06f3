"""Kernels for tests/test_cpu_native.py, run in fresh processes (hydra reads their source).

``python native_kernels.py cached|compiled|reference`` prints one JSON line: each
kernel's result (or error message) on one thread and on two, on the cpu backend with
``cache=True`` or without, or on the numpy backend, then how many kernels this process
compiled and whether numba or scipy got imported."""

import hashlib
import json
import sys

import numpy as np

import hydra
from hydra import lane

N = 5000  # 157 gangs of 32: enough for the two-thread path


def scalars(x, s, k, flag, u, out):
    v = x * s + k
    if flag:
        v = v + 1.0
    out[lane()] = v + u


def arrays(a, col, out):
    i = lane()
    out[i] = a[i % 7, col] * 2.0 + a[(i + 3) % 7, col + 1]


def loops(n0):
    n = n0
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def bad_index(a, out):
    i = lane()
    out[i] = a[i] + 1.0


def cases():
    """(name, kernel, varying, arguments): the arguments made fresh for each call."""
    x = np.linspace(-1.0, 1.0, N)
    a = np.arange(70.0).reshape(7, 10)[:, ::2]  # strided, not contiguous
    starts = np.arange(1, N + 1, dtype=np.int64)
    yield "scalars", scalars, ("x",), lambda: (x, 2.5, 3, True, np.uint32(7), np.zeros(N))
    yield "arrays", arrays, (), lambda: (a, 2, np.zeros(N))
    yield "loops", loops, ("n0",), lambda: (starts,)
    yield "bad_index", bad_index, (), lambda: (np.zeros(N - 10), np.zeros(N))


def digest(value) -> str:
    arrays = value if isinstance(value, tuple) else (value,)
    h = hashlib.sha256()
    for v in arrays:
        v = np.asarray(v)
        h.update(str(v.dtype).encode() + v.tobytes())
    return h.hexdigest()[:16]


def main(mode: str) -> None:
    out = {}
    for name, fn, varying, make in cases():
        for threads in (1, 2):
            k = hydra.compile(fn, lanes=N, varying=varying, threads=threads,
                              backend="numpy" if mode == "reference" else "cpu",
                              cache=mode == "cached")
            args = make()
            try:
                res = k(*args)
                out[f"{name}/{threads}"] = digest(res if res is not None else args[-1])
            except hydra.HydraError as e:
                out[f"{name}/{threads}"] = f"{type(e).__name__}: {e}"
    from hydra.backends.machinecode import functions
    print(json.dumps({"results": out, "built": len(functions.BUILT),
                      "numba": "numba" in sys.modules, "scipy": "scipy" in sys.modules}))


if __name__ == "__main__":
    main(sys.argv[1])
