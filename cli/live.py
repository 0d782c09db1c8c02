"""Following campaigns as they run (``gridsub --wait``, ``gridstat -c N --wait``), and telling
the user when nothing runs the cycles that would move them."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Column

from cigri.cli import common
from cigri.client import Client
from cigri.errors import CigriError

PERIOD = 0.2  # seconds to pause after a cycle that sent no job, when a --wait drives the cycles (gridsub --period)
VIEW_PERIOD = 0.25  # seconds between two reads of the campaigns' counts while cycles make progress
CHECK_PERIOD = 30.0  # seconds between two questions whether cycles run, while only watching
ENDED = ("terminated", "failed", "cancelled")
BAR_MIN = 12  # columns of the live view's bar, at least


def no_cycle_hint(client: Client, campaign_id: int) -> str | None:
    """One line saying that nothing runs the cycles, so nothing moves, and how to start them;
    None while something runs them (:meth:`Client.cycles`), or when that cannot be told: a
    hint never fails the command it follows."""
    try:
        status = client.cycles()
    except (CigriError, OSError):
        return None
    if status["ok"]:
        return None
    since = f"since {common.when(status['last_ended_at'])}" if status.get("last_ended_at") else "yet"
    if not client.direct:
        return (f"the server runs no cycle (none has ended {since}): nothing moves until it does; "
                "tell the grid's admin (the server's /healthz says why)")
    start = (f"start them with `cigri daemon` (or `cigri cycle` from cron), or watch with `gridstat -c {campaign_id} "
             "--wait`, which runs them" if client.admin else "the grid's admin starts them (`cigri daemon`); "
             "only an admin's --wait runs them")
    return f"no cycle has run {since}, and no cigri daemon runs: nothing moves until one does; {start}"


def say_if_no_cycles(client: Client, campaign_id: int) -> None:
    """The :func:`no_cycle_hint` on stderr, if there is one, after what the command printed has
    gone out: a reader that left ends the command there (exit 141), with no hint after it."""
    sys.stdout.flush()
    hint = no_cycle_hint(client, campaign_id)
    if hint is not None:
        print(f"{common.program()}: {hint}", file=sys.stderr)


def follow(client: Client, ids: list[int], period: float, quiet: bool) -> tuple[int, list[dict[str, Any]]]:
    """Follow the campaigns to their end with a live view; return the exit status (0 if every
    task succeeded, 1 otherwise) and their last summaries.

    In direct mode, the owner of the grid (an admin) drives the cycles when no daemon runs,
    logging them as ``cigri cycle`` does; through a server, or as anyone else, it only watches
    (the server runs the cycles; a cycle runs the local cluster's jobs as whoever runs it and
    reads the clusters' key files, which only cigri's account may read), and says once if
    nothing runs them.

    Cycles run back to back while they send jobs (a sleep would only idle the clusters) and
    ``period`` apart while they only watch jobs run and end, so no cluster's status command
    runs in a loop; the counts are read a few times a second, not per cycle.
    Ctrl-C lets the running cycle finish and then leaves, saying that the campaigns carry on
    (exit 130): raised anywhere inside a cycle it could land in a finalizer, where Python only
    prints it.
    """
    # a line fits the terminal (80 columns too): the bar takes what the text leaves (_View cuts
    # the counts short before the campaign, its progress or its time left would be)
    columns = [TextColumn("[bold]{task.description}", table_column=Column(no_wrap=True)),
               BarColumn(bar_width=None, table_column=Column(ratio=1, min_width=BAR_MIN)),
               MofNCompleteColumn(table_column=Column(no_wrap=True)),
               TextColumn("{task.fields[detail]}", table_column=Column(no_wrap=True)),
               TextColumn("{task.fields[left]}", table_column=Column(no_wrap=True))]
    with Progress(*columns, console=common.stderr, expand=True, disable=quiet or not common.fancy()) as progress, \
            _sigint_as_flag() as interrupted:
        view = _View(progress, ids, quiet)
        last_view = last_check = 0.0
        hinted = False
        ended: set[int] = set()
        while True:
            if interrupted.is_set():
                progress.stop()
                _left(ids)
                raise KeyboardInterrupt
            report = client.drive_cycle()
            if report is not None:
                ended.update(report.finished)
            now = time.monotonic()
            if report is None and not hinted and now - last_check >= CHECK_PERIOD:
                last_check = now
                hint = no_cycle_hint(client, ids[0])
                if hint is not None:
                    progress.console.print(f"{common.program()}: {hint}", markup=False, highlight=False, soft_wrap=True)
                    hinted = True
            if report is None or ended.issuperset(ids) or now - last_view >= VIEW_PERIOD:
                last_view = now
                summaries = [client.campaign(i) for i in ids]
                if all(s["state"] in ENDED for s in summaries):
                    break
                view.show(summaries, now)
            if report is None or not report.submitted:
                interrupted.wait(period)
    ok = all(s["state"] == "terminated" and s["tasks"]["terminated"] == s["tasks"]["total"] for s in summaries)
    if not quiet:
        for s in summaries:
            print(summary_line(s), file=sys.stderr)
    return (0 if ok else 1), summaries


def reattach(client: Client, campaign_id: int, period: float, as_json: bool) -> int:
    """``gridstat -c N --wait`` and ``gridsub -c N --wait``: the live view of a campaign already
    submitted, and with ``as_json`` its last summary; the exit status as :func:`follow`'s."""
    client.campaign(campaign_id)  # one that is not the user's is told before any cycle runs
    status, summaries = follow(client, [campaign_id], period, quiet=as_json)
    if as_json:
        common.print_json(summaries[0])
    return status


def summary_line(summary: dict[str, Any]) -> str:
    """How a campaign ended, pointing to its events when some of its tasks failed."""
    t = summary["tasks"]
    line = (f"campaign {summary['id']}: {summary['state']}, {t['terminated']} succeeded, {t['failed']} failed, "
            f"{t['cancelled']} cancelled")
    return line + (f"; why: gridevents -c {summary['id']}" if t["failed"] else "")


def _left(ids: list[int]) -> None:
    """Ctrl-C: the user leaves, the campaigns do not."""
    which = " ".join(map(str, ids))
    print(f"{common.program()}: stopped watching; campaign{'s' if len(ids) > 1 else ''} {which} "
          f"carr{'y' if len(ids) > 1 else 'ies'} on (gridstat -c {ids[0]} --wait watches again, "
          f"griddel {which} cancels)", file=sys.stderr)


@contextmanager
def _sigint_as_flag() -> Iterator[threading.Event]:
    """SIGINT sets the event instead of raising where it lands; the old handler comes back after."""
    interrupted = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: interrupted.set())
    try:
        yield interrupted
    finally:
        signal.signal(signal.SIGINT, previous)


class _View:
    """The campaigns' progress: rich bars on a terminal, else a line per campaign every 2 s.
    A bar's time left is the campaign's own (the predictor's, as gridstat shows it), ``paused``
    while it is: the rate at which a paused campaign's last jobs end says nothing of its end."""

    def __init__(self, progress: Progress, ids: list[int], quiet: bool) -> None:
        self.progress, self.quiet = progress, quiet
        self.bars = {i: progress.add_task(f"campaign {i}", total=None, detail="", left="") for i in ids}
        self.started = time.monotonic()
        self.done_before: dict[int, int] = {}
        self.last_line = 0.0

    def show(self, summaries: list[dict[str, Any]], now: float) -> None:
        show_line = not self.quiet and not common.fancy() and now - self.last_line > 2
        rows = []
        for s in summaries:
            t = s["tasks"]
            done = t["terminated"] + t["failed"] + t["cancelled"]
            rate = (done - self.done_before.setdefault(s["id"], done)) / max(now - self.started, 1e-9)
            counts = " ".join(f"{t[key]} {key}" for key in ("running", "waiting", "pending", "failed") if t[key])
            detail = counts + (f" {rate:.1f}/s" if rate else "")
            paused = f"paused: griddel -r {s['id']}" if s["state"] == "paused" else ""
            left = "paused" if paused else f"{common.duration(s['remaining_seconds'])} left"
            rows.append((s, done, f"{paused} {detail}" if paused else detail, left))
            if show_line:  # a line, not a bar: room to say it whole
                state = f"paused (griddel -r {s['id']} resumes)" if paused else s["state"]
                print(f"campaign {s['id']}: {state} {done}/{t['total']} done {detail}", file=sys.stderr)
        room = self._room(rows)
        for s, done, detail, left in rows:  # a still bar says why
            shown = detail if len(detail) <= room else detail[:max(0, room - 1)] + "…"
            self.progress.update(self.bars[s["id"]], total=s["tasks"]["total"], completed=done, detail=shown,
                                 left=left)
        if show_line:
            self.last_line = now

    def _room(self, rows: list[tuple[dict[str, Any], int, str, str]]) -> int:
        """The columns the counts may take: the terminal's width less the campaign's name, its
        progress, its time left, the shortest bar and the gaps between them."""
        fixed = (max(len(f"campaign {s['id']}") for s, *_ in rows) + max(len(f"{d}/{s['tasks']['total']}")
                 for s, d, *_ in rows) + max(len(left) for *_, left in rows))
        return self.progress.console.width - fixed - BAR_MIN - 4
