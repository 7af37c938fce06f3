"""Hand-written C peers of mandelbrot (``bench/c/mandel.c``): gcc -O3 -march=native
scalar, AVX2 and AVX-512 intrinsics with 2 and 3 independent vector chains, with and
without FMA, against hydra on one core (``python -m bench cpeers [--repeat N]``).

The C is built on the fly with gcc into a temporary directory and called through
ctypes; without gcc (or without the vector extensions on this CPU) those rows are
skipped with a note.  Everything runs on the calling thread; rows are timed in
interleaved rounds (one call of each per round) and keep their best and median, the
way a shared machine disturbs least.  "agrees" compares the counts with Numba @njit's
bit for bit; FMA rows are compared with hydra ``fastmath=True`` instead (FMA changes a
few boundary pixels, and both fuse the same products).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import statistics
import subprocess
import tempfile
import time

import numpy as np

import hydra

from . import mandelbrot as mb

_SRC = os.path.join(os.path.dirname(__file__), "c", "mandel.c")
FUNCS = ("scalar", "avx2_2", "avx2_3", "avx2_2_fma", "avx2_3_fma",
         "avx512_2", "avx512_3", "avx512_2_fma", "avx512_3_fma")


def build() -> tuple[ctypes.CDLL | None, str]:
    """The peers' shared library (None where it cannot be built) and a note."""
    gcc = shutil.which("gcc")
    if gcc is None:
        return None, "gcc not found: the C peers are skipped"
    src = open(_SRC, "rb").read()
    out = os.path.join(tempfile.gettempdir(),
                       f"hydra_cpeers_{hashlib.sha256(src).hexdigest()[:16]}.so")
    if not os.path.exists(out):
        cmd = [gcc, "-O3", "-march=native", "-ffp-contract=off", "-shared", "-fPIC",
               "-o", out + ".tmp", _SRC]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            return None, f"gcc failed, C peers skipped: {r.stderr.strip()[:300]}"
        os.replace(out + ".tmp", out)
    version = subprocess.run([gcc, "--version"], capture_output=True, text=True)
    return ctypes.CDLL(out), version.stdout.splitlines()[0]


def peers(lib: ctypes.CDLL, args) -> dict:
    """label -> callable for every peer the library has (the CPU decides which)."""
    c_re, c_im, max_iter = args
    out = np.empty(c_re.size, np.int32)
    fp = ctypes.POINTER(ctypes.c_float)
    p_re, p_im = c_re.ctypes.data_as(fp), c_im.ctypes.data_as(fp)
    p_out = out.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
    rows = {}
    for name in FUNCS:
        fn = getattr(lib, f"mandel_{name}", None)
        if fn is None:
            continue
        fn.restype = None
        fn.argtypes = [fp, fp, ctypes.c_int, ctypes.POINTER(ctypes.c_int32), ctypes.c_long]

        def call(fn=fn):
            fn(p_re, p_im, int(max_iter), p_out, c_re.size)
            return out.copy()
        rows[f"C {name.replace('_', ' ')}"] = call
    return rows


def main(repeat: int = 10) -> None:
    args = mb.setup()
    lib, note = build()
    print(f"# mandelbrot 1024x768 float32, one core; {note}")
    rows = {"numba @njit": lambda: mb.numba_scalar(*args)}
    for fm in (False, True):
        k = hydra.compile(mb.kernel, varying=mb.VARYING, backend="cpu", threads=1,
                          fastmath=fm)
        rows[f"hydra{' fastmath' * fm}, 1 thread"] = lambda k=k: k(*args)
    if lib is not None:
        avail = {n for n in FUNCS if hasattr(lib, f"mandel_{n}")}
        rows.update(peers(lib, args))
        missing = [n for n in FUNCS if n not in avail]
        if missing:
            print(f"# not built for this CPU: {', '.join(missing)}")
    outs = {label: fn() for label, fn in rows.items()}  # warm up, compile
    times: dict[str, list[float]] = {label: [] for label in rows}
    for _ in range(repeat):
        for label, fn in rows.items():
            t = time.perf_counter()
            fn()
            times[label].append(time.perf_counter() - t)
    ref = min(times["numba @njit"])
    exact, fused = outs["numba @njit"], outs["hydra fastmath, 1 thread"]
    print(f"{'implementation':26} {'median ms':>10} {'best ms':>8} {'vs numba':>9} "
          f"{'agrees':>14}")
    for label, ts in times.items():
        other = fused if ("fma" in label or "fastmath" in label) else exact
        diff = int(np.count_nonzero(np.asarray(outs[label]) != other))
        agrees = "yes" if diff == 0 else f"{diff} px differ"
        print(f"{label:26} {statistics.median(ts) * 1e3:10.2f} {min(ts) * 1e3:8.2f} "
              f"{ref / min(ts):8.2f}x {agrees:>14}", flush=True)


if __name__ == "__main__":
    main()
