"""The reference backend: the host rules (``host.py``) over every region, all lanes at
once.  It defines the semantics; the other backends must agree with it."""

from __future__ import annotations

from ..ir.core import Function
from .protocol import PROTOCOLS
from .host import Host
from .policy import OFF


class NumpyBackend:
    """The reference backend's entry point (see ``hydra.backends``): it takes the
    predicated IR and every option, none of which changes anything here (it never
    compacts: ``hydra.backends.policy``)."""

    protocol = PROTOCOLS["numpy"]

    @staticmethod
    def lowerable(op) -> tuple[bool, str]:
        return False, "the reference runs every op by its host rule"

    @staticmethod
    def compile(fn: Function, options: dict, structured=None):
        def run(args: list, lanes: int) -> list:
            return Host(fn, lanes, OFF)(args)  # the oracle never compacts
        return run
