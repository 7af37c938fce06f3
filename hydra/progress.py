"""Progress notices for long compiles, on stderr.

``progress(what)`` is a context: when the work inside takes more than ``after`` seconds
(2 by default) it prints ``hydra: <what>: <stage> ...`` and, at the end, ``hydra:
<what>: done in X s``.  ``stage(text)`` names the step the innermost active notice is
in (building the IR, LLVM's optimization and machine code); once the
notice has been shown, each new stage is printed as it starts, so a compile that takes
a minute says what it is doing.  ``HYDRA_QUIET=1`` silences them.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

_local = threading.local()


class _Notice:
    def __init__(self, what: str) -> None:
        self.what = what
        self.stage = ""
        self.shown = False
        self.lock = threading.Lock()

    def say(self) -> None:
        with self.lock:
            self.shown = True
            tail = f": {self.stage}" if self.stage else ""
            print(f"hydra: {self.what}{tail} ...", file=sys.stderr, flush=True)


def silence_this_thread() -> None:
    """No notices from the calling thread (background builds: nobody waits for them)."""
    _local.quiet = True


@contextlib.contextmanager
def progress(what: str, after: float = 2.0):
    """Tell the user (on stderr) about work that takes more than ``after`` seconds."""
    if getattr(_local, "quiet", False) or os.environ.get("HYDRA_QUIET", "") not in ("", "0"):
        yield
        return
    notice = _Notice(what)
    stack = _local.__dict__.setdefault("stack", [])
    stack.append(notice)
    start = time.perf_counter()
    timer = threading.Timer(after, notice.say)
    timer.daemon = True
    if after <= 0:  # at once, on this thread (tests, and users who want every stage)
        notice.say()
    else:
        timer.start()
    try:
        yield
    finally:
        timer.cancel()
        stack.pop()
        elapsed = time.perf_counter() - start
        if elapsed >= after:
            print(f"hydra: {what}: done in {elapsed:.1f} s", file=sys.stderr, flush=True)


def stage(text: str) -> None:
    """Name the step the innermost active notice of this thread is in."""
    stack = getattr(_local, "stack", None)
    if not stack:
        return
    notice = stack[-1]
    with notice.lock:
        notice.stage = text
        shown = notice.shown
    if shown:
        notice.say()
