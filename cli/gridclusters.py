"""gridclusters: every cluster with its slots, cigri's use of it and its blacklist state; with
``--history``, each cluster's use over the last hours, from the counts every cycle samples, or
with ``--by-user`` the core-hours cigri's jobs used per user, cluster and day."""

from __future__ import annotations

from typing import Any, Optional

import typer

from cigri.cli import common
from cigri.errors import InputError

app = typer.Typer(add_completion=True, help="Show the grid's clusters.")


@app.command()
@common.errors_to_exit
def gridclusters(
    history: Optional[float] = typer.Option(
        None, "--history", metavar="HOURS",
        help="Each cluster's use over the last HOURS instead: samples, mean total and free slots, "
             "cigri's mean and most running jobs, mean waiting jobs and job-hours."),
    by_user: bool = typer.Option(
        False, "--by-user",
        help="With --history: the core-hours cigri's jobs used per user, cluster and day (UTC), from the jobs' "
             "start and end times (your own; an admin's: everyone's)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON value."),
    version: bool = common.VersionOption,
) -> None:
    """List clusters: total and free slots, cigri's running and queued jobs, free memory (where the cluster says),
    the most jobs it takes from cigri (max_jobs or a submit limit learned) and blacklist state;
    or, with --history, each cluster's use over the last hours, from the counts every cycle
    samples (kept cigri.counts_retention_days); with --by-user too, the core-hours per user."""
    if by_user:
        if history is None:
            raise InputError("--by-user: goes with --history HOURS")
        hours = common.positive("--history", history)  # before the grid opens
        return _by_user(common.client().core_hours(hours), as_json)
    if history is not None:
        return _history(common.client().usage(history), as_json)
    clusters = common.client().clusters()
    if as_json:
        return common.print_json(clusters)
    common.print_table(None, ["cluster", "backend", "total", "free", "free memory", "cigri running", "cigri queued",
                              "cigri's cap", "queued (all)", "blacklisted", "problem"],
                       [[c["name"], c["backend"], c["total_slots"], c["free_slots"],
                         None if c["free_memory_mb"] is None else f"{c['free_memory_mb'] / 1024:.1f} GiB",
                         c["used_by_cigri"], c["queued_by_cigri"], c["max_jobs"], c["queued_jobs"],
                         c["blacklist_reason"] or ("yes" if c["blacklisted"] else "no"), c["error"]] for c in clusters])


def _history(usage: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        return common.print_json(usage)
    common.print_table(None, ["cluster", "samples", "from", "to", "mean total", "mean free", "cigri mean running",
                              "cigri most running", "cigri mean waiting", "cigri job-hours"],
                       [[u["name"], u["samples"], common.when(u["since"]), common.when(u["until"]),
                         u["mean_total_slots"], u["mean_free_slots"], u["mean_running"], u["max_running"],
                         u["mean_waiting"], u["cigri_job_hours"]] for u in usage])


def _by_user(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        return common.print_json(rows)
    common.print_table(None, ["day", "user", "cluster", "core-hours", "jobs"],
                       [[r["day"], r["user"], r["cluster"], f"{r['core_hours']:.2f}", r["jobs"]] for r in rows])


def main() -> None:
    common.run(app)
