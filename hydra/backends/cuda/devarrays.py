"""Device arrays given to the cuda backend, the kind results come back as, and the
count of host round trips.

Takes: a call's argument leaves.  Guarantees:

- ``import_array(a)``: a numba device array over the same memory, no copy, for every
  kind of device array a caller may pass: numba's own (as they are), anything with
  ``__cuda_array_interface__`` (CuPy, PyTorch CUDA tensors, ...; numba waits for the
  stream the interface names, version 3), and DLPack CUDA arrays (``__dlpack__`` with a
  CUDA ``__dlpack_device__``: through CuPy or PyTorch, whichever is importable, which
  hand the current stream to the producer).  Under the CUDA simulator device memory is
  host memory: the interface's pointer is viewed as a NumPy array, in place.
- ``result_kind(args)``: results of a call with a device array argument stay on the
  device and come back as the kind of the *first* such argument (CuPy in, CuPy out;
  PyTorch in, PyTorch out; numba device arrays otherwise); a call without one returns
  NumPy as SPEC section 2 says.
- ``Stats``/``count``: what one run moved between host and device, per thread (the
  runner's ``last_run_stats``): ``host_round_trips`` counts every copy from the device
  that the host waits for (results, values a host op reads, the error counter after
  a launch, a loop's condition), ``uploads`` every copy to the device, ``launches``
  the kernels.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np
from numba import config, cuda

from ...arguments import has_cuda_interface, is_device_array, is_dlpack_cuda

__all__ = ["Stats", "count", "import_array", "is_device_array", "recording", "result_kind"]

_local = threading.local()


class Stats:
    """Counts of one run (``count`` adds to the thread's current one)."""

    KEYS = ("launches", "host_round_trips", "uploads")

    def __init__(self) -> None:
        self.counts = dict.fromkeys(self.KEYS, 0)

    def as_dict(self) -> dict:
        return dict(self.counts)


@contextlib.contextmanager
def recording(stats: Stats):
    """Count this thread's transfers and launches into ``stats`` (nested runs: the
    innermost one)."""
    old = getattr(_local, "stats", None)
    _local.stats = stats
    try:
        yield stats
    finally:
        _local.stats = old


def count(key: str, n: int = 1) -> None:
    stats = getattr(_local, "stats", None)
    if stats is not None:
        stats.counts[key] += n


def _from_dlpack(a):
    """A ``__cuda_array_interface__`` array over a DLPack array's memory."""
    try:
        import cupy
        return cupy.from_dlpack(a)
    except ImportError:
        pass
    try:
        import torch.utils.dlpack
        return torch.utils.dlpack.from_dlpack(a)
    except ImportError:
        raise TypeError(f"a DLPack CUDA array ({type(a).__name__}) needs CuPy or PyTorch "
                        f"to be imported without a copy; install one, or pass an array with "
                        f"__cuda_array_interface__") from None


class _HostDLPack:
    """Under the simulator: a DLPack producer whose memory is host memory."""

    def __init__(self, a) -> None:
        self.a = a

    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return (1, 0)


class _HostMemory:
    """NumPy's array interface over the memory a ``__cuda_array_interface__`` names."""

    def __init__(self, interface: dict, owner) -> None:
        self.__array_interface__ = {"data": tuple(interface["data"]),
                                    "shape": tuple(interface["shape"]),
                                    "strides": interface.get("strides"),
                                    "typestr": interface["typestr"], "version": 3}
        self.owner = owner  # the memory stays alive with the view


def _simulated(interface: dict, owner):
    """The simulator's device array over the memory a ``__cuda_array_interface__``
    names (host memory there), in place."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    return FakeCUDAArray(np.asarray(_HostMemory(interface, owner)))


def import_array(a):
    """A numba device array over ``a``'s memory (no copy)."""
    if hasattr(a, "copy_to_host"):
        return a
    if not has_cuda_interface(a) and is_dlpack_cuda(a):
        if config.ENABLE_CUDASIM:
            host = np.from_dlpack(_HostDLPack(a))  # (NumPy marks it read-only)
            interface = dict(host.__array_interface__, data=(host.ctypes.data, False))
            return _simulated(interface, (a, host))
        a = _from_dlpack(a)
    if config.ENABLE_CUDASIM:
        return _simulated(a.__cuda_array_interface__, a)
    return cuda.as_cuda_array(a)  # waits for the producer's stream (interface v3)


def result_kind(args: list):
    """The converter of the call's device results, or None (no device array argument:
    results come back as NumPy)."""
    first = next((a for a in args if is_device_array(a)), None)
    if first is None:
        return None
    module = type(first).__module__.split(".")[0]
    if module == "cupy":
        import cupy
        return cupy.asarray
    if module == "torch":
        import torch
        device = first.device

        def to_torch(d):
            return torch.as_tensor(d, device=device)
        return to_torch
    return _as_numba


def _as_numba(d):
    return d


def view(xp, d):
    """A numba device array as an array of the namespace ``xp``, over the same memory."""
    if xp is np:  # the simulator: device memory is host memory
        return d._ary if hasattr(d, "_ary") else np.asarray(d)
    if getattr(xp, "__name__", "") == "cupy":
        return xp.asarray(d)
    return xp.wrap(d._ary)  # the strict shim (simulator memory)


def from_view(a):
    """An array of a namespace (``view``'s) as a numba device array, no copy."""
    if config.ENABLE_CUDASIM:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
        return FakeCUDAArray(getattr(a, "data", a) if not isinstance(a, np.ndarray) else a)
    return cuda.as_cuda_array(a)
