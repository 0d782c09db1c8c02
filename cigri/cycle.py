"""One scheduling cycle: updator → colombo → predictor → metascheduler → runner → nikita.

A file lock makes cycles exclusive: a second ``cigri cycle`` started while one runs exits
at once with :class:`Busy` instead of doing the same work twice. A campaign, task or cluster
whose stored data makes a step raise is set aside by that step (:mod:`cigri.faults`) and the
cycle goes on; any other error fails the cycle, logged with its traceback.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cigri import colombo, nikita, notify, predictor, runner, updator
from cigri.cycle_context import gather
from cigri.errors import Busy
from cigri.grid import Grid
from cigri.locks import cycle_lock_path
from cigri.metascheduler.metascheduler import schedule

log = logging.getLogger("cigri.cycle")


@dataclass(frozen=True)
class CycleReport:
    updated: int
    decided: int
    scheduled: int
    submitted: int
    killed: int
    finished: list[int]
    seconds: float

    def __str__(self) -> str:
        """What ``cigri cycle`` prints and ``-v`` logs."""
        return (f"{self.updated} updated, {self.decided} decided, {self.submitted} submitted, {self.killed} killed, "
                f"{len(self.finished)} campaign(s) finished in {self.seconds:.3f}s")


@contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold the cycle lock for the block, or raise Busy naming the holder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            raise Busy(f"another cycle is running (pid {handle.read().strip() or '?'}); not starting a second one") from None
        handle.seek(0)
        if handle.read() != str(os.getpid()):  # a process driving many cycles writes it once
            handle.seek(0)
            handle.truncate()
            handle.write(str(os.getpid()))
            handle.flush()
        yield


def run_cycle(grid: Grid) -> CycleReport:
    """Run exactly one cycle under the cycle lock; the lock's modification time says when the
    last cycle ended (:func:`cigri.api.cycles`), failed or not."""
    with exclusive(cycle_lock_path(grid.config.home)):
        try:
            return _cycle(grid)
        finally:
            os.utime(cycle_lock_path(grid.config.home))


def run_logged(grid: Grid) -> CycleReport:
    """:func:`run_cycle` for the commands that run the site's cycles (``cigri cycle``, ``cigri
    daemon``): a cycle that fails is logged with its traceback, for their log file, then raised."""
    try:
        return run_cycle(grid)
    except Busy:
        raise
    except Exception:
        log.exception("cycle failed")
        raise


def _cycle(grid: Grid) -> CycleReport:
    started = time.monotonic()
    ctx = gather(grid)
    updated = updator.update(ctx)
    decided = colombo.analyse(ctx)
    finished = updator.finish_campaigns(ctx)
    predictor.predict(ctx)
    shares = schedule(ctx)
    submitted = runner.run(ctx)
    killed = nikita.kill(ctx)
    ctx.settle()
    notify.notify(grid)
    updator.record_counts(ctx)
    report = CycleReport(updated, decided, sum(shares.values()), submitted, killed, finished,
                         time.monotonic() - started)
    log.info("cycle: %s", report)
    return report


def drive(grid: Grid, daemon_running: bool) -> CycleReport | None:
    """Run a cycle for a waiting client unless a daemon (or another cycle) already does."""
    if daemon_running:
        return None
    try:
        return run_logged(grid)
    except Busy:
        return None
