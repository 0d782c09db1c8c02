"""The daemon only loops over cycles, sleeping ``cycle_period`` between them.

SIGTERM and SIGINT end the loop after the current cycle. A ``daemon.lock`` tells other
processes (``gridsub --wait``) that cycles are being driven and they need not drive them. A
cycle that fails is logged with its traceback and the loop goes on: each state change is its
own transaction, so a half-done cycle leaves nothing to repair.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from cigri.cycle import run_logged
from cigri.errors import Busy, CigriError, Fenced
from cigri.grid import Grid
from cigri.leadership import Leadership
from cigri.locks import cycle_lock_path, daemon_lock_path, held

log = logging.getLogger("cigri.daemon")


def daemon_running(grid: Grid) -> bool:
    """True if some process holds the daemon lock."""
    return held(daemon_lock_path(grid.config.home))


class Stop(Protocol):
    """What stops a loop: a threading Event, or the server's pipe to its cycle process."""

    def is_set(self) -> bool: ...
    def wait(self, timeout: float | None = None) -> bool: ...


@dataclass
class LoopStatus:
    """What the cycle loop has done, for ``/healthz``: when the last cycle started and ended,
    whether it failed, and how many failed in a row."""

    started_at: float | None = None
    ended_at: float | None = None
    failures_in_a_row: int = 0
    last_error: str | None = None


def run_daemon(grid: Grid, max_cycles: int | None = None) -> int:
    """Loop every ``cigri.cycle_period`` until signalled (or ``max_cycles``); return how many cycles ran."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    with daemon_lock(grid):
        log.info("daemon started, period %ss, lock %s", grid.config.settings.cycle_period, cycle_lock_path(grid.config.home))
        cycles = cycle_loop(grid, stop, max_cycles)
    log.info("daemon stopped after %s cycle(s)", cycles)
    return cycles


@contextmanager
def daemon_lock(grid: Grid) -> Iterator[None]:
    """Be the one process driving this grid's cycles (a daemon or a server); Busy if another is."""
    with open(daemon_lock_path(grid.config.home), "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Busy(f"a cigri daemon or server already runs for {grid.config.home}") from None
        yield


def cycle_loop(grid: Grid, stop: Stop, max_cycles: int | None = None,
               report: Callable[[LoopStatus], None] = lambda status: None) -> int:
    """Run cycles ``cigri.cycle_period`` apart until ``stop`` is set (or ``max_cycles``); a
    failed cycle is logged (by :func:`run_logged`) and the next one starts clean. ``report``
    sees the status as each cycle starts and ends. Return how many cycles ran."""
    status = LoopStatus()
    cycles = 0
    leadership = Leadership(grid)
    try:
        while not stop.is_set() and (max_cycles is None or cycles < max_cycles):
            status.started_at = time.time()
            report(status)
            try:
                if leadership.lead():  # a standby server (PostgreSQL) waits for the lease
                    run_logged(grid)
                status.failures_in_a_row, status.last_error = 0, None
            except (Busy, Fenced) as error:
                log.info("%s", error)
            except Exception as error:  # logged by run_logged; every change is its own transaction
                status.failures_in_a_row += 1
                status.last_error = f"{type(error).__name__}: {' '.join(str(error).split())}"
            status.ended_at = time.time()
            report(status)
            cycles += 1
            stop.wait(grid.config.settings.cycle_period)
    finally:
        with contextlib.suppress(CigriError):  # the store gone: the lease expires by itself
            leadership.release()
    return cycles
