"""Finite-difference checks of hydra.grad (SPEC section 11), shared by the gradient
tests: float64 central differences of the per-example Python function, compared only
on lanes whose forward path (the sequence of source lines Python runs) is the same at
x - h, x and x + h; a check fails if more than 10% of the lanes are skipped."""

from __future__ import annotations

import gc
import sys

import numpy as np


def path(fn, args) -> tuple:
    """The lines Python runs for ``fn(*args)``: branch decisions and trip counts."""
    lines: list = []

    def tracer(frame, event, arg):
        if event == "line":
            lines.append((frame.f_code, frame.f_lineno))
        return tracer
    # no garbage collection while tracing: its callbacks (hypothesis registers one) run
    # Python lines at whatever moment a collection starts, which is no path of fn's
    collecting = gc.isenabled()
    gc.disable()
    sys.settrace(tracer)
    try:
        fn(*args)
    finally:
        sys.settrace(None)
        if collecting:
            gc.enable()
    return tuple(lines)


def central(fn, args, i: int, h: float):
    """(d fn / d args[i] by central differences, is the path the same at +-h?)."""
    lo, hi = list(args), list(args)
    lo[i] = float(args[i]) - h
    hi[i] = float(args[i]) + h
    same = path(fn, lo) == path(fn, hi) == path(fn, args)
    return (fn(*hi) - fn(*lo)) / (2 * h), same


def check_arrays(fn, grads, lane_args, wrt, rtol=1e-5, atol=1e-7, h=1e-6):
    """``check`` for array arguments: each element of each ``wrt`` argument of each lane
    (at most a few hundred parameters in all, as the issue asks)."""
    skipped = compared = 0
    n = len(lane_args)
    for lane, args in enumerate(lane_args):
        for k, i in enumerate(wrt):
            got_all = np.broadcast_to(grads[k], (n, *np.shape(args[i])))[lane]
            for idx in np.ndindex(np.shape(args[i])):
                def at(delta):
                    a = [np.array(x, dtype=np.float64) if isinstance(x, np.ndarray) else x
                         for x in args]
                    if np.ndim(a[i]):
                        a[i][idx] += delta
                    else:
                        a[i] = float(a[i]) + delta
                    return a
                same = path(fn, at(h)) == path(fn, at(-h)) == path(fn, at(0.0))
                if not same:
                    skipped += 1
                    continue
                compared += 1
                fd = (fn(*at(h)) - fn(*at(-h))) / (2 * h)
                got = float(got_all[idx])
                assert np.isclose(got, fd, rtol=rtol, atol=atol), (lane, i, idx, got, fd)
    assert skipped <= 0.1 * (skipped + compared), f"{skipped} of {skipped + compared} skipped"
    return compared


def check(fn, grads, lane_args, wrt, rtol=1e-5, atol=1e-7, h=1e-6):
    """``grads[k][lane]``: hydra's gradient for ``wrt[k]`` on each lane, whose arguments
    are ``lane_args[lane]``; compares with float64 central differences of ``fn``."""
    skipped = compared = 0
    for lane, args in enumerate(lane_args):
        args = [float(a) if isinstance(a, (float, np.floating)) else a for a in args]
        for k, i in enumerate(wrt):
            fd, same = central(fn, args, i, h * max(1.0, abs(args[i])))
            if not same:
                skipped += 1
                continue
            compared += 1
            # a gradient the compiler proves the same on every lane comes back once
            got = float(np.broadcast_to(grads[k], (len(lane_args),))[lane])
            assert np.isclose(got, fd, rtol=rtol, atol=atol), (lane, i, args, got, fd)
    assert skipped <= 0.1 * (skipped + compared), f"{skipped} of {skipped + compared} skipped"
    return compared
