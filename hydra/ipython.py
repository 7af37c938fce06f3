"""IPython/Jupyter magics: ``%load_ext hydra``, ``%%spmd N``, ``%hydra_ir``.

``%%spmd N [--varying a,b] [--backend B]`` runs the cell as the body of an N-lane
program.  Names the cell reads from the notebook are its uniform inputs (those in
``--varying`` are varying: one entry per lane); modules and functions of the
notebook are visible as in a normal cell.  Prints come out in lockstep, and the
value of the cell's last expression is returned per lane (an array of N values, or
one value where the compiler proves it uniform).

``%hydra_ir [--stage S] [--after PASS] kernel [arg ...]`` shows the kernel's IR,
highlighted, and for the ssa/predicated stages a picture of the control flow.
The argument types come from the example arguments (evaluated in the notebook),
or from the kernel's most recent call.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import linecache
import shlex

import numpy as np

from .api import STAGES, Kernel
from .ir.printer import print_function
from .irview import cfg_svg, highlight_html
from .passes import PASS_NAMES

_cells = itertools.count(1)


def _cell_inputs(tree: ast.Module, namespace: dict) -> list[str]:
    """Names the cell reads, never assigns, and that hold numbers or arrays."""
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Store)}
    loaded = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Load)]
    data = (bool, int, float, np.generic, np.ndarray, tuple)
    return [name for name in dict.fromkeys(loaded)
            if name not in stored and isinstance(namespace.get(name), data)]


def cell_kernel(cell: str, namespace: dict, lanes: int, varying=(), backend=None):
    """The Kernel and its arguments for a ``%%spmd`` cell."""
    tree = ast.parse(cell)
    inputs = _cell_inputs(tree, namespace)
    missing = [v for v in varying if v not in inputs]
    if missing:
        raise NameError(f"--varying names {missing} are not notebook values the cell reads")
    body = tree.body or [ast.Pass()]
    last = body[-1]
    if isinstance(last, ast.Expr) and not _is_print(last.value):
        body[-1] = ast.Return(last.value)
    fn_def = ast.FunctionDef(name="spmd_cell", args=ast.arguments(
        posonlyargs=[], args=[ast.arg(n) for n in inputs], kwonlyargs=[], kw_defaults=[],
        defaults=[]), body=body, decorator_list=[], returns=None, type_params=[])
    module = ast.fix_missing_locations(ast.Module([fn_def], []))
    source = ast.unparse(module) + "\n"
    filename = f"<hydra-cell-{next(_cells)}>"
    # Register the generated source so that hydra (and tracebacks) can read it back.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope = dict(namespace)
    exec(compile(source, filename, "exec"), scope)
    kernel = Kernel(scope["spmd_cell"], lanes=lanes, varying=tuple(varying), backend=backend)
    return kernel, [namespace[n] for n in inputs]


def _is_print(node: ast.expr) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "print")


def _spmd_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="%%spmd", add_help=False)
    p.add_argument("lanes", type=int)
    p.add_argument("--varying", default="")
    p.add_argument("--backend", default=None)
    return p


def _ir_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="%hydra_ir", add_help=False)
    p.add_argument("--stage", choices=STAGES, default="predicated")
    p.add_argument("--after", choices=PASS_NAMES, default=None)
    p.add_argument("kernel")
    p.add_argument("args", nargs="*")
    return p


def spmd_magic(shell, line: str, cell: str):
    opts = _spmd_parser().parse_args(shlex.split(line))
    varying = [v.strip() for v in opts.varying.split(",") if v.strip()]
    kernel, args = cell_kernel(cell, shell.user_ns, opts.lanes, varying, opts.backend)
    return kernel(*args)


def ir_views(kernel: Kernel, stage: str, after, args: list) -> tuple[str, str | None]:
    """(IR text, SVG of the control flow or None) for ``%hydra_ir``."""
    if args:
        text = kernel.dump_ir(stage, *args, after=after)
        types = kernel._signature(args)[1]
    elif stage == "ast":
        return kernel.dump_ir("ast"), None
    else:
        if not kernel._cache:
            raise ValueError("give example arguments (%hydra_ir kernel x y ...) or call the "
                             "kernel once first, so that its argument types are known")
        types = list(next(reversed(kernel._cache)))
        text = kernel.dump_ir(stage, types=types, after=after)
    svg = None
    if stage in ("ssa", "predicated"):
        from .frontend import build_function
        from .passes import run_pipeline
        fn = build_function(kernel.pyfunc, list(types))
        fn = run_pipeline(fn, set(kernel.varying),
                          stop_after=after or ("uniformity" if stage == "ssa" else None))
        assert print_function(fn) == text
        svg = cfg_svg(fn)
    return text, svg


def hydra_ir_magic(shell, line: str):
    from IPython.display import HTML, SVG, display
    opts = _ir_parser().parse_args(shlex.split(line))
    kernel = shell.user_ns.get(opts.kernel)
    if not isinstance(kernel, Kernel):
        raise TypeError(f"{opts.kernel!r} is not a hydra kernel (make one with hydra.compile)")
    args = [eval(a, shell.user_ns) for a in opts.args]  # noqa: S307  (the user's own notebook)
    text, svg = ir_views(kernel, opts.stage, opts.after, args)
    display(HTML(highlight_html(text)))
    if svg is not None:
        display(SVG(svg))


def load_ipython_extension(shell) -> None:
    shell.register_magic_function(lambda line, cell: spmd_magic(shell, line, cell),
                                  magic_kind="cell", magic_name="spmd")
    shell.register_magic_function(lambda line: hydra_ir_magic(shell, line),
                                  magic_kind="line", magic_name="hydra_ir")
