"""The reference backend: the host rules (``host.py``) over every region, all lanes at
once.  It defines the semantics; the other backends must agree with it."""

from __future__ import annotations

from ..ir.core import Function
from .host import Host


class NumpyBackend:
    """The reference backend's entry point (see ``hydra.backends``)."""

    name = "numpy"
    options: tuple[str, ...] = ()

    @staticmethod
    def compile(fn: Function, options: dict, structured=None):
        def run(args: list, lanes: int) -> list:
            return Host(fn, lanes)(args)
        return run
