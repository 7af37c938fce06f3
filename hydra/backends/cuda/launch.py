"""Host side of a kernel launch: build the kernel, move arrays, pick grid sizes.

Takes: generated kernel source and the caller's arguments.  Guarantees: host
arrays are copied to the device and, when the kernel writes them and no lane
failed, back into the caller's own array (in place; a failed launch leaves the
caller's host arrays as they were); device arrays (numba device arrays and anything with
``__cuda_array_interface__``) are used as they are, without copies; the grid
covers any N with whole blocks (the kernel guards ``lane < N``).  A launch runs on
the calling thread's stream (``on_stream``: ``hydra.dataflow`` gives each independent
chain of launches one; 0, the default stream, otherwise).
"""

from __future__ import annotations

import contextlib
import hashlib
import linecache
import threading
import warnings

import numpy as np
from numba import cuda

from ... import stop
from ..machinecode import diskcache
from .devarrays import count, import_array
from .devarrays import is_device_array as is_device_array

BLOCK = 128
_local = threading.local()


@contextlib.contextmanager
def on_stream(stream):
    """Run this thread's launches (copies, kernels, error checks) on ``stream``."""
    old = stream_now()
    _local.stream = stream
    try:
        yield
    finally:
        _local.stream = old


def new_stream():
    """A stream for one chain of launches (the scheduler's ``Launch.stream``)."""
    return cuda.stream()


def record_event(stream):
    """An event recorded on ``stream`` when its launches so far are done."""
    try:
        event = cuda.event(timing=False)
    except TypeError:  # the simulator's event takes no arguments
        event = cuda.event()
    event.record(stream)
    return event


def stream_now():
    """The stream this thread's launches go on."""
    return getattr(_local, "stream", 0)


def to_host(d) -> np.ndarray:
    """``d`` copied to the host on this thread's stream, and finished (a copy on a stream
    other than the default one returns before the data is there)."""
    stream = stream_now()
    count("host_round_trips")
    host = d.copy_to_host(stream=stream)
    if not isinstance(stream, int):
        stream.synchronize()
    return host


def build(source: str, entry: str, label: str, options: dict):
    """Compile generated source; the ``cuda.jit`` kernel named ``entry``.  Options:
    ``fastmath`` (numba's fast-math flags; the source itself decides FMA contraction:
    ``emit.Frame.contract``) and ``cache``
    (numba-cuda's disk cache, which needs the source in a file: it is written under
    the cache directory, named by its hash, and imported from there)."""
    fastmath, cache = bool(options.get("fastmath")), bool(options.get("cache"))
    if cache:
        key = hashlib.sha256(source.encode()).hexdigest()[:24]
        module = diskcache.load_module(f"hydra_cuda_{key}", source)
        # no file behind it: the directory cannot be written (diskcache warned once)
        cached = getattr(module, "__file__", None) is not None
        return cuda.jit(getattr(module, entry), fastmath=fastmath, cache=cached)
    filename = f"<hydra-cuda {label} {abs(hash(source)):x}>"
    # tracebacks and inspect can then show the generated lines
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict = {}
    exec(compile(source, filename, "exec"), namespace)
    return cuda.jit(namespace[entry], fastmath=fastmath)


def upload(host: np.ndarray):
    """A host array copied to the device on this thread's stream (counted)."""
    count("uploads")
    return cuda.to_device(np.ascontiguousarray(host), stream=stream_now())


class Transfers:
    """Arrays moved to the device for one launch, and the copies back."""

    def __init__(self) -> None:
        self.back: list[tuple[object, np.ndarray]] = []
        #: id(host array) -> (its device copy, copied back?): one array passed as two
        #: arguments is one device array too, so a write through one is read by the other
        self.sent: dict[int, list] = {}

    def array(self, a, written: bool):
        """The device array to pass for ``a``."""
        if is_device_array(a):
            return import_array(a)
        host = np.asarray(a)
        got = self.sent.get(id(host))
        if got is None or got[2] is not host:
            got = self.sent[id(host)] = [upload(host), False, host]
        if written and not got[1]:
            got[1] = True
            self.back.append((got[0], host))
        return got[0]

    def finish(self) -> None:
        """Copy written arrays back into the caller's arrays."""
        for d, host in self.back:
            host[...] = to_host(d)
        self.back.clear()
        self.sent.clear()


def scalar_arg(value, dtype: np.dtype):
    """A uniform scalar as the NumPy scalar the kernel expects."""
    return np.asarray(value).astype(dtype)[()]


def launch(kernel, lanes: int, args: list) -> None:
    """Run ``kernel(lanes, *args)`` on enough whole blocks for ``lanes`` threads."""
    block = min(BLOCK, -(-lanes // 32) * 32)
    grid = -(-lanes // block)
    count("launches")
    # NumPy scalars warn where they wrap (the simulator runs the kernel as Python);
    # hydra wraps silently, as NumPy arrays do
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            kernel[grid, block, stream_now()](np.int64(lanes), *args)
        except stop.SimulatorStopped:  # a Ctrl-C stopped it (``hydra.stop``)
            raise KeyboardInterrupt from None
        except KeyboardInterrupt:  # Ctrl-C on this (main) thread: the simulator's
            stop.stop_simulator()  # threads would run on
            raise


class ErrorBuffer:
    """The error buffer of a runner: ``lanes + 1`` rows, the last one counting the
    failed lanes.  It stays on the device from launch to launch and is only read
    whole (and then replaced) after a failure: a launch without one costs a copy of
    one number."""

    def __init__(self) -> None:
        self.buffers: dict[int, object] = {}

    def get(self, lanes: int):
        if lanes not in self.buffers:
            self.buffers[lanes] = cuda.to_device(np.zeros((lanes + 1, 3), dtype=np.int64))
        return self.buffers[lanes]

    def check(self, lanes: int, sites) -> None:
        """Raise the first failure of the last launch, if any lane failed."""
        d = self.buffers[lanes]
        row = to_host(d[lanes:])[0]
        if row[0] == 0:
            return
        del self.buffers[lanes]
        if row[1]:  # a lane's tape was full (``structured``): no lane's error is final
            raise TapeOverflow()
        sites.raise_first(d.copy_to_host()[:lanes])


class TapeOverflow(Exception):
    """A lane pushed past the end of its tape store: launch again with a larger one."""
