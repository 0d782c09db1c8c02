"""The grid's lock files, and whether a process holds one: ``cycle.lock`` (one cycle at a time;
its modification time is when the last one ended) and ``daemon.lock`` (one daemon or server
drives the cycles). Cheap to import: a command asks whether cycles run without loading them."""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cigri.grid import Grid


def cycle_lock_path(grid: Grid) -> Path:
    return grid.config.home / "cycle.lock"


def daemon_lock_path(grid: Grid) -> Path:
    return grid.config.home / "daemon.lock"


def held(path: Path) -> bool:
    """Whether some process holds the lock ``path``."""
    try:
        handle = open(path)
    except FileNotFoundError:
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False
