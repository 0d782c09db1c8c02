"""Campaigns: pause, resume, cancel, and what ``gridstat`` shows of them."""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from cigri import bag, predictor
from cigri import db as database
from cigri.db import campaigns as stored_campaigns
from cigri.db import dialect
from cigri.db import events as stored
from cigri.db import jobs as stored_jobs
from cigri.db import tasks as stored_tasks
from cigri.api.access import campaign_row, check_page, may_see, owned_campaign, storable
from cigri.errors import InputError, NotFound, Refused, shown
from cigri.events import record
from cigri.grid import Grid
from cigri.states import CAMPAIGN_ACTIVE, TASK_OPEN, CampaignState, JobState, TaskState, sql_in


def cancel(grid: Grid, campaign_id: int, *, user: str) -> None:
    """Cancel a campaign: its open tasks are cancelled now; nikita kills its jobs next cycle."""
    with database.write(grid.db) as conn:
        campaign = owned_campaign(grid, conn, campaign_id, user)
        if campaign["state"] not in CAMPAIGN_ACTIVE:
            raise Refused(f"campaign {campaign_id} is already {campaign['state']}")
        stored_campaigns.end(conn, campaign_id, CampaignState.CANCELLED, database.now())
        bag.end_all(conn, campaign_id, TASK_OPEN, TaskState.CANCELLED)
        stored_jobs.mark_campaign_cancelled(conn, campaign_id)
        record(conn, "USER_CANCEL", f"campaign cancelled by {user}", campaign_id=campaign_id)


def pause(grid: Grid, campaign_id: int, *, user: str) -> None:
    """Pause a campaign: it starts no job until it is resumed. Its jobs that have not started
    are withdrawn (nikita cancels them at the end of the next cycle, and their tasks go back to
    the head of the bag, nothing counted: :data:`KillReason.PAUSE`); its running jobs run on, and
    so do a temporal group's or a gang's jobs once their remote job has started (it runs them
    all), and its prologues and epilogues."""
    with database.write(grid.db) as conn:
        _move_campaign(grid, conn, campaign_id, user, CampaignState.IN_TREATMENT, CampaignState.PAUSED)
        stored_jobs.withdraw_unstarted(conn, campaign_id)


def resume(grid: Grid, campaign_id: int, *, user: str) -> None:
    """Resume a paused campaign: the scheduler sends its tasks again; the withdrawals its pause
    asked for that nikita has not done yet are called off."""
    with database.write(grid.db) as conn:
        _move_campaign(grid, conn, campaign_id, user, CampaignState.PAUSED, CampaignState.IN_TREATMENT)
        stored_jobs.call_off_withdrawals(conn, campaign_id)


def _move_campaign(grid: Grid, conn: sqlite3.Connection, campaign_id: int, user: str, before: CampaignState,
                   after: CampaignState) -> None:
    campaign = owned_campaign(grid, conn, campaign_id, user)
    if campaign["state"] != before:
        raise Refused(f"campaign {campaign_id} is {campaign['state']}, not {before}")
    stored_campaigns.move(conn, campaign_id, before, after)


TASK_COUNT_KEYS = ("total", "pending", "waiting", "running", "terminated", "failed", "cancelled")


def _task_counts(grid: Grid, campaign_id: int) -> dict[str, int]:
    counts = dict.fromkeys(TASK_COUNT_KEYS, 0)
    counts.update(bag.counts(grid.db, campaign_id))
    counts["total"] = sum(counts[s] for s in TaskState)
    return counts


def campaign_summary(grid: Grid, campaign_id: int, *, user: str, now: float | None = None) -> dict[str, Any]:
    """The stable ``--json`` document of one of ``user``'s campaigns (the user guide's
    "gridstat --json")."""
    return _summary(grid, campaign_row(grid, campaign_id, user), database.now() if now is None else now)[0]


def _summary(grid: Grid, row: dict[str, Any], now: float) -> tuple[dict[str, Any], predictor.CampaignFigures]:
    """The summary of the campaign in ``row`` with the predictor's figures: throughput,
    remaining time and ETA (see :func:`predictor.campaign_figures`: none while paused; once
    over, its life's and its end)."""
    campaign_id = row["id"]
    counts = _task_counts(grid, campaign_id)
    figures = predictor.campaign_figures(grid.db, campaign_id, now,
                                         remaining=counts["pending"] + counts["waiting"] + counts["running"])
    return {
        "id": row["id"], "name": row["name"], "user": row["user"], "state": row["state"],
        "submitted_at": row["submitted_at"], "started_at": row["started_at"],
        "finished_at": row["finished_at"], "tasks": counts,
        "progress": round(100 * (counts["terminated"] + counts["failed"]) / counts["total"], 1)
        if counts["total"] else 100.0,  # the tasks that ran to an end: a cancelled one did not
        "open_events": stored.count_open(grid.db.conn, campaign_id),
        "replicas": stored_jobs.replicas(grid.db.conn, campaign_id),
        "throughput_per_hour": figures.throughput_per_hour,
        "remaining_seconds": figures.remaining_seconds,
        "eta": figures.eta,
    }, figures


def campaign_detail(grid: Grid, campaign_id: int, *, user: str, now: float | None = None) -> dict[str, Any]:
    """Summary plus, per cluster, the jobs by state, durations, throughput, remaining time and
    ETA (:func:`predictor.cluster_remaining`; once the campaign is over, its end), tap and
    affinity penalty.

    Reads only the bag's index, the active jobs, ``campaign_stats`` and the recent terminated
    jobs' index: it costs the same for ten tasks as for a million.
    """
    moment = database.now() if now is None else now
    summary, figures = _summary(grid, campaign_row(grid, campaign_id, user), moment)
    names = {cid: name for name, cid in grid.cluster_ids().items()}
    per_cluster: dict[int, dict[str, Any]] = {}

    def entry(cluster_id: int) -> dict[str, Any]:
        return per_cluster.setdefault(cluster_id, {
            "cluster": names[cluster_id], "jobs": {}, "average_duration": None, "duration_stddev": None,
            "throughput_per_hour": None, "remaining_seconds": None, "eta": None, "tap": None,
            "affinity_penalty": 0.0})

    held: dict[int, int] = defaultdict(int)  # active task jobs per cluster
    for cluster_id, state, n in stored_jobs.active_tasks_by_state(grid.db.conn, campaign_id):
        entry(cluster_id)["jobs"][state] = n
        held[cluster_id] += n
    for cluster_id, cluster in figures.clusters.items():
        entry(cluster_id)["jobs"].update(terminated=cluster.terminated, ended_otherwise=cluster.ended_otherwise)
        entry(cluster_id).update(average_duration=cluster.average_duration, duration_stddev=cluster.duration_stddev,
                                 throughput_per_hour=cluster.throughput_per_hour)
    for cluster_id, part in predictor.cluster_remaining(grid.db, campaign_id, moment, figures.clusters,
                                                        pending=summary["tasks"]["pending"], held=held).items():
        entry(cluster_id).update(remaining_seconds=part.remaining_seconds, eta=part.eta)
    for cluster_id, rate in predictor.taps(grid.db, campaign_id).items():
        entry(cluster_id)["tap"] = rate
    for (_, cluster_id), penalty in predictor.affinity_penalties(grid.db, [campaign_id], moment).items():
        entry(cluster_id)["affinity_penalty"] = round(penalty, 3)
    summary.update({
        "clusters": list(per_cluster.values()),
        "average_duration": figures.average_duration,
        "duration_stddev": figures.duration_stddev,
        "throughput_per_second": None if figures.throughput_per_hour is None else figures.throughput_per_hour / 3600,
    })
    return summary


CAMPAIGN_STATES = tuple(state.value for state in CampaignState)


def campaign_owners(grid: Grid) -> list[str]:
    """The users who own a campaign, by name: whom an admin may filter the campaigns by."""
    return stored_campaigns.owners(grid.db.conn)


def list_campaigns(grid: Grid, *, user: str | None = None, include_finished: bool = False,
                   states: Sequence[str] = (), name: str | None = None, since: float | None = None,
                   limit: int | None = None, offset: int = 0, newest_first: bool = False) -> list[dict[str, Any]]:
    """The summaries of the campaigns chosen, oldest first (``newest_first``: newest): ``user``'s
    (None: everyone's), the unfinished ones unless ``include_finished`` or ``states`` says
    which, those whose name matches the shell pattern ``name`` (``povray*``) and those
    submitted at or after ``since`` (epoch seconds), ``limit`` of them after skipping
    ``offset``. Summaries are public, as CiGri's ``gridstat -u``: a campaign's outputs, tasks
    and events are only its owner's (:func:`campaign_detail`)."""
    where: list[str] = []
    args: list[Any] = []
    if user:
        where.append('"user" = ?')
        args.append(user)
    if name is not None:
        matches, pattern = dialect.glob(grid.db.conn, "name", name)
        where.append(matches)
        args.append(pattern)
    if since is not None:
        where.append("submitted_at >= ?")
        args.append(since)
    for state in states:
        if state not in CAMPAIGN_STATES:
            raise InputError(f"state: expected one of {', '.join(CAMPAIGN_STATES)}, got {shown(state)}",
                             field="state")
    if states:
        where.append(f"state IN {sql_in(tuple(CampaignState(state) for state in states))}")
    elif not include_finished:
        where.append(f"state IN {sql_in(CAMPAIGN_ACTIVE)}")
    check_page(limit, offset)
    clause = ("WHERE " + " AND ".join(where)) if where else ""
    now = database.now()
    order = "DESC" if newest_first else "ASC"
    return [_summary(grid, row, now)[0] for row in stored_campaigns.listing(
        grid.db.conn, clause, args, order, -1 if limit is None else limit, offset)]


TASK_PAGE = 10_000  # tasks read at a time, with their jobs, by campaign_tasks


TASK_STATES = tuple(state.value for state in TaskState)


def campaign_tasks(grid: Grid, campaign_id: int, *, user: str, states: Sequence[str] = (), name: str | None = None,
                   limit: int | None = None, offset: int = 0) -> Iterator[dict[str, Any]]:
    """The tasks of one of ``user``'s campaigns in id order, each with its jobs (``gridstat
    -f``), only those in ``states`` if given (``gridstat -c N --state failed``) and those whose
    name matches the shell pattern ``name`` (``input_1*``): ``limit`` of them after ``offset``,
    all by default. States without ``pending`` are read through the
    bag's index (the failed tasks of a million-task campaign are found without reading the
    others: fresh tasks are pending, outside the index). Streamed a page at a time, so a
    million tasks are never held together."""
    campaign_row(grid, campaign_id, user)
    check_page(limit, offset)
    for state in states:
        if state not in TASK_STATES:
            raise InputError(f"state: expected one of {', '.join(TASK_STATES)}, got {shown(state)}", field="state")
    chosen = f"AND state IN {sql_in(tuple(TaskState(state) for state in states))} " if states else ""
    if states and TaskState.PENDING not in states:
        chosen += f"AND {bag.INDEXED} "
    patterns: list[Any] = []
    if name is not None:
        matches, pattern = dialect.glob(grid.db.conn, "name", name)
        chosen += f"AND {matches} "
        patterns.append(pattern)
    low, high = stored_tasks.span(grid.db.conn, campaign_id)
    left = -1 if limit is None else limit
    while left != 0:
        page = stored_tasks.page(grid.db.conn, campaign_id, low, high, chosen, patterns,
                                 TASK_PAGE if left < 0 else min(left, TASK_PAGE), offset)
        if not page:
            return
        jobs: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for job in stored_jobs.of_tasks(grid.db.conn, [task["id"] for task in page]):  # the page's own tasks
            jobs[job.pop("task_id")].append(job)
        for task in page:
            task["jobs"] = jobs.get(task["id"], [])
            yield task
        offset += len(page)
        left = left if left < 0 else left - len(page)


def imported_campaign(grid: Grid, v3_id: int, *, user: str) -> int:
    """The campaign that CiGri's campaign ``v3_id`` became at ``cigri import-v3``, if ``user``
    may see it: the import keeps CiGri's number unless cigri had given it, and then CiGri's users
    still name it ``v3:N``. Another user's is answered as one never imported."""
    row = stored_campaigns.imported(grid.db.conn, v3_id) if storable(v3_id) else None
    if row is None or not may_see(grid, row[1], user):
        raise NotFound(f"v3:{v3_id}: no campaign of CiGri numbered {v3_id} was imported (cigri import-v3)")
    return int(row[0])


def campaign_jdl(grid: Grid, campaign_id: int, *, user: str) -> dict[str, Any]:
    """The JDL one of ``user``'s campaigns was submitted with, as stored (inline ``params``
    left out: they are its tasks)."""
    return json.loads(campaign_row(grid, campaign_id, user)["jdl"])


def campaign_clusters(grid: Grid, campaign_id: int, *, user: str) -> list[dict[str, Any]]:
    """Every cluster one of ``user``'s campaigns may use, in its JDL's order, with its jobs
    there (``active_jobs``: waiting or running; ``queued_jobs``: being sent) and whether its
    prologue and epilogue there are done (true where it has none): what CiGri's campaign
    document held per cluster."""
    campaign_row(grid, campaign_id, user)
    names = {cluster_id: name for name, cluster_id in grid.cluster_ids().items()}
    jobs: dict[tuple[int, str], int] = defaultdict(int)
    for cluster_id, state, n in stored_jobs.active_tasks_by_state(grid.db.conn, campaign_id):
        jobs[(cluster_id, state)] = n
    scripts_done = stored_jobs.scripts_done(grid.db.conn, campaign_id)
    return [{"cluster_id": cluster_id, "cluster": names[cluster_id],
             "active_jobs": jobs[(cluster_id, JobState.WAITING)] + jobs[(cluster_id, JobState.RUNNING)],
             "queued_jobs": jobs[(cluster_id, JobState.SUBMITTING)],
             **{f"{kind}_ok": not settings.get(kind) or (cluster_id, kind) in scripts_done
                for kind in ("prologue", "epilogue")}}
            for cluster_id, settings in grid.campaign_properties([campaign_id])[campaign_id].items()]


def campaign_throughput(grid: Grid, campaign_id: int, *, user: str, points: int = 60,
                        now: float | None = None) -> dict[str, Any]:
    """One of ``user``'s campaigns' tasks terminated over its life (from its start, or its
    submission, to its end or now) in ``points`` buckets of ``step`` seconds each: what
    ``gridstat -c N --plot`` draws. Read from the terminated jobs' index."""
    row = campaign_row(grid, campaign_id, user)
    if not 1 <= points <= 10_000:
        raise InputError("points: expected 1 to 10000", field="points")
    start = row["started_at"] or row["submitted_at"]
    end = max(row["finished_at"] or (database.now() if now is None else now), start + 1)
    step = (end - start) / points
    counts = [0] * points
    for bucket, n in stored_jobs.terminated_buckets(grid.db.conn, campaign_id, start, end, step, points):
        counts[bucket] = n
    return {"id": campaign_id, "from": start, "to": end, "step": step, "terminated": counts}
