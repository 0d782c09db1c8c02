"""Colombo: look at every job that ended badly, decide what happens to its task, raise events.

Decisions: a best-effort job preempted by the cluster goes back to the head of the bag
without counting as an attempt; exit 66/67 puts the task back at the head/tail; a lost job or one
cancelled by someone other than cigri is retried; all of these stop at ``max_attempts``
(``TOO_MANY_ATTEMPTS``). A non-zero exit or a walltime kill fails the task and records an
event with the stderr tail. A failed prologue closes the cluster to the campaign; when no
cluster is left, the campaign's remaining tasks fail so that it still terminates.
Decisions are read from states, not from memory, so a crash just means the next cycle decides.
"""

from __future__ import annotations

import logging
from typing import Any

from cigri import db as database
from cigri.cycle_context import CycleContext
from cigri.events import open_event
from cigri.states import EXIT_RESUBMIT_HEAD, JOB_ACTIVE, CampaignState, JobState, KillReason, TaskState, sql_in

log = logging.getLogger("cigri.colombo")
PRIORITY_HEAD, PRIORITY_TAIL = 20, 0
UNDECIDED = (JobState.FAILED, JobState.TIMEOUT, JobState.LOST, JobState.RESUBMIT, JobState.CANCELLED,
             JobState.PREEMPTED)


def analyse(ctx: CycleContext) -> int:
    """Decide every undecided ending; return how many tasks were decided."""
    decided = 0
    for (campaign_id,) in ctx.grid.db.execute("SELECT id FROM campaigns WHERE state IN (?, ?)",
                                              [CampaignState.IN_TREATMENT, CampaignState.PAUSED]).fetchall():
        jobs = list(ctx.grid.db.query(
            "SELECT j.id, j.task_id, j.cluster_id, j.remote_id, j.state, j.exit_code, j.kill_reason, "
            "t.attempts, t.name FROM tasks t JOIN jobs j ON j.task_id = t.id "
            f"WHERE t.campaign_id = ? AND t.state IN (?, ?) AND j.state IN ({','.join('?' * len(UNDECIDED))}) "
            # Only the task's latest job: an earlier attempt's ending was decided when it ended,
            # and deciding it again would re-queue the task while its current attempt runs. And
            # only once no copy of the task is active: a replica (finalize scheduler) that ends
            # badly decides nothing while another copy runs, since that copy may still win.
            "AND j.id = (SELECT max(id) FROM jobs WHERE task_id = t.id) "
            f"AND NOT EXISTS (SELECT 1 FROM jobs a WHERE a.task_id = t.id AND a.state IN {sql_in(JOB_ACTIVE)})",
            [campaign_id, TaskState.WAITING, TaskState.RUNNING, *UNDECIDED]))
        tails = {j["id"]: _stderr_tail(ctx, j) for j in jobs if j["state"] == JobState.FAILED}
        with database.write(ctx.grid.db) as conn:
            for job in jobs:
                _decide(ctx, conn, campaign_id, job, tails.get(job["id"]))
                decided += 1
    _script_failures(ctx)
    return decided


def _stderr_tail(ctx: CycleContext, job: dict[str, Any]) -> str | None:
    try:
        return ctx.grid.backend(job["cluster_id"]).output_tail(job["remote_id"], "stderr",
                                                               ctx.grid.config.settings.stderr_tail_lines)
    except Exception as error:  # a missing tail must not stop the decision
        return f"(stderr unavailable: {error})"


def _decide(ctx: CycleContext, conn: Any, campaign_id: int, job: dict[str, Any], tail: str | None) -> None:
    task_id, state = job["task_id"], job["state"]
    where = dict(campaign_id=campaign_id, cluster_id=job["cluster_id"], job_id=job["id"], task_id=task_id)
    if state == JobState.CANCELLED and job["kill_reason"] == KillReason.USER:
        _set_task(conn, task_id, TaskState.CANCELLED)
    elif state == JobState.PREEMPTED:  # the cluster's own users came first: not the task's fault
        conn.execute("UPDATE tasks SET state = ?, priority = ?, attempts = attempts - 1 WHERE id = ? "
                     "AND state IN (?, ?)", [TaskState.PENDING, PRIORITY_HEAD, task_id, TaskState.WAITING,
                                             TaskState.RUNNING])
    elif state == JobState.FAILED:
        _set_task(conn, task_id, TaskState.FAILED)
        open_event(conn, "job", "EXIT_ERROR", f"task {job['name']} exited with status {job['exit_code']}",
                   stderr_tail=tail, **where)
    elif state == JobState.TIMEOUT:
        _set_task(conn, task_id, TaskState.FAILED)
        open_event(conn, "job", "WALLTIME", f"task {job['name']} was killed at its walltime", **where)
    elif job["attempts"] >= ctx.grid.config.settings.max_attempts:
        _set_task(conn, task_id, TaskState.FAILED)
        open_event(conn, "job", "TOO_MANY_ATTEMPTS",
                   f"task {job['name']} ended as {state} after {job['attempts']} attempts; giving up", **where)
    else:
        if state == JobState.RESUBMIT:
            priority = PRIORITY_HEAD if job["exit_code"] == EXIT_RESUBMIT_HEAD else PRIORITY_TAIL
        else:
            priority = PRIORITY_HEAD
            open_event(conn, "job", "LOST_JOB", f"task {job['name']}: job {state} on the cluster; resubmitted",
                       **where)
        conn.execute("UPDATE tasks SET state = ?, priority = ? WHERE id = ? AND state IN (?, ?)",
                     [TaskState.PENDING, priority, task_id, TaskState.WAITING, TaskState.RUNNING])


def _set_task(conn: Any, task_id: int, state: TaskState) -> None:
    conn.execute("UPDATE tasks SET state = ? WHERE id = ? AND state IN (?, ?)",
                 [state, task_id, TaskState.WAITING, TaskState.RUNNING])


def _script_failures(ctx: CycleContext) -> None:
    """Prologue/epilogue jobs that ended badly get one event; a campaign with no cluster left fails its bag."""
    failed = ctx.grid.db.execute(
        "SELECT j.id, j.campaign_id, j.cluster_id, j.kind, j.state, j.exit_code FROM jobs j "
        "WHERE j.kind != 'task' AND j.state NOT IN (?, ?, ?, ?) "
        "AND NOT EXISTS (SELECT 1 FROM events e WHERE e.job_id = j.id)",
        [JobState.SUBMITTING, JobState.WAITING, JobState.RUNNING, JobState.TERMINATED]).fetchall()
    if not failed:
        return
    with database.write(ctx.grid.db) as conn:
        for job_id, campaign_id, cluster_id, kind, state, exit_code in failed:
            open_event(conn, "campaign", f"{kind.upper()}_FAILED",
                       f"{kind} ended as {state} (exit status {exit_code}); "
                       + ("no task of this campaign will run on this cluster" if kind == "prologue" else
                          "the campaign is over anyway"),
                       campaign_id=campaign_id, cluster_id=cluster_id, job_id=job_id)
            clusters_left = conn.execute(
                "SELECT count(*) FROM campaign_properties p WHERE p.campaign_id = ? AND p.name = 'exec_file' "
                "AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.campaign_id = p.campaign_id AND "
                "j.cluster_id = p.cluster_id AND j.kind = 'prologue' AND j.state NOT IN (?, ?, ?, ?))",
                [campaign_id, JobState.SUBMITTING, JobState.WAITING, JobState.RUNNING, JobState.TERMINATED]
            ).fetchone()[0]
            if kind == "prologue" and clusters_left == 0:
                conn.execute("UPDATE tasks SET state = ? WHERE campaign_id = ? AND state = ?",
                             [TaskState.FAILED, campaign_id, TaskState.PENDING])
                log.warning("campaign %s: prologue failed on every cluster; its tasks fail", campaign_id)
