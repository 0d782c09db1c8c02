"""gridclusters: every cluster with its slots, cigri's use of it and its blacklist state; with
``--history``, each cluster's use over the last hours, from the counts every cycle samples, or
with ``--by-user`` the core-hours cigri's jobs used per user, cluster and day."""

from __future__ import annotations

import sys
from typing import Any, Optional
from urllib.parse import urlsplit

import typer

from cigri.cli import cigri3, common
from cigri.errors import InputError

app = typer.Typer(add_completion=True, context_settings={"help_option_names": ["-h", "--help"]},
                  help="Show the grid's clusters.")


@app.command()
@common.errors_to_exit
def gridclusters(
    infos: bool = typer.Option(False, "-i", "--infos", help="CiGri's listing: NUMBER: NAME , HOST (stress:S/FACTOR"
                                                            "[, BLACKLISTED][, UNDER_STRESS])."),
    more_infos: bool = typer.Option(False, "-I", "--more_infos", "--more-infos",
                                    help="CiGri's listing with every known field of each cluster, one per line."),
    usage_now: bool = typer.Option(False, "-u", "--usage",
                                   help="With -i: each cluster's slots now: max_resources, used_resources, "
                                        "used_by_cigri, unavailable_resources."),
    bars: bool = typer.Option(False, "-b", "--bars",
                              help="With -i: each cluster's use now as CiGri's 80-column bar (red unavailable, yellow "
                                   "others, white cigri, green free; letters when piped)."),
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
    samples (kept cigri.counts_retention_days); with --by-user too, the core-hours per user.
    -i, -I, -u and -b print CiGri's listing of them."""
    cigri_listing = infos or more_infos or usage_now or bars
    if cigri_listing and (history is not None or by_user or as_json):
        raise InputError("-i, -I, -u and -b print CiGri's listing: without --history, --by-user and --json")
    if by_user:
        if history is None:
            raise InputError("--by-user: goes with --history HOURS")
        hours = common.positive("--history", history)  # before the grid opens
        return _by_user(common.client().core_hours(hours), as_json)
    if history is not None:
        return _history(common.client().usage(history), as_json)
    client = common.client()
    clusters = client.clusters()
    if cigri_listing:
        options = {c["name"]: c["options"] for c in client.cluster_table()}
        sys.stdout.write(_cigri_listing(clusters, options, more_infos, usage_now or bars, bars))
        return None
    if as_json:
        return common.print_json(clusters)
    common.print_table(None, ["cluster", "backend", "total", "free", "free memory", "cigri running", "cigri queued",
                              "cigri's cap", "queued (all)", "blacklisted", "problem"],
                       [[c["name"], c["backend"], c["total_slots"], c["free_slots"],
                         None if c["free_memory_mb"] is None else f"{c['free_memory_mb'] / 1024:.1f} GiB",
                         c["used_by_cigri"], c["queued_by_cigri"], c["max_jobs"], c["queued_jobs"],
                         c["blacklist_reason"] or ("yes" if c["blacklisted"] else "no"), c["error"]] for c in clusters])
    return None


def _cigri_listing(clusters: list[dict[str, Any]], options: dict[str, dict[str, Any]], more: bool, usage: bool,
                   bars: bool) -> str:
    """CiGri's ``gridclusters -i/-I/-u/-b``, line for line, from cigri's clusters: the use is
    asked now, the cluster's usable slots are its max (so nothing is unavailable), and
    cigri's use is its running jobs. The bars are CiGri's colours on a terminal, letters when
    piped or with ``NO_COLOR``, as every output of the commands."""
    colour = common.fancy()
    text = ""
    for c in sorted(clusters, key=lambda c: c["id"]):
        text += f"{c['id']}: {common.printable(c['name'])}"
        if more:
            fields = {**c, **options.get(c["name"], {})}
            text += "".join(f"\n    {key}: {common.printable(cigri3.to_s(value))}" for key, value in fields.items()
                            if value is not None)
        else:
            text += (f" , {_host(c['backend'], options.get(c['name'], {}))} "
                     f"(stress:{'?' if c['stress'] is None else c['stress']}/{c['stress_factor']}"
                     f"{', BLACKLISTED' if c['blacklisted'] else ''}{', UNDER_STRESS' if c['under_stress'] else ''})")
        if usage:
            if c["total_slots"] is None or c["blacklisted"]:
                text += "\n    Data temporarily unavailable" + ("\n" if bars else "")
            else:
                now = {"max_resources": c["total_slots"], "used_resources": c["total_slots"] - c["free_slots"],
                       "used_by_cigri": c["used_by_cigri"], "unavailable_resources": 0}
                text += (f" ({now['max_resources']} resources)\n{cigri3.bar(now, colour)}\n" if bars else
                         "".join(f"\n    {key}: {value}" for key, value in now.items()))
        text += "\n"
    return text + (cigri3.legend(colour) + "\n" if bars else "")


def _host(backend: str, options: dict[str, Any]) -> str:
    """The host cigri reaches a cluster on (CiGri's ``ssh_host``)."""
    if "host" in options:
        return str(options["host"])
    if "base_url" in options:
        return urlsplit(str(options["base_url"])).hostname or str(options["base_url"])
    return "localhost" if backend == "local" else "?"


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
