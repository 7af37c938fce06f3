"""Long compiles (issue 11, item 15): the cpu backend compiles a kernel's LLVM once per
process, into one object file that runs it on any number of threads (it was once linked
into five numba libraries, each generating its machine code again; since issue 15 no
numba library is involved), and the progress notice names each stage of a long
compile."""

import importlib.util

import numpy as np
import pytest

import hydra
from hydra import progress
from hydra.backends import available
from hydra.backends.machinecode import functions

pytestmark = pytest.mark.skipif(not available("cpu"), reason="no cpu backend")


def long_kernel(tmp_path, lines: int):
    """A generated straight-line kernel with ifs, ``lines`` statements long."""
    body = ["    a = x", "    b = x * 0.5"]
    for i in range(lines):
        if i % 5 == 4:
            body += ["    if a > b:", f"        a = a - 0.{i % 9 + 1}"]
        else:
            body.append(f"    a = a * 1.0{i % 7} + b * 0.00{i % 3}")
    src = "from hydra import lane\n\n\ndef big(x, out):\n" + "\n".join(body) + \
        "\n    out[lane()] = a + b\n"
    path = tmp_path / f"big{lines}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"big{lines}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.big


def test_the_kernel_is_compiled_once_into_one_driver_for_any_thread_count(tmp_path,
                                                                         monkeypatch):
    from numba.core import codegen
    compiled = []
    real = codegen.JITCodeLibrary._finalize_specific

    def spy(self):  # the libraries that get machine code for a hydra kernel
        if any(f.name.startswith("hydra_") and not f.is_declaration
               for f in self._final_module.functions):
            compiled.append(self.name)
        return real(self)
    monkeypatch.setattr(codegen.JITCodeLibrary, "_finalize_specific", spy)
    big = long_kernel(tmp_path, 60)
    k = hydra.compile(big, varying="x", backend="cpu", threads=2)
    x = np.linspace(0, 1, 20_000)
    out = np.zeros_like(x)
    built = len(functions.BUILT)
    k(x, out)  # enough lanes for the threads (2 when the machine has them)
    ref = np.zeros_like(x)
    hydra.compile(big, varying="x", backend="numpy")(x, ref)
    np.testing.assert_array_equal(out, ref)
    assert len(functions.BUILT) == built + 1  # the LLVM was compiled once
    assert compiled == []  # by llvmlite alone: numba made no machine code for it
    k(x[:100], out[:100])  # a serial run uses the same machine code
    assert len(functions.BUILT) == built + 1 and compiled == []


def test_a_long_compile_names_its_stages(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("HYDRA_QUIET", raising=False)
    monkeypatch.setattr(progress.progress.__wrapped__, "__defaults__", (0.0,))  # at once
    big = long_kernel(tmp_path, 20)
    out = np.zeros(8)
    hydra.compile(big, varying="x", backend="cpu")(np.zeros(8), out)
    lines = capsys.readouterr().err.splitlines()
    compiling = "hydra: compiling big(float64, array[float64, 1d]) for cpu"
    building = "hydra: building the native code of big"
    assert lines[:5] == [f"{compiling} ...", f"{compiling}: building the typed SSA ...",
                         f"{compiling}: running the passes ...",
                         f"{compiling}: generating cpu code ...", lines[4]]
    assert lines[4].startswith(f"{compiling}: done in ")
    assert lines[5:8] == [f"{building} ...", lines[6], lines[7]]
    assert lines[6].startswith(f"{building}: LLVM: optimizing and compiling the kernel (")
    assert lines[6].endswith(" lines of LLVM IR) to machine code ...")
    assert lines[7].startswith(f"{building}: done in ")
    assert len(lines) == 8


def test_quiet_silences_the_notices(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HYDRA_QUIET", "1")
    monkeypatch.setattr(progress.progress.__wrapped__, "__defaults__", (0.0,))
    hydra.compile(long_kernel(tmp_path, 7), varying="x", backend="cpu")(np.zeros(4),
                                                                         np.zeros(4))
    assert capsys.readouterr().err == ""


def test_a_notice_shows_the_stage_it_is_in(capsys, monkeypatch):
    monkeypatch.delenv("HYDRA_QUIET", raising=False)
    import threading
    shown = threading.Event()
    with progress.progress("compiling f", after=0.01):
        progress.stage("step one")
        for _ in range(200):
            if capsys.readouterr().err:
                shown.set()
                break
            threading.Event().wait(0.01)
        progress.stage("step two")
    err = capsys.readouterr().err.splitlines()
    assert shown.is_set()
    assert err[0] == "hydra: compiling f: step two ..." and err[1].startswith(
        "hydra: compiling f: done in")
