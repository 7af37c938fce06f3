"""``python -m hydra dump-ir FILE::FUNC --lanes N --stage S [--sig TYPES] [--after PASS]``
and ``python -m hydra profile FILE::FUNC --setup NAME [--html out.html] [--trace t.json]``.

``dump-ir`` prints the IR of a kernel at one stage, with the same printer every tool
uses.  ``profile`` runs the kernel once on the arguments ``NAME()`` (a function in FILE
returning ``(args, kwargs)``) under ``hydra.profile`` and prints the table, writing the
HTML report and the Chrome trace where asked.
Argument types come from ``--sig`` (``"float32, float32[:], int64"``; ``[:]`` is a
1-d array, ``[:, :]`` 2-d) or the function's annotations.  ``--varying`` names the
varying parameters, unless FUNC is already a ``hydra.compile``d kernel.  Mistakes
(no such file, function or type) are one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys

import numpy as np

from .api import STAGES, Kernel
from .errors import CompileError, HydraError
from .passes import PASS_NAMES
from .types import ArrayType, Type, scalar


class UsageError(Exception):
    """A mistake on the command line: reported in one line."""


def parse_type(text: str) -> Type:
    """``float32`` -> scalar, ``float32[:]`` / ``float32[:, :]`` -> array,
    ``float32[3, 4]`` -> an array of that shape (whole-array code needs shapes)."""
    text = text.strip()
    ndim = 0
    shape = None
    if text.endswith("]") and "[" in text:
        base, dims = text[:-1].split("[", 1)
        parts = [d.strip() for d in dims.split(",")]
        if all(d.isdigit() for d in parts):  # float32[3, 4]: a shape (per-lane arrays)
            shape = tuple(int(d) for d in parts)
            parts = [":"] * len(parts)
        ndim = len([d for d in parts if d == ":"])
        if ndim == 0 or ndim != len(parts):
            raise UsageError(f"cannot read the type {text!r}: write arrays as float32[:] "
                             f"or float32[:, :]")
        text = base.strip()
    aliases = {"float": "float64", "int": "int64", "bool": "bool"}
    try:
        t = scalar(aliases.get(text, text))
    except TypeError:
        raise UsageError(f"unknown type {text!r}") from None
    return ArrayType(t, ndim, shape) if ndim else t


def parse_sig(sig: str) -> list[Type]:
    parts = re.split(r",(?![^\[]*\])", sig)  # at the commas outside [...]
    if not parts[-1].strip():
        parts.pop()  # a trailing comma, or no types at all
    return [parse_type(p) for p in parts]


def annotation_types(fn) -> list[Type]:
    import inspect
    types = []
    for p in inspect.signature(fn).parameters.values():
        ann = p.annotation
        if ann is inspect.Parameter.empty:
            raise UsageError(f"parameter '{p.name}' of {fn.__name__} has no annotation; "
                             f"give the types with --sig")
        if isinstance(ann, str):
            types.append(parse_type(ann))
        else:
            try:
                types.append(scalar(np.dtype(ann)))
            except TypeError:
                raise UsageError(f"cannot read the annotation of '{p.name}': {ann!r}") from None
    return types


def check_count(kernel: Kernel, types: list[Type]) -> list[Type]:
    if len(types) != len(kernel.param_names):
        raise UsageError(f"--sig gives {len(types)} type(s) but {kernel.pyfunc.__name__} takes "
                         f"{len(kernel.param_names)} parameter(s)")
    return types


def load_kernel(target: str, lanes: int | None, varying: list[str], backend: str | None,
                rebuild: bool = False, loaded=None, **options) -> Kernel:
    """The kernel FILE::FUNC names (a compiled one as it is, unless ``rebuild``: then
    with this backend and these options); ``loaded``: ``_load(target)``, already made."""
    obj, path, name, _ = loaded or _load(target)
    if isinstance(obj, Kernel):
        if varying:
            obj.varying = tuple(varying)
        if not rebuild or (backend is None and not options):
            return obj
        return Kernel(obj.pyfunc, lanes=obj.lanes, varying=obj.varying,
                      backend=backend or obj.backend_name, **{**obj.options, **options})
    if not callable(obj):
        raise UsageError(f"{name!r} in {path} is not a function")
    return Kernel(obj, lanes=lanes, varying=tuple(varying), backend=backend, **options)


def _load(target: str):
    """(the object FILE::FUNC names, the path, the name, the module)."""
    if "::" not in target:
        raise UsageError(f"expected FILE::FUNC, got {target!r}")
    path, name = target.rsplit("::", 1)
    if not os.path.isfile(path):
        raise UsageError(f"no such file: {path}")
    spec = importlib.util.spec_from_file_location("_hydra_dump_target", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's module failed to import
        raise UsageError(f"{path} failed to import: {type(exc).__name__}: {exc}") from None
    finally:
        sys.path.pop(0)
    obj = getattr(module, name, None)
    if obj is None:
        raise UsageError(f"{path} has no function {name!r}")
    return obj, path, name, module


def dump_ir(args) -> str:
    kernel = load_kernel(args.target, args.lanes, args.varying, args.backend)
    types = parse_sig(args.sig) if args.sig else (
        None if args.stage == "ast" else annotation_types(kernel.pyfunc))
    if types is not None:
        check_count(kernel, types)
    return kernel.dump_ir(args.stage, types=types, after=args.after)


def profile(args) -> str:
    options = {"threads": args.threads} if args.threads else {}
    loaded = _load(args.target)  # once: the user's file runs its top level once
    kernel = load_kernel(args.target, None, args.varying, args.backend, rebuild=True,
                         loaded=loaded, **options)
    module = loaded[3]
    setup = getattr(module, args.setup, None)
    if not callable(setup):
        raise UsageError(f"{args.target.rsplit('::', 1)[0]} has no function {args.setup!r} "
                         f"(--setup names a function returning (args, kwargs))")
    made = setup()
    if not (isinstance(made, tuple) and len(made) == 2 and isinstance(made[1], dict)):
        raise UsageError(f"{args.setup}() must return (args, kwargs), a tuple and a dict")
    call_args, kwargs = made
    if args.warm:
        kernel.instrumented()(*call_args, **kwargs)
    p = kernel.profile(*call_args, **kwargs)
    if args.html:
        p.save_html(args.html)
    if args.trace:
        p.save_trace(args.trace)
    return str(p) + "\n"


def ir_options(parser: argparse.ArgumentParser) -> None:
    """The options that choose which IR to show and for which types (``dump-ir`` here,
    ``%hydra_ir`` in a notebook)."""
    parser.add_argument("--stage", choices=STAGES, default="predicated")
    parser.add_argument("--after", choices=PASS_NAMES, default=None,
                        help="stop after this pass (ssa/predicated stages)")
    parser.add_argument("--sig", default=None,
                        help='argument types, e.g. "float32, float32[:], int64"')


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hydra", description="hydra tools")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump-ir", help="print a kernel's IR at one stage")
    d.add_argument("target", help="FILE::FUNC")
    d.add_argument("--lanes", type=int, default=8)
    ir_options(d)
    d.add_argument("--varying", default="", help="comma-separated varying parameters")
    d.add_argument("--backend", default=None, help="backend for llvm/asm/ptx/numba stages")
    q = sub.add_parser("profile", help="run a kernel under hydra.profile: lane utilization "
                                       "and time per source line")
    q.add_argument("target", help="FILE::FUNC")
    q.add_argument("--setup", required=True,
                   help="a function in FILE returning the call's (args, kwargs)")
    q.add_argument("--varying", default="", help="comma-separated varying parameters")
    q.add_argument("--backend", default=None, help="numpy, cpu or cuda")
    q.add_argument("--threads", type=int, default=None, help="cpu threads")
    q.add_argument("--warm", action="store_true",
                   help="run once before the profiled call (steady-state times)")
    q.add_argument("--html", default=None, help="write the HTML report here")
    q.add_argument("--trace", default=None, help="write the Chrome trace (JSON) here")
    args = parser.parse_args(argv)
    args.varying = [v.strip() for v in args.varying.split(",") if v.strip()]
    try:
        sys.stdout.write(dump_ir(args) if args.command == "dump-ir" else profile(args))
    except (UsageError, ValueError, TypeError) as exc:
        print(f"hydra {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:  # a backend that cannot load here (ptx without CUDA)
        what = f"stage {args.stage!r}" if args.command == "dump-ir" else "the backend"
        print(f"hydra {args.command}: error: {what} is not available here: {exc}",
              file=sys.stderr)
        return 1
    except HydraError as exc:  # a CompileError's text says where and what itself
        lead = "" if isinstance(exc, CompileError) else "error: "
        print(f"hydra {args.command}: {lead}{exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
