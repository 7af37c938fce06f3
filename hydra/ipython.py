"""IPython/Jupyter magics: ``%load_ext hydra``, ``%%spmd N``, ``%hydra_ir``.

``%%spmd N [--varying a,b] [--backend B]`` runs the cell as the body of an N-lane
program.  Names the cell reads from the notebook are its uniform inputs (those in
``--varying`` are varying: one entry per lane); modules and functions of the
notebook are visible as in a normal cell.  Prints come out in lockstep, and the
value of the cell's last expression is returned per lane (an array of N values, or
one value where the compiler proves it uniform).

``%hydra_ir [--stage S] [--after PASS] kernel [arg ...]`` shows the kernel's IR,
highlighted, and for the ssa/predicated stages a picture of the control flow.
The argument types come from the example arguments (Python expressions evaluated in
the notebook, separated by spaces or commas: ``np.linspace(0, 2, 6) 3``), or from the
kernel's most recent call.

As IPython's own magics do, ``-h`` prints the usage, a mistake in the options is a
``UsageError`` (a one-line message, no traceback), and ``%hydra_ir?`` shows the help.
A hydra error raised by a ``%%spmd`` cell is shown as its message alone (the cell's
file, line and source line, and what went wrong), without hydra's own frames.
"""

from __future__ import annotations

import argparse
import ast
import io
import itertools
import linecache
import re
import shlex
import tokenize

import numpy as np

from .__main__ import UsageError, annotation_types, check_count, ir_options, parse_sig
from .api import Kernel
from .errors import HydraError
from .irview import cfg_svg, highlight_html

_cells = itertools.count(1)


def _cell_inputs(tree: ast.Module, namespace: dict) -> list[str]:
    """Names the cell reads, never assigns, and that hold numbers or arrays."""
    names = [n for n in ast.walk(tree) if isinstance(n, ast.Name)]
    stored = {n.id for n in names if isinstance(n.ctx, ast.Store)}
    loaded = [n.id for n in names if isinstance(n.ctx, ast.Load)]
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
    body = tree.body or [ast.Pass(lineno=1, col_offset=0)]
    last = body[-1]
    if isinstance(last, ast.Expr) and not _is_print(last.value):
        body[-1] = ast.copy_location(ast.Return(last.value), last)  # at the user's line
    fn_def = ast.parse(f"def spmd_cell({', '.join(inputs)}): pass").body[0]
    fn_def.body = body
    module = ast.fix_missing_locations(ast.Module([fn_def], []))
    filename = f"<hydra-cell-{next(_cells)}>"
    # The cell's own text under its name: errors name the cell's lines and show its text
    # (never a "return" the cell does not have); hydra reads the function's AST from
    # ``__hydra_node__`` (see frontend.source.parse_function), not from that text.
    linecache.cache[filename] = (len(cell), None, cell.splitlines(True), filename)
    scope = dict(namespace)
    exec(compile(module, filename, "exec"), scope)
    fn = scope["spmd_cell"]
    fn.__hydra_node__ = fn_def
    kernel = Kernel(fn, lanes=lanes, varying=tuple(varying), backend=backend)
    return kernel, [namespace[n] for n in inputs]


def _is_print(node: ast.expr) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "print")


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting the kernel (``SystemExit``)."""

    def error(self, message):
        raise UsageError(f"{message}\n{self.format_usage().rstrip()}")


def _spmd_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="%%spmd", add_help=False,
                description="Run the cell as the body of an N-lane SPMD program.")
    p.add_argument("lanes", type=int, nargs="?", help="the number of lanes N")
    p.add_argument("--varying", default="",
                   help="comma-separated notebook names that hold one value per lane")
    p.add_argument("--backend", default=None, help="numpy, cpu or cuda")
    p.add_argument("-h", "--help", action="store_true", help="show this help")
    return p


def _ir_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="%hydra_ir", add_help=False,
                usage="%(prog)s [-h] [--stage S] [--after PASS] [--sig TYPES] kernel [arg ...]",
                description="Show a kernel's IR, highlighted, and its control flow.")
    ir_options(p)
    p.add_argument("-h", "--help", action="store_true", help="show this help")
    p.add_argument("kernel", nargs="?",
                   help="a hydra kernel of the notebook; then example arguments, Python "
                        "expressions separated by spaces or commas")
    return p


def _usage(parser: argparse.ArgumentParser, line: str, needs: str, missing: str):
    """The parsed options of ``line``, or None after printing the help for ``-h``; a
    usage error saying ``missing`` where the argument ``needs`` is not given."""
    opts = parser.parse_args(shlex.split(line))
    if opts.help:
        print(parser.format_help())
        return None
    if getattr(opts, needs) is None:
        raise UsageError(f"{missing}\n{parser.format_usage().rstrip()}")
    return opts


def spmd_magic(shell, line: str, cell: str):
    opts = _usage(_spmd_parser(), line, "lanes", "give the number of lanes")
    if opts is None:
        return None
    varying = [v.strip() for v in opts.varying.split(",") if v.strip()]
    try:
        kernel, args = cell_kernel(cell, shell.user_ns, opts.lanes, varying, opts.backend)
        return kernel(*args)
    except HydraError as e:
        e._hydra_cell = True  # shown as its message alone (see load_ipython_extension)
        raise


def split_ir_line(line: str) -> tuple[str, str]:
    """``%hydra_ir``'s line as (options and kernel name, example arguments' text): the
    arguments are Python expressions, which may contain spaces."""
    expect_value = False
    for m in re.finditer(r"""(?:[^\s"']+|"[^"]*"|'[^']*')+""", line):  # quotes: one word
        word = m.group()
        if expect_value:
            expect_value = False
        elif word.startswith("-"):
            expect_value = word in ("--stage", "--after", "--sig")
        else:
            return line[:m.end()], line[m.end():]
    return line, ""  # options only (shlex ignores trailing spaces)


def parse_examples(text: str, namespace: dict) -> list:
    """Evaluate example arguments separated by commas or by spaces (outside brackets)."""
    text = text.strip()
    try:
        tree = ast.parse(f"({text},)", mode="eval")
        parts = [ast.unparse(e) for e in tree.body.elts]
    except SyntaxError:
        parts = _split_on_spaces(text)
    values = []
    for part in parts:
        try:
            values.append(eval(part, namespace))  # noqa: S307  (the user's own notebook)
        except SyntaxError as e:
            raise UsageError(f"cannot read the example argument {part!r}: {e.msg}") from None
    return values


def _split_on_spaces(text: str) -> list[str]:
    """Pieces of ``text`` between spaces at bracket depth 0 (``f(a, b) 3`` -> 2)."""
    parts, depth, start, last_end = [], 0, 0, 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER):
                continue
            col = tok.start[1]
            if depth == 0 and col > last_end and text[start:col].strip():
                parts.append(text[start:col].strip())
                start = col
            depth += tok.string in "([{" and tok.type == tokenize.OP
            depth -= tok.string in ")]}" and tok.type == tokenize.OP
            last_end = tok.end[1]
    except tokenize.TokenError:
        pass  # unbalanced brackets: eval says so below
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _known_types(kernel: Kernel, sig: str | None) -> list:
    """The argument types of ``%hydra_ir`` without example arguments: ``--sig``, else
    the kernel's most recent call, else the function's annotations."""
    if sig is None and kernel._cache:
        return list(next(reversed(kernel._cache)))
    try:
        types = parse_sig(sig) if sig is not None else annotation_types(kernel.pyfunc)
    except UsageError as e:
        how = "check --sig" if sig is not None else (
            f"call {kernel.pyfunc.__name__} once or pass --sig (e.g. --sig "
            f"\"float64, float64[:], int64\"), or give example arguments")
        raise UsageError(f"the argument types are not known: {e}; {how}") from None
    return check_count(kernel, types)


def ir_views(kernel: Kernel, stage: str, after, args: list,
             sig: str | None = None) -> tuple[str, str | None]:
    """(IR text, SVG of the control flow or None) for ``%hydra_ir``."""
    if stage == "ast":
        return kernel.dump_ir("ast"), None
    types = None if args else _known_types(kernel, sig)
    text = kernel.dump_ir(stage, *args, types=types, after=after)
    svg = None
    if stage in ("ssa", "predicated"):  # the IR dump_ir printed, as a call builds it
        svg = cfg_svg(kernel.ir(stage, *args, types=types, after=after))
    return text, svg


def hydra_ir_magic(shell, line: str):
    from IPython.display import HTML, SVG, display
    head, rest = split_ir_line(line)
    opts = _usage(_ir_parser(), head, "kernel", "give the kernel to show")
    if opts is None:
        return
    kernel = shell.user_ns.get(opts.kernel)
    if not isinstance(kernel, Kernel):
        raise TypeError(f"{opts.kernel!r} is not a hydra kernel (make one with hydra.compile)")
    args = parse_examples(rest, shell.user_ns)
    text, svg = ir_views(kernel, opts.stage, opts.after, args, opts.sig)
    display(HTML(highlight_html(text)))
    if svg is not None:
        display(SVG(svg))


def _magic(shell, run):
    """``run`` for this shell, a mistake in the options shown as IPython's ``UsageError``
    (one line, no traceback)."""
    from IPython.core.error import UsageError as ShownUsage

    def magic(*line_and_cell):
        try:
            return run(shell, *line_and_cell)
        except UsageError as e:
            raise ShownUsage(str(e)) from None
    return magic


def load_ipython_extension(shell) -> None:
    spmd, hydra_ir = _magic(shell, spmd_magic), _magic(shell, hydra_ir_magic)
    # what %%spmd? and %hydra_ir? show
    spmd.__doc__ = _spmd_parser().format_help() + _SPMD_MORE
    hydra_ir.__doc__ = _ir_parser().format_help() + _IR_MORE
    shell.register_magic_function(spmd, magic_kind="cell", magic_name="spmd")
    shell.register_magic_function(hydra_ir, magic_kind="line", magic_name="hydra_ir")
    if not shell.custom_exceptions:  # never replace a handler the user set
        shell.set_custom_exc((HydraError,), _show_cell_error)


_SPMD_MORE = """
Names the cell reads from the notebook are its uniform inputs; prints come out in
lockstep; the value of the last expression is returned per lane (or once, where it is
uniform).  Example:

    %%spmd 4 --varying xs
    y = xs * 2
    y
"""

_IR_MORE = """
The argument types come from the example arguments, from --sig, from the kernel's most
recent call, or from the function's annotations.  Example:

    %hydra_ir --stage ssa k np.linspace(0, 2, 6) 3
"""


def _show_cell_error(shell, etype, value, tb, tb_offset=None):
    """IPython's handler for hydra errors: one raised by a %%spmd cell is its message
    alone (hydra's frames say nothing about the user's cell); others as usual."""
    if getattr(value, "_hydra_cell", False):
        stb = [f"{etype.__name__}: {value}"]
    else:
        stb = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
    shell._showtraceback(etype, value, stb)
    return stb
