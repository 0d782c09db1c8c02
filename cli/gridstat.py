"""gridstat: campaigns, their progress and ETA, every task, one job and its output."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from cigri.client import Client
from cigri.cli import common
from cigri.errors import InputError

app = typer.Typer(add_completion=True, help="Show campaigns, tasks and jobs.")


@app.command()
@common.errors_to_exit
def gridstat(
    campaign_arg: Optional[int] = typer.Argument(None, metavar="[CAMPAIGN]", help="Campaign to detail (same as -c)."),
    campaign: Optional[int] = typer.Option(None, "-c", "--campaign", help="Campaign to detail."),
    full: bool = typer.Option(False, "-f", "--full", help="With -c: every task and its jobs."),
    job: Optional[int] = typer.Option(None, "-j", "--job", help="One job."),
    stdout: bool = typer.Option(False, "-O", "--stdout", help="With -j: print the job's stdout."),
    stderr: bool = typer.Option(False, "-E", "--stderr", help="With -j: print the job's stderr."),
    user: Optional[str] = typer.Option(None, "-u", "--user", help="Only this user's campaigns."),
    all_campaigns: bool = typer.Option(False, "-a", "--all", help="Finished campaigns too."),
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
    client = common.client()
    if job is not None:
        return _job(client, job, stdout, stderr, as_json)
    if stdout or stderr:
        raise InputError("-O and -E need -j JOB")
    if campaign is not None:
        return _tasks(client, campaign, as_json) if full else _campaign(client, campaign, as_json)
    if full:
        raise InputError("-f needs -c CAMPAIGN")
    campaigns = client.campaigns(user=user, mine=user is None and not all_campaigns, include_finished=all_campaigns)
    if as_json:
        return common.print_json(campaigns)
    common.print_table(None, ["Campaign id", "Name", "User", "Submission time", "S", "Progress", "Tasks/h", "ETA"],
                       [[c["id"], c["name"], c["user"], common.when(c["submitted_at"]), _letter(c["state"]),
                         f"{c['tasks']['terminated'] + c['tasks']['failed']}/"
                         f"{c['tasks']['total']} ({c['progress']}%)", _rate(c["throughput_per_hour"]),
                         common.when(c["eta"]) or "?"] for c in campaigns])


def _rate(per_hour: float | None) -> str:
    return "?" if per_hour is None else f"{per_hour:.0f}" if per_hour >= 10 else f"{per_hour:.2g}"


def _letter(state: str) -> str:
    """CiGri's one-letter state column."""
    return {"in_treatment": "R", "paused": "P", "terminated": "T", "failed": "F", "cancelled": "C"}.get(state, "?")


def _campaign(client: Client, campaign_id: int, as_json: bool) -> None:
    detail = client.campaign(campaign_id)
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


def _tasks(client: Client, campaign_id: int, as_json: bool) -> None:
    tasks = client.tasks(campaign_id)
    if as_json:
        return common.print_json(list(tasks))
    common.print_table(None, ["task", "name", "state", "attempts", "jobs (id:cluster:state:exit)"],
                       [[t["id"], t["name"], t["state"], t["attempts"],
                         " ".join(f"{j['id']}:{j['cluster']}:{j['state']}:{'' if j['exit_code'] is None else j['exit_code']}"
                                  for j in t["jobs"])] for t in tasks])


def _job(client: Client, job_id: int, want_stdout: bool, want_stderr: bool, as_json: bool) -> None:
    if want_stdout or want_stderr:
        streams = [stream for stream, wanted in (("stdout", want_stdout), ("stderr", want_stderr)) if wanted]
        tails = {stream: client.job_output(job_id, stream) for stream in streams}
        if as_json:
            return common.print_json({"job": job_id, **tails})
        for text in tails.values():
            sys.stdout.write(text)
        return None
    info = client.job(job_id)
    if as_json:
        return common.print_json(info)
    common.print_table(f"Job {job_id}", ["field", "value"],
                       [[k, common.when(v) if k.endswith("_at") else v] for k, v in info.items()])


def main() -> None:
    app()
