"""The executor's policy: when per-lane array code runs on the active lanes' rows only.

Compaction (SPEC section 8, ML.md "Masking or compaction") is an optimization: a
region that compacts must give what the masked region gives.  So the reference backend
never compacts (it is the oracle that compaction is checked against), and the other
backends take their policy from the kernel's ``compaction`` option:

- ``"auto"`` (the default): the thresholds below, measured in bench/RESULTS.md;
- ``"off"``: every region runs masked over all lanes;
- a ``Policy``: set by tests and benchmarks (forced compaction at any count, the
  trip-count sort or the planned compacted steps switched off).

The backend hands its policy to the host that runs a kernel (``Host.policy``); every
step reads its host's.  A host made inside a kernel's run without one takes the
policy of the run in progress (``current``).
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Policy:
    #: compact one heavy operation's active rows when fewer than this fraction of the
    #: lanes are active: ML.md measured compaction faster than masking below about 0.9
    #: (0: never; above 1: always, even with every lane active)
    op_below: float = 0.9
    #: compact a varying loop once fewer than this fraction of its lanes are active.
    #: For one product the crossover is about 0.9 (a gather and a scatter around every
    #: product); a loop's carried rows are gathered once for all its later steps, and
    #: every masked step costs a select per carried value besides the idle rows, so a
    #: loop compacts at its first inactive lane (1.0; measured in bench/RESULTS.md)
    loop_below: float = 1.0
    #: once compacted, gather the carried rows again (where the active lanes are not a
    #: prefix) when fewer than this fraction of the compacted lanes are active: a gather
    #: of the carried rows costs about 1% of a step around a 256-wide product, a masked
    #: row its full share of the step
    regather_below: float = 0.95
    #: order a compacted loop's lanes by trip count where its loop test allows it
    sort: bool = True
    #: run a compacted region's steps as planned for its rows (``rowsteps``); False:
    #: its fused chains as they are, every other op by its host rule (for comparison)
    plan_steps: bool = True


AUTO = Policy()
OFF = Policy(op_below=0.0, loop_below=0.0)

#: the values of the ``compaction`` option
CHOICES = {"auto": AUTO, "off": OFF}


def of(option) -> Policy:
    """The policy of a ``compaction`` option value; ``ValueError``/``TypeError`` for
    anything else."""
    if isinstance(option, Policy):
        return option
    if isinstance(option, str) and option in CHOICES:
        return CHOICES[option]
    if isinstance(option, str) or option is None:
        raise ValueError(f"compaction must be 'auto' or 'off', not {option!r}")
    raise TypeError(f"compaction must be 'auto', 'off' or a hydra.executor.policy.Policy, "
                    f"not {type(option).__name__}")


_CURRENT: contextvars.ContextVar[Policy] = contextvars.ContextVar("hydra_policy",
                                                                 default=AUTO)


def current() -> Policy:
    """The policy of the kernel run in progress on this thread."""
    return _CURRENT.get()


def enter(policy: Policy):
    """Run a kernel's steps under ``policy`` until ``leave(token)``; the token."""
    return _CURRENT.set(policy)


def leave(token) -> None:
    _CURRENT.reset(token)
