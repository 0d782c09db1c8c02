"""The daemon only loops over cycles, sleeping ``cycle_period`` between them.

SIGTERM and SIGINT end the loop after the current cycle. A ``daemon.lock`` tells other
processes (``gridsub --wait``) that cycles are being driven and they need not drive them. A
cycle that fails is logged with its traceback and the loop goes on: each state change is its
own transaction, so a half-done cycle leaves nothing to repair.
"""

from __future__ import annotations

import fcntl
import logging
import signal
import threading
from pathlib import Path

from cigri.cycle import lock_path, run_logged
from cigri.errors import Busy
from cigri.grid import Grid

log = logging.getLogger("cigri.daemon")


def daemon_lock_path(grid: Grid) -> Path:
    return grid.config.home / "daemon.lock"


def daemon_running(grid: Grid) -> bool:
    """True if some process holds the daemon lock."""
    path = daemon_lock_path(grid)
    if not path.exists():
        return False
    with open(path) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def run_daemon(grid: Grid, max_cycles: int | None = None) -> int:
    """Loop every ``cigri.cycle_period`` until signalled (or ``max_cycles``); return how many cycles ran."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    period = grid.config.settings.cycle_period
    cycles = 0
    with open(daemon_lock_path(grid), "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Busy(f"a cigri daemon already runs for {grid.config.home}") from None
        log.info("daemon started, period %ss, lock %s", period, lock_path(grid))
        while not stop.is_set() and (max_cycles is None or cycles < max_cycles):
            try:
                run_logged(grid)
            except Busy as error:
                log.info("%s", error)
            except Exception:  # logged by run_logged; every change is its own transaction: the next cycle starts clean
                pass
            cycles += 1
            stop.wait(period)
    log.info("daemon stopped after %s cycle(s)", cycles)
    return cycles

