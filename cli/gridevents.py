"""gridevents: what went wrong (failed tasks with their stderr tail, cluster problems), and fixing it."""

from __future__ import annotations

from typing import Any, Optional

import typer

from cigri.cli import cigri3, common
from cigri.errors import InputError

app = typer.Typer(add_completion=True, context_settings={"help_option_names": ["-h", "--help"]},
                  help="List and fix events.")
MANUAL_EVENT = "The job has been marked in the event state by the administrator."  # CiGri's words
DISABLED = "Cluster {} disabled by the administrator of the grid. Please, be patient."


@app.command()
@common.errors_to_exit
def gridevents(
    campaign_arg: Optional[str] = common.campaign_argument("Campaign (same as -c)."),
    campaign_ref: Optional[str] = common.campaign_option("Only this campaign's events"),
    global_only: bool = typer.Option(False, "-g", "--global", help="Only the clusters' own events."),
    event_id: Optional[int] = typer.Option(None, "-e", "--event", help="This event only, in full."),
    all_events: bool = typer.Option(False, "-a", "--all", help="Closed events too."),
    fix: bool = typer.Option(False, "-f", "--fix", help="Close the events chosen by -e, -c or -g (lifting "
                                                        "the blacklists they hold)."),
    resubmit: bool = typer.Option(False, "-r", "--resubmit", help="With --fix: put their failed tasks back "
                                                                  "in the bag."),
    blacklist: Optional[str] = typer.Option(None, "--blacklist-cluster", metavar="CLUSTER",
                                            help="Blacklist a cluster, by number or name (admins)."),
    mark: Optional[int] = typer.Option(None, "--mark-job-event", metavar="JOB",
                                       help="Open a MANUAL_EVENT on a job, open until fixed (admins)."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Accepted for CiGri's scripts: --fix always says "
                                                                 "what it closed."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON value."),
    version: bool = common.VersionOption,
) -> None:
    """List events (open ones of your campaigns and of the clusters, oldest first), or fix them."""
    named = common.one_campaign(campaign_arg, campaign_ref)
    if resubmit and not fix:
        raise InputError("--resubmit needs --fix")
    if event_id is not None and (named is not None or global_only):
        raise InputError("-e excludes -c and -g")
    if named is not None and global_only:
        raise InputError("-c and -g exclude each other")
    admin_actions = (blacklist is not None) + (mark is not None)
    if admin_actions and (admin_actions > 1 or fix or all_events or global_only or named is not None
                          or event_id is not None):
        raise InputError("--blacklist-cluster and --mark-job-event go alone")
    client = common.client()
    campaign = None if named is None else common.campaign_id(client, named)
    if blacklist is not None:
        name = cigri3.cluster_name(client, blacklist)
        client.blacklist(name, DISABLED.format(blacklist))
        return common.print_json({"cluster": name, "blacklisted": True}) if as_json else \
            print(f"Cluster {name}: blacklisted")
    if mark is not None:
        marked = client.mark_job_event(mark, MANUAL_EVENT)
        return common.print_json({"id": marked, "job_id": mark}) if as_json else \
            print(f"Event {marked}: MANUAL_EVENT on job {mark}")
    if fix:
        result = client.fix_events(event_id=event_id, campaign_id=campaign, global_only=global_only, resubmit=resubmit)
        if as_json:
            return common.print_json(result)
        print(f"{result['closed']} event(s) closed" +
              (f", {result['resubmitted']} task(s) resubmitted" if resubmit else ""))
        return None
    if event_id is not None:
        event = client.event(event_id)
        if as_json:
            return common.print_json(event)
        return _print_event(event)
    events = client.events(campaign_id=campaign, global_only=global_only, include_closed=all_events)
    if as_json:
        return common.print_json(events)
    if not events:
        print("No events")
        return None
    common.print_table(None, ["id", "date", "state", "severity", "code", "count", "campaign", "cluster", "message",
                              "examples"],
                       [[e["id"], common.when(e["created_at"]), e["state"], e["severity"], e["code"], e["count"],
                         e["campaign_id"], e["cluster"], e["summary"], _examples(e)] for e in events])
    return None


SHOWN_EXAMPLES = 2  # per event in the list; -e shows every one kept


def _examples(event: dict[str, Any]) -> str:
    """The tasks of an event's first examples, by name: how its group's masked line reads."""
    names = [str(x["task"] or x["task_id"]) for x in event["examples"] if x.get("task_id") is not None]
    return ", ".join(names[:SHOWN_EXAMPLES]) + (", …" if event["count"] > SHOWN_EXAMPLES and names else "")


def _print_event(event: dict[str, Any]) -> None:
    for key in ("id", "code", "class", "severity", "state", "campaign_id", "cluster", "count", "message"):
        print(f"{key}: {'' if event[key] is None else common.printable(str(event[key]))}")
    if event["summary"] != event["message"]:
        print(f"grouped as: {common.printable(event['summary'])}")
    print(f"opened: {common.when(event['created_at'])}   last: {common.when(event['updated_at'])}   "
          f"closed: {common.when(event['closed_at'])}")
    if event["examples"]:
        print("examples:")
        for x in event["examples"]:
            line = f": {x['line']}" if x.get("line") else ""
            print(common.printable(f"  task {x['task'] or x['task_id']} (job {x['job_id']}){line}"))
    if event["stderr_tail"]:
        print("stderr tail:")
        for line in event["stderr_tail"].rstrip("\n").split("\n"):  # each other break shown escaped
            print(f"  {common.printable(line)}")


def main() -> None:
    common.run(app)
