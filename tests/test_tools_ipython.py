"""The IPython extension, driven through IPython's InteractiveShell."""

import numpy as np
import pytest

IPython = pytest.importorskip("IPython")
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402


@pytest.fixture(scope="module")
def shell():
    sh = InteractiveShell.instance()
    assert sh.run_cell("%load_ext hydra").success
    assert sh.run_cell("import numpy as np\nimport hydra\n"
                       "from hydra import lane, lanesum, nlanes").success
    return sh


@pytest.fixture
def shown(monkeypatch):
    """What the magics display, in order (IPython's ``display`` replaced)."""
    out = []
    monkeypatch.setattr("IPython.display.display", out.append)
    return out


def run(shell, cell):
    result = shell.run_cell(cell)
    if result.error_in_exec is not None:
        raise result.error_in_exec
    if result.error_before_exec is not None:
        raise result.error_before_exec
    return result.result


def test_spmd_prints_in_lockstep_and_returns_per_lane(shell, capsys):
    shell.user_ns["scale"] = 3
    out = run(shell, "%%spmd 4\nprint('a', lane())\nprint('b', lane())\nlane() * scale")
    assert capsys.readouterr().out.splitlines()[:8] == [
        "a 0", "a 1", "a 2", "a 3", "b 0", "b 1", "b 2", "b 3"]
    np.testing.assert_array_equal(out, [0, 3, 6, 9])


def test_spmd_uniform_result_is_one_value(shell):
    assert run(shell, "%%spmd 5\nlanesum(lane())") == 10


def test_spmd_varying_notebook_input(shell):
    shell.user_ns["xs"] = np.array([1.0, 2.0, 3.0])
    out = run(shell, "%%spmd 3 --varying xs\ny = xs * 2\nif y > 3:\n    y = -y\ny")
    np.testing.assert_array_equal(out, [2.0, -4.0, -6.0])


def test_spmd_compile_error_names_the_problem(shell):
    import hydra
    with pytest.raises(hydra.CompileError, match="try/except is not supported"):
        run(shell, "%%spmd 2\ntry:\n    x = 1\nexcept Exception:\n    x = 2\nx")


def test_hydra_ir_shows_html_and_svg(shell, shown):
    run(shell, "def halve(x):\n    while x > 1:\n        x = x / 2\n    return x\n"
               "k = hydra.compile(halve, varying=('x',), backend='numpy')\n_ = k(np.arange(4.0))")
    run(shell, "%hydra_ir k")
    html, svg = shown
    assert "hydra-ir" in html.data and '<span class="mask">%m</span>' in html.data
    assert svg.data.startswith("<svg") and "entry_mask" in svg.data
    assert "repeat while any lane is active" in svg.data
    shown.clear()
    run(shell, "%hydra_ir --stage ssa k np.arange(3.0)")
    assert "entry_mask" not in shown[0].data


def test_hydra_ir_needs_types(shell):
    """Before any call and without annotations: a one-line usage error saying what to
    do, not a traceback."""
    from IPython.core.error import UsageError
    run(shell, "fresh = hydra.compile(lambda x: x, varying=('x',), backend='numpy')")
    with pytest.raises(UsageError) as e:
        run(shell, "%hydra_ir fresh")
    assert str(e.value) == (
        "the argument types are not known: parameter 'x' of <lambda> has no annotation; "
        "give the types with --sig; call <lambda> once or pass --sig (e.g. --sig "
        "\"float64, float64[:], int64\"), or give example arguments")


def test_hydra_ir_before_any_call_uses_annotations_or_sig(shell, shown):
    run(shell, "def scaled(x: 'float32', k: int):\n    return x * k\n"
               "ann = hydra.compile(scaled, varying=('x',), backend='numpy')\n"
               "plain = hydra.compile(lambda x, k: x * k, varying=('x',), backend='numpy')")
    import html
    import re

    def text():
        return html.unescape(re.sub("<[^>]*>", "", shown.pop(0).data))
    run(shell, "%hydra_ir --stage ssa ann")
    shown_text = text()
    assert "%x: v float32" in shown_text and "%k: u int64" in shown_text
    shown.clear()
    run(shell, '%hydra_ir --stage ssa --sig "float64, int64" plain')
    shown_text = text()
    assert "%x: v float64" in shown_text and "%k: u int64" in shown_text
    from IPython.core.error import UsageError
    with pytest.raises(UsageError, match=r"--sig gives 1 type\(s\) but <lambda> takes 2"):
        run(shell, '%hydra_ir --sig "float64" plain')


def test_kernel_from_a_function_defined_in_a_cell(shell):
    run(shell, "def cell_fn(x):\n    if x % 2:\n        return x * 3\n    return x // 2\n")
    out = run(shell, "hydra.compile(cell_fn, varying=('x',))(np.arange(6))")
    np.testing.assert_array_equal(out, [0, 3, 1, 9, 2, 15])
    out = run(shell, "hydra.spmd(3, lambda: lane() * 10 + nlanes())")
    np.testing.assert_array_equal(out, [3, 13, 23])


def test_help_and_usage_mistakes_print_usage_not_system_exit(shell, capsys):
    from IPython.core.error import UsageError
    run(shell, "%hydra_ir -h")
    out = capsys.readouterr().out
    assert out.startswith(
        "usage: %hydra_ir [-h] [--stage S] [--after PASS] [--sig TYPES] kernel [arg ...]")
    run(shell, "%%spmd -h\npass")
    assert capsys.readouterr().out.startswith(
        "usage: %%spmd [--varying VARYING] [--backend BACKEND] [-h] [lanes]")
    with pytest.raises(UsageError) as e:
        run(shell, "%%spmd\nlane()")
    assert str(e.value) == ("give the number of lanes\n"
                            "usage: %%spmd [--varying VARYING] [--backend BACKEND] [-h] [lanes]")
    with pytest.raises(UsageError, match="argument --stage: invalid choice: 'nope'"):
        run(shell, "%hydra_ir --stage nope k")
    with pytest.raises(UsageError, match="give the kernel to show"):
        run(shell, "%hydra_ir")


def test_magics_have_docstrings(shell):
    ir = shell.find_line_magic("hydra_ir")
    spmd = shell.find_cell_magic("spmd")
    assert ir.__doc__.startswith("usage: %hydra_ir") and "example arguments" in ir.__doc__
    assert spmd.__doc__.startswith("usage: %%spmd") and "--varying" in spmd.__doc__


def test_hydra_ir_example_arguments_are_python_expressions(shell, shown):
    from hydra.ipython import parse_examples, split_ir_line
    ns = {"np": np, "n": 3}
    assert split_ir_line("--stage ssa k np.linspace(0, 2, 6) n") == (
        "--stage ssa k", " np.linspace(0, 2, 6) n")
    for text in ("np.linspace(0, 2, 6) n", "np.linspace(0, 2, 6), n", "np.linspace(0,2,6)  n"):
        got = parse_examples(text, ns)
        assert len(got) == 2 and got[1] == 3
        np.testing.assert_array_equal(got[0], np.linspace(0, 2, 6))
    assert parse_examples("n + 1", ns) == [4]
    run(shell, "def scaled(x, s):\n    return x * s\n"
               "ks = hydra.compile(scaled, varying=('x',), backend='numpy')")
    run(shell, "%hydra_ir --stage ssa ks np.linspace(0, 2, 6) np.float32(2)")
    assert ('<span class="value">%s</span>: <span class="u">u</span> float32)'
            in shown[0].data)


def test_hydra_ir_draws_the_ir_a_call_builds(shell, shown):
    """Array code whose shapes come from the arguments (``np.take`` of a constant
    tuple): the picture is drawn from the IR the text shows, built as a call builds it
    (it was rebuilt without shapes, and the magic failed with a shape error)."""
    run(shell, "def taken(x):\n    return np.take(x, (0, 2)).sum()\n"
               "kt = hydra.compile(taken, varying=('x',), backend='numpy')")
    run(shell, "%hydra_ir kt np.ones((4, 5))")
    html, svg = shown
    assert "take" in html.data and svg.data.startswith("<svg")
    import hydra
    k = hydra.compile(lambda x: x + 1, varying=("x",), backend="numpy")
    from hydra.ir.printer import print_function
    assert print_function(k.ir("predicated", np.ones(4))) == k.dump_ir("predicated", np.ones(4))
    with pytest.raises(ValueError, match="not IR"):
        k.ir("llvm", np.ones(4))


def test_an_error_in_a_spmd_cell_shows_only_the_users_line(shell, capsys):
    import hydra
    shell.user_ns["small"] = np.zeros(2)
    result = shell.run_cell("%%spmd 3\nsmall[lane()] = 1.0")
    assert isinstance(result.error_in_exec, hydra.HydraError)
    err = capsys.readouterr()
    shown = (err.out + err.err).replace("\x1b", "")
    assert "index 2 is out of bounds for axis 0 with size 2 (lane 2)" in shown
    assert "small[lane()] = 1.0" in shown
    assert "hydra/" not in shown and "Traceback" not in shown
    assert len(shown.strip().splitlines()) == 2
