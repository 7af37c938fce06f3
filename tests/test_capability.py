"""Every opcode, intrinsic and math function the frontend accepts, against every
backend's lowering table: each is lowered natively or listed, with its reason, in the
backend's declared protocol (``hydra.backends.PROTOCOLS[name].host_only``, the one
documented place; the guide's table is generated from it), never both.  Plus the
protocol itself: options, stages, and what dump-ir says about host ops."""

import math

import numpy as np
import pytest

import hydra
from conftest import BACKENDS, TRANSCENDENTAL_ULPS
from hydra.backends import NO_EFFECT, PROTOCOLS, get_backend
from hydra.executor.rules import HOST_RULES
from hydra.executor.scalars import MATH
from hydra.frontend.calls import MATH_FUNCTIONS
from hydra.intrinsics import INTRINSICS
from hydra.ir.core import BINARY_OPS, OPCODES, UNARY_OPS
from hydra.types import ScalarType

#: the math functions the frontend emits (``round`` becomes rint)
MATH_FNS = sorted({ir for ir, _, _ in MATH_FUNCTIONS.values()} | {"rint"})
ENTRIES = ([o for o, info in OPCODES.items() if not info.terminator]
           + [f"intrinsic {n}" for n in INTRINSICS] + [f"math {f}" for f in MATH_FNS])


def native_cpu(key: str) -> bool:
    from hydra.backends.cpu import arith
    from hydra.backends.cpu.codegen import KernelGen
    kind, _, name = key.partition(" ")
    if kind == "intrinsic" and name:
        return "cpu" in INTRINSICS[name].lowerings
    if kind == "math" and name:
        return all(arith.native_math(name, ScalarType(t)) for t in ("float32", "float64"))
    return kind in BINARY_OPS or kind in UNARY_OPS or hasattr(KernelGen, "op_" + kind)


def native_cuda(key: str) -> bool:
    from hydra.backends.cuda.emit import EXPR_OPS, NATIVE_MATH
    from hydra.backends.cuda.structured import StructuredEmitter
    kind, _, name = key.partition(" ")
    if kind == "intrinsic" and name:
        return "cuda" in INTRINSICS[name].lowerings
    if kind == "math" and name:
        return name in NATIVE_MATH
    return kind in EXPR_OPS or hasattr(StructuredEmitter, "op_" + kind)


def test_the_reference_has_a_rule_for_everything():
    assert [o for o in ENTRIES if " " not in o and o not in HOST_RULES] == []
    assert [f for f in MATH_FNS if f not in MATH] == []
    assert all(callable(e.reference) for e in INTRINSICS.values())
    assert PROTOCOLS["numpy"].host_only == {}  # the reference runs everything itself


@pytest.mark.parametrize("which", ["cpu", "cuda"])
def test_every_entry_is_native_or_declared_host_only(which):
    if which not in BACKENDS:
        pytest.skip(f"the {which} backend is not available here")
    get_backend(which)  # importing the backend registers its intrinsic lowerings
    native = {"cpu": native_cpu, "cuda": native_cuda}[which]
    host_only = PROTOCOLS[which].host_only
    for key in ENTRIES:
        if native(key):
            assert key not in host_only, f"{which} lowers {key} but lists it as host-only"
        else:
            assert host_only.get(key), f"{which} neither lowers {key} nor says why not"
    assert set(host_only) <= set(ENTRIES), "host_only names something that does not exist"


def test_cross_lane_intrinsics_have_no_native_lowering_and_lane_local_ones_do():
    for which in ("cpu", "cuda"):
        if which in BACKENDS:
            get_backend(which)
            for name, e in INTRINSICS.items():
                assert (which in e.lowerings) == (not e.cross_lane), (which, name)


def _math_program(fn: str):
    f = getattr(math, fn, None) or getattr(np, fn)
    if MATH_FUNCTIONS.get(fn, (fn, 1))[1] == 2:
        return lambda x: f(x, x * 0.5 + 1.25)
    return lambda x: f(x)


@pytest.mark.skipif("cpu" not in BACKENDS, reason="the cpu backend is not available here")
@pytest.mark.parametrize("fn", [f for f in MATH_FNS if f != "rint"
                                and f"math {f}" not in PROTOCOLS["cpu"].host_only])
def test_every_math_function_runs_natively_on_cpu(fn):
    """No host step in the kernel, and the numpy backend's results within the
    documented ulp (asinh and friends included)."""
    x = np.concatenate([np.linspace(-0.95, 0.95, 40), np.linspace(1.05, 40.0, 40)])
    k = hydra.compile(_math_program(fn), varying=("x",), backend="cpu")
    assert "host step" not in k.dump_ir("llvm", x)
    got = k(x)
    want = hydra.compile(_math_program(fn), varying=("x",), backend="numpy")(x)
    if got.dtype == bool:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=TRANSCENDENTAL_ULPS * 2.0 ** -52,
                                   atol=0, equal_nan=True)


def slow_asinh(x):
    y = 0.0
    for i in range(10):
        y += math.asinh(x + i)
    return y


def with_sum(x):
    return hydra.lanesum(x) - x


@pytest.mark.skipif("cpu" not in BACKENDS, reason="the cpu backend is not available here")
def test_cpu_dump_names_each_host_step_and_why():
    x = np.linspace(0, 1, 50)
    text = hydra.compile(with_sum, varying=("x",), backend="cpu").dump_ir("llvm", x)
    assert "; host step (all lanes at once): intrinsic (line" in text
    assert "sync point: cross-lane lanesum" in text
    # the loop of the issue (math.asinh) now runs natively
    text = hydra.compile(slow_asinh, varying=("x",), backend="cpu").dump_ir("llvm", x)
    assert "host step" not in text and "hydra_vm_asinh" in text


@pytest.mark.parametrize("name", BACKENDS)
def test_each_backend_states_what_it_lowers_before_generating_code(name):
    from hydra.frontend import build_function
    from hydra.passes import run_pipeline
    from hydra.types import FLOAT64
    fn = run_pipeline(build_function(with_sum, [FLOAT64]), {"x"})
    lowerable = get_backend(name).lowerable
    verdicts = {op.opcode: lowerable(op) for op in fn.body.ops}
    ok, why = verdicts["intrinsic"]
    assert not ok and why
    assert verdicts["sub"][0] == (name != "numpy")  # the reference runs all on the host


@pytest.mark.skipif("cuda" not in BACKENDS, reason="the cuda backend is not available here")
def test_cuda_dump_names_each_host_op_and_why():
    text = hydra.compile(with_sum, varying=("x",), backend="cuda").dump_ir(
        "numba", np.linspace(0, 1, 8))
    assert "the host runs the rest:" in text
    assert "intrinsic (line" in text and "sync point: cross-lane lanesum" in text


# --- the declared protocol -------------------------------------------------------------

def double(x):
    return x * 2


@pytest.mark.parametrize("name", BACKENDS)
def test_unknown_option_is_a_type_error_naming_it(name):
    assert get_backend(name).protocol is PROTOCOLS[name]
    with pytest.raises(TypeError, match="'treads'"):
        hydra.compile(double, varying=("x",), backend=name, treads=2)


@pytest.mark.parametrize("name", BACKENDS)
def test_options_without_meaning_are_accepted(name):
    """Every option works on every backend (code can switch backends); where it has no
    meaning the protocol says so."""
    idle = {o: True for o, what in PROTOCOLS[name].options.items() if what == NO_EFFECT}
    if "threads" in idle:
        idle["threads"] = 3
    if "compaction" in idle:
        idle["compaction"] = "off"
    k = hydra.compile(double, varying=("x",), backend=name, **idle)
    np.testing.assert_array_equal(k(np.arange(5)), np.arange(5) * 2)
    assert set(PROTOCOLS[name].options) == set(PROTOCOLS["numpy"].options)


def test_numpy_and_cuda_declare_threads_as_no_effect():
    assert PROTOCOLS["numpy"].options["threads"] == NO_EFFECT
    assert PROTOCOLS["cuda"].options["threads"] == NO_EFFECT
    assert PROTOCOLS["cuda"].options["cache"] != NO_EFFECT


@pytest.mark.skipif("cuda" not in BACKENDS, reason="the cuda backend is not available here")
def test_cuda_cache_puts_the_kernel_source_in_the_cache_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("HYDRA_CACHE_DIR", str(tmp_path))
    k = hydra.compile(double, varying=("x",), backend="cuda", cache=True)
    np.testing.assert_array_equal(k(np.arange(4.0)), np.arange(4.0) * 2)
    sources = list(tmp_path.glob("hydra_cuda_*.py"))
    assert len(sources) == 1 and "def kernel_double" in sources[0].read_text()


def test_stages_come_from_the_protocols():
    from hydra.api import STAGES
    from hydra.backends import stage_backend
    assert set(STAGES) == {"ast", "ssa", "grad", "predicated", "numba", "llvm", "asm",
                           "steps", "ptx"}
    assert stage_backend("numpy", "asm") == "cpu"
    assert stage_backend("cuda", "numba") == "cuda"
    assert stage_backend("numpy", "ptx") == "cuda"
