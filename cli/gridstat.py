"""gridstat: campaigns, their progress and ETA, every task, one job and its output."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Optional

import typer

from cigri import cigri3
from cigri.cli import common, live
from cigri.cli.cigri3 import event_lines
from cigri.client import Client
from cigri.config import parse_duration
from cigri.errors import InputError

app = typer.Typer(add_completion=True, context_settings={"help_option_names": ["-h", "--help"]},
                  help="Show campaigns, tasks and jobs.")
PLOT_POINTS = 60  # bars of gridstat --plot
SPARKS = "▁▂▃▄▅▆▇█"
CIGRI_PAGE = 100  # tasks of gridstat -f -d, as CiGri's API paged them


class _Field:
    """One column of a listing: its header and how a row's JSON gives its value."""

    def __init__(self, header: str, value: Callable[[dict[str, Any]], Any]) -> None:
        self.header, self.value = header, value


def _field(known: dict[str, _Field], name: str) -> _Field:
    field = known.get(name.strip().lower())
    if field is None:
        raise InputError(f"-o: unknown field {name.strip()!r}; known: {', '.join(known)}")
    return field


def _count(state: str) -> Callable[[dict[str, Any]], int]:
    return lambda c: int(c["tasks"][state])


def _progress(c: dict[str, Any]) -> str:
    return f"{c['tasks']['terminated'] + c['tasks']['failed']}/{c['tasks']['total']} ({c['progress']}%)"


CAMPAIGN_FIELDS = {
    "id": _Field("Campaign id", lambda c: c["id"]),
    "name": _Field("Name", lambda c: c["name"]),
    "user": _Field("User", lambda c: c["user"]),
    "submitted": _Field("Submission time", lambda c: common.when(c["submitted_at"])),
    "started": _Field("Started", lambda c: common.when(c["started_at"])),
    "finished": _Field("Finished", lambda c: common.when(c["finished_at"])),
    "s": _Field("S", lambda c: _letter(c)),
    "state": _Field("State", lambda c: c["state"]),
    "progress": _Field("Progress", _progress),
    "percent": _Field("%", lambda c: c["progress"]),
    **{count: _Field(count.capitalize(), _count(count))
       for count in ("total", "pending", "waiting", "running", "terminated", "failed", "cancelled")},
    "rate": _Field("Tasks/h", lambda c: _rate(c["throughput_per_hour"])),
    "remaining": _Field("Remaining", lambda c: _remaining(c, c["state"])),
    "eta": _Field("ETA", lambda c: _eta(c, c["state"])),
    "events": _Field("Events", lambda c: c["open_events"]),
}
DEFAULT_CAMPAIGN_FIELDS = "id,name,user,submitted,s,progress,rate,eta"


def _remaining(figures: dict[str, Any], state: str) -> str:
    """A campaign's (or one of its clusters') time left: none while it is paused."""
    return "paused" if state == "paused" else common.duration(figures["remaining_seconds"])


def _eta(figures: dict[str, Any], state: str) -> str:
    return "paused" if state == "paused" else common.when(figures["eta"]) or "?"


def _last_job(task: dict[str, Any], key: str) -> Any:
    return task["jobs"][-1][key] if task["jobs"] else None


TASK_FIELDS = {
    "id": _Field("task", lambda t: t["id"]),
    "name": _Field("name", lambda t: t["name"]),
    "state": _Field("state", lambda t: t["state"]),
    "attempts": _Field("attempts", lambda t: t["attempts"]),
    "param": _Field("parameters", lambda t: t["param"]),
    "job": _Field("last job", lambda t: _last_job(t, "id")),
    "cluster": _Field("cluster", lambda t: _last_job(t, "cluster")),
    "exit": _Field("exit", lambda t: _last_job(t, "exit_code")),
    "jobs": _Field("jobs (id:cluster:state:exit)", lambda t: " ".join(
        f"{j['id']}:{j['cluster']}:{j['state']}:{'' if j['exit_code'] is None else j['exit_code']}"
        for j in t["jobs"])),
}
DEFAULT_TASK_FIELDS = "id,name,state,attempts,jobs"
LETTERS = {"in_treatment": "R", "paused": "P", "terminated": "T", "failed": "F", "cancelled": "C"}


@app.command()
@common.errors_to_exit
def gridstat(
    campaign_arg: Optional[str] = common.campaign_argument("Campaign to detail (same as -c)."),
    campaign_ref: Optional[str] = common.campaign_option("Campaign to detail"),
    full: bool = typer.Option(False, "-f", "--full", help="With -c: every task and its jobs."),
    offset: Optional[int] = typer.Option(None, "--offset", metavar="N", help="With -f: from the N-th task on (0 is the "
                                                                             "first); CiGri's -o N is this one."),
    events: bool = typer.Option(False, "-e", "--events", help="With -c: the campaign's open events, as CiGri listed them."),
    jdl: bool = typer.Option(False, "-J", "--jdl", help="With -c: the JDL the campaign was submitted with (JSON)."),
    plot: bool = typer.Option(False, "--plot", help="With -c: a sparkline of the tasks terminated per hour over the "
                                                    "campaign's life."),
    job: Optional[int] = typer.Option(None, "-j", "--job", help="One job."),
    stdout: bool = typer.Option(False, "-O", "--stdout", help="With -j: print the job's stdout."),
    stderr: bool = typer.Option(False, "-E", "--stderr", help="With -j: print the job's stderr (with -O too: "
                                                              "each under a ==> job N stdout <== line)."),
    cinfos: bool = typer.Option(False, "-C", "--cinfos", help="With -j: the job as its cluster sees it now (JSON): "
                                                              "state, exit code, node, times."),
    user: Optional[str] = typer.Option(None, "-u", "--user", "--username", help="Only this user's campaigns."),
    all_campaigns: bool = typer.Option(False, "-a", "--all", help="Finished campaigns too."),
    states: list[str] = typer.Option([], "--state", metavar="STATE",
                                     help="Only campaigns in this state (a name, its S letter, or running for "
                                          "in_treatment; repeat or separate with commas); with -c N, only its tasks "
                                          "in this state (pending, waiting, "
                                          "running, terminated, failed, cancelled), as -f does."),
    name: Optional[str] = typer.Option(None, "--name", metavar="PATTERN",
                                       help="Only campaigns whose name matches this shell pattern ('povray*')."),
    since: Optional[str] = typer.Option(None, "--since", metavar="WHEN",
                                        help="Only campaigns submitted since WHEN: a duration ago (90m, 12h, 3d) "
                                             "or a date (2026-11-25, 2026-11-25T14:00)."),
    fields: Optional[str] = typer.Option(None, "-o", "--format", metavar="FIELDS",
                                         help="The columns to print, by name, separated by commas (as squeue -o): "
                                              f"for campaigns {', '.join(CAMPAIGN_FIELDS)}; for tasks (-f, "
                                              f"--state) {', '.join(TASK_FIELDS)}. A number is CiGri's -o: --offset."),
    noheader: bool = typer.Option(False, "-H", "--noheader", "--headerless", help="No column names."),
    wait: bool = typer.Option(False, "-w", "--wait", help="With -c: the live view of gridsub --wait until the "
                                                           "campaign ends (Ctrl-C leaves it running); exit 0 if every "
                                                           "task succeeded, else 1."),
    why: bool = typer.Option(False, "--why", help="With -c: why the campaign gets what it gets from the fair share "
                                                  "(its line of cigri shares)."),
    dump: bool = typer.Option(False, "-d", "--dump", help="Print what CiGri's API answered for the same view, as its "
                                                          "gridstat -d did (compact JSON)."),
    pretty: bool = typer.Option(False, "-p", "--pretty", help="With -d: indented JSON."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON value (with -O/-E: {job, stdout, stderr}). "
                                                      "progress: percent of the tasks that ran to an end (terminated "
                                                      "or failed: a cancelled task did not); throughput_per_hour: over "
                                                      "the last hour while it runs, null while paused (and so "
                                                      "remaining_seconds and eta), over its own life once over."),
    version: bool = common.VersionOption,
) -> None:
    """Without arguments: your unfinished campaigns, one line each.

    S is the campaign's state: R in treatment, P paused, T terminated (every task succeeded), F
    failed (every task ended and some failed), C cancelled; an e after it, open events (CiGri's).

    With -c N: the campaign's tasks per state, and per cluster its jobs by state, where "ended
    otherwise" counts the jobs that ended there in any way but success (failed, killed at their
    walltime, preempted, lost, cancelled or resubmitted), with their duration, throughput and
    ETA. Its events (what failed, and why) are gridevents -c N."""
    named = common.one_campaign(campaign_arg, campaign_ref)
    if fields is not None and fields.strip().isdigit():  # CiGri's -o N: the offset of -f
        if offset is not None:
            raise InputError("give the offset once: -o N or --offset N")
        offset, fields = int(fields), None
    if job is not None and named is not None:
        raise InputError("-j JOB excludes a campaign")
    selecting = user is not None or all_campaigns or name is not None or since is not None
    if (job is not None or named is not None) and selecting:
        raise InputError("-u, -a, --name and --since select campaigns to list; with -c or -j they would be ignored")
    _refuse_out_of_place(named, job, full=full, states=states, fields=fields, wait=wait, why=why,
                         noheader=noheader)
    _refuse_cigri_out_of_place(named, job, full=full, offset=offset, events=events, jdl=jdl, plot=plot,
                               dump=dump, pretty=pretty, as_json=as_json)
    layout = _Layout(fields, noheader, as_json)
    client = common.client()
    campaign = None if named is None else common.campaign_id(client, named)
    if job is not None:
        if cinfos and (stdout or stderr):
            raise InputError("-C excludes -O and -E")
        return _job(client, job, stdout, stderr, cinfos, as_json, dump, pretty)
    if stdout or stderr or cinfos:
        raise InputError("-O, -E and -C need -j JOB")
    if campaign is not None:
        if events:
            return _events(client, campaign, as_json, dump, pretty)
        if jdl:
            return _jdl(client, campaign, as_json)
        if plot:
            return _plot(client, campaign, as_json)
        if dump:
            return _dump_campaign(client, campaign, full, offset or 0, pretty)
        return _one_campaign(client, campaign, full=full, states=_split(states), layout=layout, wait=wait, why=why,
                             offset=offset or 0)
    campaigns = client.campaigns(user=user, mine=user is None and not all_campaigns, include_finished=all_campaigns,
                                 states=tuple(_campaign_state(s) for s in _split(states)), name=name,
                                 since=None if since is None else _moment(since))
    if dump:
        return _dump(cigri3.campaigns(campaigns), pretty)
    if as_json:
        common.print_json(campaigns)
    else:
        layout.print(CAMPAIGN_FIELDS, DEFAULT_CAMPAIGN_FIELDS, campaigns)
    if any(c["state"] == "in_treatment" for c in campaigns):
        live.say_if_no_cycles(client, next(c["id"] for c in campaigns if c["state"] == "in_treatment"))
    return None


def _refuse_out_of_place(campaign: str | None, job: int | None, *, full: bool, states: list[str],
                         fields: str | None, wait: bool, why: bool, noheader: bool) -> None:
    """The options that only make sense in one view, refused elsewhere (exit 2) rather than ignored."""
    if campaign is None:
        for option, needs_one in (("-f", full), ("--wait", wait), ("--why", why)):
            if needs_one:
                raise InputError(f"{option} needs -c CAMPAIGN")
    if job is not None:
        for option, lists in (("--state", bool(states)), ("-o", fields is not None), ("-H", noheader)):
            if lists:
                raise InputError(f"{option} is for listings of campaigns or tasks; with -j it would be ignored")
    if wait or why:
        other = [option for option, given in (("-f", full), ("--state", bool(states)), ("-o", fields is not None),
                                              ("--why", why and wait)) if given]
        if other:
            raise InputError(f"{'--wait' if wait else '--why'} excludes {', '.join(other)}")


def _refuse_cigri_out_of_place(campaign: str | None, job: int | None, *, full: bool, offset: int | None,
                               events: bool, jdl: bool, plot: bool, dump: bool, pretty: bool, as_json: bool) -> None:
    """CiGri's options, refused where they would be ignored (exit 2)."""
    if pretty and not dump:
        raise InputError("-p goes with -d")
    if dump and as_json:
        raise InputError("-d prints CiGri's document, --json cigri's: give one")
    if sum([full, events, jdl, plot]) > 1:
        raise InputError("-f, -e, -J and --plot are views of a campaign: give one")
    if offset is not None and (not full or offset < 0):
        raise InputError("--offset N (CiGri's -o N) goes with -f, N >= 0")
    if campaign is None and (events or jdl or plot):
        raise InputError("-e, -J and --plot need -c CAMPAIGN")
    if plot and dump:
        raise InputError("--plot has no CiGri document: without -d")
    if job is not None and (full or events or jdl or plot):
        raise InputError("-f, -e, -J and --plot are views of a campaign, not of a job")


class _Layout:
    """How a listing is printed: the fields chosen (``-o``), with or without their header
    (``-H``), or one JSON value (``--json``, which has every field)."""

    def __init__(self, fields: str | None, noheader: bool, as_json: bool) -> None:
        if as_json and (fields is not None or noheader):
            raise InputError("--json prints every field: -o and -H are for the columns")
        self.fields, self.header, self.json = fields, not noheader, as_json

    def print(self, known: dict[str, _Field], default: str, rows: Iterable[dict[str, Any]]) -> None:
        chosen = [_field(known, name) for name in (self.fields or default).split(",")]
        common.print_table(None, [field.header for field in chosen], [[field.value(row) for field in chosen]
                                                                      for row in rows], header=self.header)


def _split(values: list[str]) -> list[str]:
    """``--state a,b --state c``: a, b, c."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


ALIASES = {"running": "in_treatment"}  # what a campaign in treatment is to a squeue or qstat user


def _campaign_state(text: str) -> str:
    """A campaign state by name, by its S letter (``R``, as squeue's ``-t``) or as ``running``."""
    by_letter = {letter: state for state, letter in LETTERS.items()}
    return by_letter.get(text.upper(), text) if len(text) == 1 else ALIASES.get(text.lower(), text)


def _moment(text: str) -> float:
    """``--since``: a duration ago (``12h``) or a date (``2026-11-25``, ``2026-11-25T14:00``)."""
    try:
        return datetime.now().timestamp() - parse_duration(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise InputError(f"--since: expected a duration (90m, 12h, 3d) or a date (2026-11-25, "
                         f"2026-11-25T14:00), got {text!r}") from None


def _rate(per_hour: float | None) -> str:
    return "?" if per_hour is None else f"{per_hour:.0f}" if per_hour >= 10 else f"{per_hour:.2g}"


def _letter(campaign: dict[str, Any]) -> str:
    """CiGri's one-letter state column, with its ``e`` for a campaign with open events."""
    return LETTERS.get(campaign["state"], "?") + ("e" if campaign.get("open_events") else "")


def _dump(document: Any, pretty: bool) -> None:
    """-d: CiGri's API document."""
    sys.stdout.write(cigri3.dump(document, pretty))


def _dump_campaign(client: Client, campaign_id: int, full: bool, offset: int, pretty: bool) -> None:
    """-c N -d, and -c N -f -d: the campaign, or a page of its tasks, as CiGri's API answered."""
    if full:
        total = client.campaign(campaign_id)["tasks"]["total"]
        page = client.tasks(campaign_id, offset=offset, limit=CIGRI_PAGE)
        return _dump(cigri3.jobs(campaign_id, total, page, offset, CIGRI_PAGE), pretty)
    return _dump(cigri3.campaign(client.campaign(campaign_id), client.campaign_clusters(campaign_id)), pretty)


def _events(client: Client, campaign_id: int, as_json: bool, dump: bool, pretty: bool) -> None:
    """-e: the campaign's open events, in CiGri's listing (``gridevents -c N`` is cigri's table)."""
    events = client.events(campaign_id=campaign_id)
    if dump:
        return _dump(cigri3.events(events), pretty)
    if as_json:
        return common.print_json(events)
    for line in event_lines(events):
        print(common.printable(line))
    return None


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


def _one_campaign(client: Client, campaign_id: int, *, full: bool, states: list[str], layout: _Layout, wait: bool,
                  why: bool, offset: int) -> None:
    if wait:
        raise typer.Exit(live.reattach(client, campaign_id, live.PERIOD, layout.json))
    if why:
        return _why(client.campaign_share(campaign_id), layout.json)
    if full or states:
        return _tasks(client, campaign_id, tuple(states), layout, offset)
    detail = client.campaign(campaign_id)
    if layout.json:
        common.print_json(detail)
    elif layout.fields is not None:
        layout.print(CAMPAIGN_FIELDS, DEFAULT_CAMPAIGN_FIELDS, [detail])
    else:
        _campaign(detail)
    if detail["state"] == "in_treatment":
        live.say_if_no_cycles(client, campaign_id)
    return None


def _campaign(detail: dict[str, Any]) -> None:
    t = detail["tasks"]
    print(f"Campaign {detail['id']}: {common.printable(detail['name'])} ({detail['user']}), {detail['state']}, "
          f"submitted {common.when(detail['submitted_at'])}")
    common.print_table("Tasks", list(t), [list(t.values())])
    print(f"Progress: {detail['progress']}%   throughput: {_rate(detail['throughput_per_hour'])} tasks/h "
          f"({'its life' if detail['finished_at'] else 'last hour'})   "
          f"remaining: {_remaining(detail, detail['state'])}   ETA: {_eta(detail, detail['state'])}")
    print(f"Duration: {common.duration(detail['average_duration'])} ± {common.duration(detail['duration_stddev'])}   "
          f"open events: {detail['open_events']}   replicas: {detail['replicas']}")
    if t["failed"] or detail["open_events"]:
        print(f"What failed and why: gridevents -c {detail['id']}")
    if detail["clusters"]:
        states = sorted({s for c in detail["clusters"] for s in c["jobs"]})
        common.print_table("Jobs per cluster",
                           ["cluster", *(s.replace("_", " ") for s in states), "duration", "tasks/h", "remaining",
                            "ETA", "tap", "penalty"],
                           [[c["cluster"], *[c["jobs"].get(s, 0) for s in states],
                             common.duration(c["average_duration"]), _rate(c["throughput_per_hour"]),
                             _remaining(c, detail["state"]), _eta(c, detail["state"]),
                             "?" if c["tap"] is None else c["tap"],
                             f"{c['affinity_penalty']:.2f}"] for c in detail["clusters"]])


def _tasks(client: Client, campaign_id: int, states: tuple[str, ...], layout: _Layout, offset: int) -> None:
    tasks = client.tasks(campaign_id, states=states, offset=offset)
    if layout.json:
        return common.print_json(list(tasks))
    return layout.print(TASK_FIELDS, DEFAULT_TASK_FIELDS, tasks)


def _why(share: dict[str, Any], as_json: bool) -> None:
    """The campaign's line of ``cigri shares``, in sentences."""
    if as_json:
        return common.print_json(share)
    print(f"Campaign {share['id']}: {common.printable(share['name'] or '')} ({share['user']}), {share['state']}")
    if not share["scheduled"]:
        print(f"why: {share['reason']}")
        return _obstacles(share)
    print(f"class {share['class']} ({share['policy']}), demand {share['demand']} task(s)"
          + (", test mode" if share["test_mode"] else ""))
    common.print_table(None, ["cluster", "running", "queued", "target", "start", "preempt"],
                       [[cluster, *(share[key].get(cluster, 0) for key in ("running", "queued", "target", "start",
                                                                          "preempt"))]
                        for cluster in share["clusters"]])
    print(f"fair share: {share['fair_share']['jobs']} job(s), {100 * share['fair_share']['dominant']:.1f}% of the grid")
    print(f"why: {share['reason']}")
    return _obstacles(share)


def _obstacles(share: dict[str, Any]) -> None:
    """What keeps the campaign off some clusters."""
    if "clusters_refused" not in share:  # ended: not scheduled any more
        return None
    for event in share["blocked_by"]:
        print(f"{event['code']} on {event['cluster']}: {common.printable(event['message'])}")
    for refusal in share["clusters_refused"]:
        print(f"never runs on {refusal['cluster']}: {refusal['why']}")
    for cluster in share["clusters_left_out"]:
        print(f"left out of the next cycle: {cluster['name']} ({common.printable(cluster['error'])})")
    return None


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
        if dump:
            for text in tails.values():
                sys.stdout.write(cigri3.dump({"output": text}, pretty))
            return None
        _print_streams(job_id, tails)
        return None
    info = client.job(job_id)
    if dump:
        return _dump(cigri3.job(info), pretty)
    if as_json:
        return common.print_json(info)
    common.print_table(f"Job {job_id}", ["field", "value"],
                       [[k, common.when(v) if k.endswith("_at") else v] for k, v in info.items()])
    return None


def _print_streams(job_id: int, texts: dict[str, str]) -> None:
    """One stream as it is (for a pipe); both, each under a label, as ``tail`` labels files."""
    for index, (stream, text) in enumerate(texts.items()):
        if len(texts) > 1:
            sys.stdout.write(f"{'' if index == 0 else chr(10)}==> job {job_id} {stream} <==\n")
        sys.stdout.write(text)
        if len(texts) > 1 and text and not text.endswith("\n"):
            sys.stdout.write("\n")


def main() -> None:
    common.run(app)
