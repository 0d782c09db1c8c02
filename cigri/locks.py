"""The grid's lock files, and whether a process holds one: ``cycle.lock`` (one cycle at a time;
its modification time is when the last one ended) and ``daemon.lock`` (one daemon or server
drives the cycles). Cheap to import: a command asks whether cycles run without loading them."""

from __future__ import annotations

import fcntl
from pathlib import Path


def cycle_lock_path(home: Path) -> Path:
    return home / "cycle.lock"


def daemon_lock_path(home: Path) -> Path:
    return home / "daemon.lock"


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
