"""gridstat: campaigns, their progress and ETA, every task, one job and its output."""

from __future__ import annotations

import sys
from typing import Any, Optional

import typer

from cigri.client import Client
from cigri.cli import cigri3, common
from cigri.errors import InputError

app = typer.Typer(add_completion=True, context_settings={"help_option_names": ["-h", "--help"]},
                  help="Show campaigns, tasks and jobs.")
PLOT_POINTS = 60  # bars of gridstat --plot
SPARKS = "▁▂▃▄▅▆▇█"
CIGRI_PAGE = 100  # tasks of gridstat -f -d, as CiGri's API paged them


@app.command()
@common.errors_to_exit
def gridstat(
    campaign_arg: Optional[int] = typer.Argument(None, metavar="[CAMPAIGN]", help="Campaign to detail (same as -c)."),
    campaign: Optional[int] = typer.Option(None, "-c", "--campaign", help="Campaign to detail."),
    full: bool = typer.Option(False, "-f", "--full", help="With -c: every task and its jobs."),
    offset: Optional[int] = typer.Option(None, "-o", "--offset", metavar="N", help="With -f: from the N-th task on (0 is the first)."),
    events: bool = typer.Option(False, "-e", "--events", help="With -c: the campaign's open events, as CiGri listed them."),
    jdl: bool = typer.Option(False, "-J", "--jdl", help="With -c: the JDL the campaign was submitted with (JSON)."),
    plot: bool = typer.Option(False, "--plot", help="With -c: a sparkline of the tasks terminated per hour over the campaign's life."),
    job: Optional[int] = typer.Option(None, "-j", "--job", help="One job."),
    stdout: bool = typer.Option(False, "-O", "--stdout", help="With -j: print the job's stdout."),
    stderr: bool = typer.Option(False, "-E", "--stderr", help="With -j: print the job's stderr."),
    cinfos: bool = typer.Option(False, "-C", "--cinfos", help="With -j: the job as its cluster sees it now (JSON): state, exit code, node, times."),
    user: Optional[str] = typer.Option(None, "-u", "--user", "--username", help="Only this user's campaigns."),
    all_campaigns: bool = typer.Option(False, "-a", "--all", help="Finished campaigns too."),
    headerless: bool = typer.Option(False, "-H", "--headerless", help="No column titles (the campaign list and -f)."),
    dump: bool = typer.Option(False, "-d", "--dump", help="Print what CiGri's API answered for the same view, as its gridstat -d did (compact JSON)."),
    pretty: bool = typer.Option(False, "-p", "--pretty", help="With -d: indented JSON."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON value (with -O/-E: {job, stdout, stderr}). "
                                                      "progress: percent of the tasks that ran to an end (terminated "
                                                      "or failed: a cancelled task did not); throughput_per_hour: over "
                                                      "the last hour while it runs, null while paused (and so "
                                                      "remaining_seconds and eta), over its own life once over."),
    version: bool = common.VersionOption,
) -> None:
    """Without arguments: your unfinished campaigns."""
    if campaign is not None and campaign_arg is not None:
        raise InputError("give the campaign once: CAMPAIGN or -c CAMPAIGN")
    campaign = campaign if campaign is not None else campaign_arg
    if job is not None and campaign is not None:
        raise InputError("-j JOB excludes a campaign")
    if (job is not None or campaign is not None) and (user is not None or all_campaigns):
        raise InputError("-u and -a select campaigns to list; with -c or -j they would be ignored")
    if pretty and not dump:
        raise InputError("-p goes with -d")
    if dump and as_json:
        raise InputError("-d prints CiGri's document, --json cigri's: give one")
    if sum([full, events, jdl, plot]) > 1:
        raise InputError("-f, -e, -J and --plot are views of a campaign: give one")
    if offset is not None and (not full or offset < 0):
        raise InputError("-o N goes with -f, N >= 0")
    if headerless and (job is not None or (campaign is not None and not full)):
        raise InputError("-H goes with the campaign list or -f")
    if plot and dump:
        raise InputError("--plot has no CiGri document: without -d")
    client = common.client()
    if job is not None:
        if cinfos and (stdout or stderr):
            raise InputError("-C excludes -O and -E")
        return _job(client, job, stdout, stderr, cinfos, as_json, dump, pretty)
    if stdout or stderr or cinfos:
        raise InputError("-O, -E and -C need -j JOB")
    if campaign is not None:
        if full:
            return _tasks(client, campaign, offset or 0, as_json, dump, pretty, headerless)
        if events:
            return _events(client, campaign, as_json, dump, pretty)
        if jdl:
            return _jdl(client, campaign, as_json)
        if plot:
            return _plot(client, campaign, as_json)
        return _campaign(client, campaign, as_json, dump, pretty)
    if full or events or jdl or plot:
        raise InputError("-f, -e, -J and --plot need -c CAMPAIGN")
    campaigns = client.campaigns(user=user, mine=user is None and not all_campaigns, include_finished=all_campaigns)
    if dump:
        return _dump(cigri3.campaigns(campaigns), pretty)
    if as_json:
        return common.print_json(campaigns)
    common.print_table(None, ["Campaign id", "Name", "User", "Submission time", "S", "Progress", "Tasks/h", "ETA"],
                       [[c["id"], c["name"], c["user"], common.when(c["submitted_at"]), _letter(c),
                         f"{c['tasks']['terminated'] + c['tasks']['failed']}/"
                         f"{c['tasks']['total']} ({c['progress']}%)", _rate(c["throughput_per_hour"]),
                         common.when(c["eta"]) or "?"] for c in campaigns], header=not headerless)


def _dump(document: Any, pretty: bool) -> None:
    """-d: CiGri's API document."""
    sys.stdout.write(cigri3.dump(document, pretty))


def _rate(per_hour: float | None) -> str:
    return "?" if per_hour is None else f"{per_hour:.0f}" if per_hour >= 10 else f"{per_hour:.2g}"


def _letter(campaign: dict[str, Any]) -> str:
    """CiGri's one-letter state column, with its ``e`` for a campaign with open events."""
    letter = {"in_treatment": "R", "paused": "P", "terminated": "T", "failed": "F", "cancelled": "C"}.get(
        campaign["state"], "?")
    return letter + ("e" if campaign["open_events"] else "")


def _campaign(client: Client, campaign_id: int, as_json: bool, dump: bool, pretty: bool) -> None:
    detail = client.campaign(campaign_id)
    if dump:
        return _dump(cigri3.campaign(detail, client.campaign_clusters(campaign_id)), pretty)
    if as_json:
        return common.print_json(detail)
    t = detail["tasks"]
    print(f"Campaign {detail['id']}: {common.printable(detail['name'])} ({detail['user']}), {detail['state']}, "
          f"submitted {common.when(detail['submitted_at'])}")
    common.print_table("Tasks", list(t), [list(t.values())])
    print(f"Progress: {detail['progress']}%   duration: {common.duration(detail['average_duration'])} "
          f"± {common.duration(detail['duration_stddev'])}   throughput: {_rate(detail['throughput_per_hour'])} tasks/h "
          f"({'its life' if detail['finished_at'] else 'last hour'})   "
          f"remaining: {common.duration(detail['remaining_seconds'])}   "
          f"ETA: {common.when(detail['eta']) or '?'}   open events: {detail['open_events']}   "
          f"replicas: {detail['replicas']}")
    if detail["clusters"]:
        states = sorted({s for c in detail["clusters"] for s in c["jobs"]})
        common.print_table("Jobs per cluster",
                           ["cluster", *states, "duration", "tasks/h", "remaining", "ETA", "tap", "penalty"],
                           [[c["cluster"], *[c["jobs"].get(s, 0) for s in states], common.duration(c["average_duration"]),
                             _rate(c["throughput_per_hour"]), common.duration(c["remaining_seconds"]),
                             common.when(c["eta"]) or "?", "?" if c["tap"] is None else c["tap"],
                             f"{c['affinity_penalty']:.2f}"] for c in detail["clusters"]])


def _tasks(client: Client, campaign_id: int, offset: int, as_json: bool, dump: bool, pretty: bool,
           headerless: bool) -> None:
    if dump:
        total = client.campaign(campaign_id)["tasks"]["total"]
        page = client.tasks(campaign_id, offset=offset, limit=CIGRI_PAGE)
        return _dump(cigri3.jobs(campaign_id, total, page, offset, CIGRI_PAGE), pretty)
    tasks = client.tasks(campaign_id, offset=offset)
    if as_json:
        return common.print_json(list(tasks))
    common.print_table(None, ["task", "name", "state", "attempts", "jobs (id:cluster:state:exit)"],
                       [[t["id"], t["name"], t["state"], t["attempts"],
                         " ".join(f"{j['id']}:{j['cluster']}:{j['state']}:{'' if j['exit_code'] is None else j['exit_code']}"
                                  for j in t["jobs"])] for t in tasks], header=not headerless)


def _events(client: Client, campaign_id: int, as_json: bool, dump: bool, pretty: bool) -> None:
    """-e: the campaign's open events, in CiGri's listing (``gridevents -c N`` is cigri's table)."""
    events = client.events(campaign_id=campaign_id)
    if dump:
        return _dump(cigri3.events(events), pretty)
    if as_json:
        return common.print_json(events)
    for line in cigri3.event_lines(events):
        print(common.printable(line))


def _jdl(client: Client, campaign_id: int, as_json: bool) -> None:
    """-J: the JDL as stored, indented, as CiGri printed it (with or without -d)."""
    document = client.campaign_jdl(campaign_id)
    if as_json:
        return common.print_json(document)
    return _dump(document, pretty=True)


def _plot(client: Client, campaign_id: int, as_json: bool) -> None:
    """--plot: the tasks terminated per hour over the campaign's life, one bar per bucket."""
    series = client.campaign_throughput(campaign_id, PLOT_POINTS)
    if as_json:
        return common.print_json(series)
    rates = [n * 3600 / series["step"] for n in series["terminated"]]
    top = max(rates)
    print(f"Campaign {campaign_id}: tasks terminated per hour, {common.when(series['from'])} to "
          f"{common.when(series['to'])} ({_step(series['step'])} per bar)")
    print("".join(SPARKS[0] if not rate else SPARKS[1 + round(rate / top * (len(SPARKS) - 2))] for rate in rates))
    print(f"peak {_rate(top)}/h, mean {_rate(sum(rates) / len(rates))}/h")
    return None


def _step(seconds: float) -> str:
    """A bar's length: as a duration, or in seconds below one (a campaign of a few seconds)."""
    return f"{seconds:.2g}s" if seconds < 1 else common.duration(seconds)


def _job(client: Client, job_id: int, want_stdout: bool, want_stderr: bool, cinfos: bool, as_json: bool,
         dump: bool, pretty: bool) -> None:
    if cinfos:
        remote = client.job_on_cluster(job_id)
        return common.print_json(remote) if as_json else _dump(remote, pretty=True)
    if want_stdout or want_stderr:
        streams = [stream for stream, wanted in (("stdout", want_stdout), ("stderr", want_stderr)) if wanted]
        tails = {stream: client.job_output(job_id, stream) for stream in streams}
        if as_json:
            return common.print_json({"job": job_id, **tails})
        for text in tails.values():
            sys.stdout.write(cigri3.dump({"output": text}, pretty) if dump else text)
        return None
    info = client.job(job_id)
    if dump:
        return _dump(cigri3.job(info), pretty)
    if as_json:
        return common.print_json(info)
    common.print_table(f"Job {job_id}", ["field", "value"],
                       [[k, common.when(v) if k.endswith("_at") else v] for k, v in info.items()])
    return None


def main() -> None:
    app()
