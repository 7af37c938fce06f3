"""The array namespace of a launch and the strict shim that stands in for CuPy in CI
(``hydra/arraynamespace.py``, the cuda-ready issue, item 2): the shim refuses every
implicit transfer to the host, counts the explicit ones, and a test fails on a transfer
it did not expect.  The namespace-generic rules run on NumPy and under the shim, and
the cuda backend's portable device path of the cross-lane intrinsics runs under it."""

import numpy as np
import pytest

import hydra
from hydra import arraynamespace as an
from hydra import lane, lanemin, lanesum, prefixsum
from hydra.backends import available

XS = np.array([3.0, -1.0, 4.0, 1.0, -5.0, 9.0, 2.0, 6.0])
MASK = np.array([1, 0, 1, 1, 0, 1, 1, 0], dtype=bool)


def test_the_namespace_is_chosen_at_launch(monkeypatch):
    monkeypatch.delenv("HYDRA_ARRAY_NAMESPACE", raising=False)
    assert an.choose("numpy") is np and an.choose("cpu") is np
    if available("cuda"):
        from numba import config
        if config.ENABLE_CUDASIM:
            assert an.choose("cuda") is np  # the simulator's device memory is host memory
    monkeypatch.setenv("HYDRA_ARRAY_NAMESPACE", "strict")
    assert an.choose("cpu") is an.strict() and isinstance(an.strict(), an.Strict)


@pytest.mark.parametrize("convert", [np.asarray, np.array, int, float, bool, complex,
                                     lambda a: [0, 1, 2][a], lambda a: 1 if a else 0,
                                     lambda a: np.ones(1) + a],
                         ids=["asarray", "array", "int", "float", "bool", "complex",
                              "index", "if", "mixed-with-numpy"])
def test_the_shim_refuses_implicit_conversions_to_the_host(convert):
    xp = an.Strict()
    one = xp.asarray(np.array([1]))[0]  # a 0-d device value: int() works on NumPy's
    with pytest.raises(TypeError):
        convert(one)
    assert xp.transfers["to_host"] == 0


def test_the_shim_counts_explicit_transfers_and_keeps_a_budget():
    xp = an.Strict()
    a = xp.asarray(XS)
    assert xp.transfers == {"to_host": 0, "to_device": 1}
    total = xp.sum(a * 2.0)
    assert isinstance(total, an.StrictArray) and total.shape == ()  # a device value
    assert xp.asnumpy(total) == XS.sum() * 2 and total.item() == XS.sum() * 2
    np.testing.assert_array_equal(a.get(), XS)
    assert xp.transfers["to_host"] == 3
    with xp.budget(to_host=1):
        xp.asnumpy(a)
        with pytest.raises(an.UnexpectedTransfer):
            xp.asnumpy(a)
    with xp.budget(to_host=0):  # hidden syncs of CuPy count too
        with pytest.raises(an.UnexpectedTransfer):
            a[a > 0]
        with pytest.raises(an.UnexpectedTransfer):
            xp.nonzero(a)


@pytest.mark.parametrize("ufunc, identity", [("add", 0), ("multiply", 1), ("minimum", np.inf),
                                              ("maximum", -np.inf)])
def test_the_generic_rules_agree_on_numpy_and_under_the_shim(ufunc, identity):
    xp = an.Strict()
    with xp.budget(to_host=0):  # nothing leaves the device
        got = an.lane_reduce(xp, ufunc, xp.asarray(XS), xp.asarray(MASK), identity)
        scan = an.exclusive_sum(xp, xp.asarray(XS), xp.asarray(MASK), np.float64)
    want = getattr(np, ufunc).reduce(XS[MASK])
    assert an.lane_reduce(np, ufunc, XS, MASK, identity) == want
    assert xp.asnumpy(got) == want
    v = np.where(MASK, XS, 0.0)
    np.testing.assert_array_equal(xp.asnumpy(scan), np.cumsum(v) - v)
    with xp.budget(to_host=1):  # the one number the host must know
        assert an.active_count(xp, xp.asarray(MASK), 8) == MASK.sum()


def narrow(x):
    y = x + 1  # an int16 phase: a type the cross-lane kernels do not take
    s = lanesum(y)
    lo = lanesum(y) * 0
    if lane() % 2 == 0:
        lo = lanemin(y)
    return s, lo, prefixsum(y)


def _on_gpu() -> bool:
    if not available("cuda"):
        return False
    from numba import config
    return not config.ENABLE_CUDASIM


@pytest.mark.skipif(not available("cuda") or _on_gpu(),
                    reason="numba.cuda unusable here, or a GPU (the shim wraps simulator memory)")
def test_the_portable_device_path_runs_under_the_shim(monkeypatch):
    from hydra.backends.cuda import crosslane
    monkeypatch.setenv("HYDRA_CUDA_CROSSLANE", "block")
    monkeypatch.setenv("HYDRA_ARRAY_NAMESPACE", "strict")
    ran = []
    portable = crosslane.run_portable

    def spy(op, *args):
        ran.append(op.attrs["name"])
        return portable(op, *args)
    monkeypatch.setattr(crosslane, "run_portable", spy)
    x = (np.arange(12) * 37 % 23 - 11).astype(np.int16)
    xp = an.strict()
    before = dict(xp.transfers)
    # each lanesum: its value; lanemin: is any lane active, its value; prefixsum: none
    with xp.budget(to_host=4):
        got = hydra.compile(narrow, varying="x", backend="cuda")(x)
    want = hydra.compile(narrow, varying="x", backend="numpy")(x)
    assert xp.transfers["to_host"] - before["to_host"] == 4
    assert sorted(ran) == ["lanemin", "lanesum", "lanesum", "prefixsum"]
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_array_equal(g, w)


@pytest.mark.skipif(not _on_gpu(), reason="needs a real GPU and CuPy (the shim stands in "
                                          "for CuPy here)")
def test_gpu_the_generic_rules_on_cupy():
    cupy = pytest.importorskip("cupy")
    assert an.choose("cuda") is cupy
    x, m = cupy.asarray(XS), cupy.asarray(MASK)
    for ufunc, identity in [("add", 0), ("minimum", np.inf), ("logical_or", False)]:
        got = an.lane_reduce(cupy, ufunc, x if ufunc != "logical_or" else x > 3, m, identity)
        assert isinstance(got, cupy.ndarray) and got.shape == ()  # still on the device
        want = getattr(np, ufunc).reduce((XS if ufunc != "logical_or" else XS > 3)[MASK])
        assert cupy.asnumpy(got) == want
    v = np.where(MASK, XS, 0.0)
    np.testing.assert_array_equal(cupy.asnumpy(an.exclusive_sum(cupy, x, m, np.float64)),
                                  np.cumsum(v) - v)
    assert an.active_count(cupy, m, 8) == MASK.sum()
