"""The reference backend: the host rules (``hydra.executor.rules``) over every region,
all lanes at once.  It defines the semantics; the other backends must agree with it."""

from __future__ import annotations

from ..executor.host import Host
from ..executor.planner import Planner
from ..executor.policy import OFF
from ..ir.core import Function
from .protocol import PROTOCOLS


class NumpyBackend:
    """The reference backend's entry point (see ``hydra.backends``): it takes the
    predicated IR and every option, none of which changes anything here (it never
    compacts: ``hydra.executor.policy``)."""

    protocol = PROTOCOLS["numpy"]

    @staticmethod
    def launch_cores(options: dict, lanes: int | None) -> int:
        return 1

    @staticmethod
    def lowerable(op) -> tuple[bool, str]:
        return False, "the reference runs every op by its host rule"

    @staticmethod
    def compile(fn: Function, options: dict, structured=None):
        planner = Planner(fn)  # no loop compiler: every op by its host rule

        def run(args: list, lanes: int) -> list:
            return Host(fn, lanes, OFF, planner)(args)  # the oracle never compacts
        return run
