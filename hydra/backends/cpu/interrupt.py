"""Ctrl-C for native kernels: a stop word that a C-level SIGINT handler sets.

Python runs its own signal handlers only between bytecodes of the main thread, which a
running kernel never reaches (the main thread is in native code, or waits for the
thread team in it).  So while a kernel runs on the main thread, ``install()`` puts a
tiny native handler in front of Python's: it sets the stop word, which every gang and
every loop back edge of the kernels reads (``stops``), and then calls Python's own C
handler, so that Python still sees the signal.  The kernel leaves within one loop
iteration; ``restore`` then puts Python's handler back and raises the
``KeyboardInterrupt`` (by Python's pending handler, so there is exactly one).

The signal may land on any thread (a worker thread of the pool): the native
handler only stores a word and calls Python's C handler, which only trips a flag;
neither needs the GIL, and the kernels hold none (the drivers are ``nogil``).

The handler is installed only from the main thread (where Python handles signals), on
Linux, and only while SIGINT has Python's default handler (``KeyboardInterrupt``): a
program with its own SIGINT handler keeps it untouched.  Kernels on other threads read
the same word, so Ctrl-C during a main-thread kernel stops them too.  The word is
``hydra.stop.WORDS[0]``: ``hydra.stop`` sets it as well, to stop submitted launches
when a Ctrl-C reaches a wait of hydra's, and ``restore`` leaves it set while that
stop is under way.
"""

from __future__ import annotations

import ctypes
import functools
import signal
import sys
import threading

import numpy as np

from ...stop import WORDS as _WORDS  # [0] the stop word, [1] Python's C handler
from ...stop import reset as _reset
_SA_SIGINFO = 4


class _SigAction(ctypes.Structure):
    """glibc's ``struct sigaction`` (Linux)."""

    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16),
                ("flags", ctypes.c_int), ("restorer", ctypes.c_void_p)]


def stop_address() -> int:
    return int(_WORDS.ctypes.data)


@functools.cache  # the handler lives as long as the process
def _native_handler() -> int:
    """The address of ``void handler(int)``: set the stop word, call Python's handler."""
    from ..machinecode.engine import jit
    stop, prev = stop_address(), stop_address() + 8
    text = f"""
define void @hydra_on_sigint(i32 %sig) {{
entry:
  store atomic volatile i64 1, ptr inttoptr (i64 {stop} to ptr) seq_cst, align 8
  %prev = load atomic volatile i64, ptr inttoptr (i64 {prev} to ptr) seq_cst, align 8
  %real = icmp ugt i64 %prev, 1
  br i1 %real, label %call, label %done
call:
  %f = inttoptr i64 %prev to ptr
  call void %f(i32 %sig)
  br label %done
done:
  ret void
}}
"""
    return jit(text, "hydra_on_sigint")


@functools.cache
def _sigaction():
    f = ctypes.CDLL(None, use_errno=True).sigaction
    f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    return f


_OLD, _NEW = _SigAction(), _SigAction()  # only the main thread installs: one of each
_MAIN = threading.main_thread()


def install() -> bool:
    """Put the native handler in front of Python's, if this is the main thread and
    SIGINT has Python's default handler; True if it did (then call ``restore``)."""
    if not (_LINUX and threading.current_thread() is _MAIN
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
        return False
    sigaction = _sigaction()
    if not _NEW.handler:  # Python's C handler, found once (signal.signal keeps it)
        sigaction(signal.SIGINT, None, _OLD_AT)
        if _OLD.flags & _SA_SIGINFO:
            return False
        ctypes.memmove(_NEW_AT.value, _OLD_AT.value, ctypes.sizeof(_OLD))
        _NEW.handler = _native_handler()
        _WORDS[1] = _OLD.handler or 0
    sigaction(signal.SIGINT, _NEW_AT, None)
    return True


def restore(installed: bool, err: np.ndarray, interrupted: int) -> None:
    """Put Python's handler back; raise ``KeyboardInterrupt`` if the kernel stopped
    for Ctrl-C (it set ``err[interrupted]``)."""
    if installed:
        _sigaction()(signal.SIGINT, _OLD_AT, None)
        _reset()  # also when the signal came after the kernel's last check (not while
        # launches on other threads are being stopped: ``hydra.stop``)
    if err[interrupted]:
        if installed:
            # Python's handler saw the signal too: let it raise its KeyboardInterrupt
            ctypes.pythonapi.PyErr_CheckSignals()
        raise KeyboardInterrupt


_OLD_AT, _NEW_AT = (ctypes.c_void_p(ctypes.addressof(a)) for a in (_OLD, _NEW))
_LINUX = sys.platform.startswith("linux")
