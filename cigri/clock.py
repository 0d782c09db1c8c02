"""The time cigri's core reads: the wall clock, unless the simulator drives a virtual one.

Every timestamp the core writes comes from :func:`now` (through ``cigri.db.now``). ``cigri
simulate`` replaces the wall clock by a :class:`VirtualClock` for the length of a run, so the
real updator, colombo, metascheduler, runner and nikita run thousands of simulated hours in
seconds; nothing else changes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class VirtualClock:
    """Simulated time: it stands still until the simulator moves it forward."""

    def __init__(self, start: float) -> None:
        self.time = start

    def advance_to(self, moment: float) -> None:
        """Move to ``moment``; simulated time never goes back."""
        self.time = max(self.time, moment)


_virtual: VirtualClock | None = None


def now() -> float:
    return time.time() if _virtual is None else _virtual.time


@contextmanager
def virtual(start: float) -> Iterator[VirtualClock]:
    """Run the block on a virtual clock starting at ``start`` (one simulation at a time)."""
    global _virtual
    if _virtual is not None:
        raise RuntimeError("a virtual clock is already running")
    _virtual = VirtualClock(start)
    try:
        yield _virtual
    finally:
        _virtual = None
