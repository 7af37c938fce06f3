"""Device arrays on the cuda backend (the cuda-ready issue, item 3): arrays given as
arguments are used in place whatever their kind (numba device arrays,
``__cuda_array_interface__``, DLPack), results come back as the first device array
argument's kind, host round trips are counted, errors name the lane, read-only device
arrays are refused.  On the simulator, where a fake device array is host memory; CuPy
and PyTorch CUDA tensors only on a GPU (``test_gpu_*`` skip here)."""

import numpy as np
import pytest

import hydra
from hydra import atomic_add, lane, lanesum
from hydra.backends import available
from hydra.errors import KernelIndexError, KernelValueError

pytestmark = pytest.mark.skipif(not available("cuda"), reason="numba.cuda unusable here")


def _on_gpu() -> bool:
    from numba import config
    return available("cuda") and not config.ENABLE_CUDASIM


needs_gpu = pytest.mark.skipif(not _on_gpu(), reason="needs a real GPU (the simulator has "
                                                     "no CuPy or PyTorch CUDA memory)")


class FakeInterface:
    """A device array known only by its ``__cuda_array_interface__`` (v3, with a
    stream): under the simulator its memory is a host array's, on a GPU a device copy
    of it (a host pointer given as device memory is an illegal address there, which an
    H200 run showed breaks every later launch of the process)."""

    def __init__(self, host: np.ndarray, readonly: bool = False) -> None:
        self.host = host
        self.dev = None
        pointer = host.ctypes.data
        if _on_gpu():
            from numba import cuda
            self.dev = cuda.to_device(host)
            pointer = self.dev.__cuda_array_interface__["data"][0]
        self.__cuda_array_interface__ = {
            "data": (pointer, readonly), "shape": host.shape,
            "strides": host.strides, "typestr": host.dtype.str, "version": 3, "stream": 1}

    def contents(self) -> np.ndarray:
        return self.host if self.dev is None else self.dev.copy_to_host()


class FakeDLPack:
    """A DLPack array that says it lives in CUDA memory (host memory under the
    simulator)."""

    def __init__(self, host: np.ndarray) -> None:
        self.host = host
        self.shape, self.dtype = host.shape, host.dtype

    def __dlpack__(self, **kwargs):
        return self.host.__dlpack__()

    def __dlpack_device__(self):
        return (2, 0)


class DLPackOnly:
    """A GPU array known only by DLPack (no ``__cuda_array_interface__``)."""

    def __init__(self, t) -> None:
        self.t, self.shape, self.dtype = t, t.shape, t.dtype

    def __dlpack__(self, **kwargs):
        return self.t.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


def affine(x, out, k):
    out[lane()] = x * k
    return x + 1.0, k * 2.0


def with_sum(x, out):
    s = lanesum(x)  # a sync point: the phases strategy
    out[lane()] = x / s
    return x * s


def trips(x, n):
    s = 0.0
    i = 0
    while i < n:  # a uniform loop around a sync point: the host drives it
        s += lanesum(x * i)  # a kernel each trip, then the host reads its result
        i += 1
    return s


def test_numpy_in_numpy_out_and_the_stats():
    k = hydra.compile(affine, varying="x", backend="cuda")
    out = np.zeros(8)
    y, k2 = k(np.arange(8.0), out, 3.0)
    assert type(y) is np.ndarray and k2 == 6.0
    np.testing.assert_array_equal(out, np.arange(8.0) * 3)
    # the error counter, the varying result, the uniform one, the written array
    assert k.last_run_stats == {"launches": 1, "host_round_trips": 4, "uploads": 2}
    assert hydra.compile(affine, varying="x", backend="numpy").last_run_stats == {}


_FAKE_ON_GPU = pytest.mark.skipif(_on_gpu(), reason="the fake hands host memory as CUDA "
                                  "memory: on a GPU the CuPy and torch tests cover DLPack")


@pytest.mark.parametrize("kind", ["numba", "interface", pytest.param("dlpack", marks=_FAKE_ON_GPU)])
def test_device_arguments_are_used_in_place_and_results_stay_there(kind):
    from numba import cuda
    x_host, out_host = np.arange(8.0), np.zeros(8)
    if kind == "numba":
        x, out = cuda.to_device(x_host), cuda.to_device(out_host)
    elif kind == "interface":
        x, out = FakeInterface(x_host), FakeInterface(out_host)
    else:
        x, out = FakeDLPack(x_host), FakeDLPack(out_host)
    k = hydra.compile(affine, varying="x", backend="cuda")
    y, k2 = k(x, out, 3.0)
    written = out.copy_to_host() if kind == "numba" else \
        out.contents() if kind == "interface" else out_host
    np.testing.assert_array_equal(written, x_host * 3)  # in place, no copy back
    assert hasattr(y, "copy_to_host"), "a varying result stays on the device"
    np.testing.assert_array_equal(y.copy_to_host(), x_host + 1)
    assert k2 == 6.0
    # the error counter and the uniform result: nothing else comes back
    assert k.last_run_stats["host_round_trips"] == 2
    assert k.last_run_stats["uploads"] == 0


def test_phases_keep_device_arrays_that_only_kernels_touch():
    from numba import cuda
    x_host = np.arange(1.0, 9.0)
    k = hydra.compile(with_sum, varying="x", backend="cuda")
    out = cuda.to_device(np.zeros(8))
    y = k(cuda.to_device(x_host), out)
    np.testing.assert_allclose(out.copy_to_host(), x_host / x_host.sum())
    np.testing.assert_array_equal(y.copy_to_host(), x_host * x_host.sum())
    stats = k.last_run_stats
    # lanesum reads x on the host (one copy), each kernel's error counter; out never moves
    assert stats["host_round_trips"] <= stats["launches"] + 1
    want = k.last_run_stats
    k(cuda.to_device(x_host), out)
    assert k.last_run_stats == want, "the same call moves the same data"


def test_round_trips_per_loop_trip_are_counted():
    from numba import cuda
    k = hydra.compile(trips, varying="x", backend="cuda")
    x = cuda.to_device(np.arange(4.0))
    counts = []
    for n in (1, 3):
        assert k(x, n) == 6.0 * n * (n - 1) / 2
        counts.append(k.last_run_stats["host_round_trips"])
    assert counts[1] > counts[0]


def test_read_only_device_arrays_are_refused_as_host_ones_are():
    k = hydra.compile(affine, varying="x", backend="cuda")
    frozen = np.zeros(4)
    frozen.flags.writeable = False
    with pytest.raises(KernelValueError, match="argument 'out' is read-only") as host:
        k(np.arange(4.0), frozen, 1.0)
    with pytest.raises(KernelValueError, match="argument 'out' is read-only") as dev:
        k(np.arange(4.0), FakeInterface(np.zeros(4), readonly=True), 1.0)
    assert str(dev.value) == str(host.value)
    # read, not written: accepted
    y, _ = k(FakeInterface(np.arange(4.0), readonly=True), np.zeros(4), 1.0)
    np.testing.assert_array_equal(y.copy_to_host(), np.arange(4.0) + 1)


def gather(x, idx):
    return x[idx[lane()]]


@pytest.mark.parametrize("fn", ["one kernel", "phases"])
def test_device_side_errors_name_the_lane(fn):
    from numba import cuda
    table = cuda.to_device(np.arange(5.0))
    idx = cuda.to_device(np.array([0, 1, 7, 2], dtype=np.int64))
    if fn == "one kernel":
        k = hydra.compile(gather, backend="cuda", lanes=4)
        with pytest.raises(KernelIndexError, match="index 7 is out of bounds") as e:
            k(table, idx)
    else:
        def gather_sum(x, idx):
            return x[idx[lane()]] + lanesum(lane())
        k = hydra.compile(gather_sum, backend="cuda", lanes=4)
        with pytest.raises(KernelIndexError, match="index 7 is out of bounds") as e:
            k(table, idx)
    assert e.value.lane == 2


@needs_gpu
@pytest.mark.parametrize("kind", ["cupy", "torch", "torch-dlpack"])
def test_gpu_cupy_and_torch_arrays_in_place_and_results_of_their_kind(kind):
    x_host = np.arange(64.0)
    if kind == "cupy":
        cupy = pytest.importorskip("cupy")
        x, out = cupy.asarray(x_host), cupy.zeros(64)
        back = cupy.asnumpy
    else:
        torch = pytest.importorskip("torch")
        x, out = torch.arange(64.0, device="cuda", dtype=torch.float64), \
            torch.zeros(64, device="cuda", dtype=torch.float64)
        back = (lambda t: t.detach().cpu().numpy())
        if kind == "torch-dlpack":  # known by DLPack only: results as numba device arrays
            x = DLPackOnly(x)
            back = (lambda t: t.copy_to_host() if hasattr(t, "copy_to_host") else
                    t.detach().cpu().numpy())
    k = hydra.compile(affine, varying="x", backend="cuda")
    y, _ = k(x, out, 3.0)
    assert type(y) is type(x) or kind == "torch-dlpack" and hasattr(y, "copy_to_host")
    np.testing.assert_array_equal(back(y), x_host + 1)
    np.testing.assert_array_equal(back(out), x_host * 3)


def float_total(x, acc, table):
    atomic_add(acc, 0, x * table[0])  # a float atomic_add: the host adds, in lane order
    return x


def test_a_device_array_a_host_op_writes_goes_to_the_host_and_back():
    from numba import cuda
    acc, table = cuda.to_device(np.zeros(1)), cuda.to_device(np.array([2.0]))
    k = hydra.compile(float_total, varying="x", backend="cuda")
    x = cuda.to_device(np.arange(8.0))
    k(x, acc, table)
    assert acc.copy_to_host()[0] == np.arange(8.0).sum() * 2
    # to the host: acc, the values the host adds, the kernel's error counter; back: acc
    # (x and table, read by the kernel only, never move)
    assert k.last_run_stats == {"launches": 1, "host_round_trips": 3, "uploads": 1}
    k(x, acc, table)
    assert acc.copy_to_host()[0] == np.arange(8.0).sum() * 4
