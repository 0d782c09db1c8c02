"""Colombo: look at every job that ended badly, decide what happens to its task, raise events.

Decisions, by the reason a job ended (README "Events" has the catalogue):

- preempted by the cluster for its own users (best effort) or by cigri: back to the head of
  the bag, without limit; counted in the task's ``preemptions``, not its attempts;
- killed at its walltime: back to the tail, JDL ``walltime_resubmit`` times (default 3), then
  the task fails (``WALLTIME``);
- exit status 66 / 67: back to the head / tail (CiGri's convention); a lost job or one
  cancelled outside cigri: back to the head;
- every resubmission but a preemption counts in ``resubmits``: beyond ``max_resubmit`` the task
  fails with ``TOO_MANY_RESUBMIT`` instead of looping;
- any other non-zero exit fails the task (``EXIT_ERROR`` with the stderr tail); when too many of a
  campaign's jobs fail on one cluster (``failure_rate``), the cluster is blacklisted for it.

A failed prologue closes the cluster to the campaign; with no cluster left, the campaign's
remaining tasks fail so that it still terminates. Decisions are read from states, not from
memory, so a crash just means the next cycle decides.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from cigri import bag
from cigri import db as database
from cigri.cycle_context import CycleContext
from cigri.db import campaigns as stored_campaigns
from cigri.db import events as stored
from cigri.db import jobs as stored_jobs
from cigri.db import tasks as stored_tasks
from cigri.events import blacklist_pair, close, record, signature
from cigri.states import EXIT_RESUBMIT_HEAD, JobState, KillReason, TaskState

log = logging.getLogger("cigri.colombo")
DEFAULT_WALLTIME_RESUBMIT = 3
UNDECIDED = (JobState.FAILED, JobState.TIMEOUT, JobState.LOST, JobState.RESUBMIT, JobState.CANCELLED,
             JobState.PREEMPTED)


def analyse(ctx: CycleContext) -> int:
    """Decide every undecided ending; return how many tasks were decided. A campaign whose data
    makes a decision raise is set aside (:mod:`cigri.faults`); the others are decided."""
    _autofix_pairs(ctx)
    decided = 0
    for campaign_id, user in stored_campaigns.under_way(ctx.grid.db.conn):
        if campaign_id not in ctx.set_aside:
            with ctx.isolated("colombo", campaign_id=campaign_id):
                decided += _analyse_campaign(ctx, campaign_id, user)
    _stuck_launching(ctx)
    _script_failures(ctx)
    return decided


def _analyse_campaign(ctx: CycleContext, campaign_id: int, user: str) -> int:
    """Decide the campaign's undecided endings, in one transaction; return how many."""
    jobs = stored_tasks.undecided_endings(ctx.grid.db.conn, campaign_id, UNDECIDED)
    if not jobs:
        return 0
    tails = {j["id"]: _stderr_tail(ctx, j, user) for j in jobs if j["state"] == JobState.FAILED}
    settings = ctx.grid.campaign_properties([campaign_id])[campaign_id]
    with database.write(ctx.grid.db) as conn:
        exit_errors: Counter[int] = Counter()
        for job in jobs:
            limit = settings.get(job["cluster_id"], {}).get("walltime_resubmit", DEFAULT_WALLTIME_RESUBMIT)
            if _decide(ctx, conn, campaign_id, job, tails.get(job["id"]), limit):
                exit_errors[job["cluster_id"]] += 1
        for cluster_id, count in exit_errors.items():
            _judge_pair(ctx, conn, campaign_id, cluster_id, count)
    return len(jobs)


def _stderr_tail(ctx: CycleContext, job: dict[str, Any], user: str) -> str | None:
    """The end of the job's stderr, read as its owner ``user``."""
    try:
        return ctx.grid.backend(job["cluster_id"]).output_tail(job["remote_id"], "stderr",
                                                               ctx.grid.config.settings.stderr_tail_lines, user)
    except Exception as error:  # a missing tail must not stop the decision
        return f"(stderr unavailable: {error})"


_KILLED_BY: dict[str | None, str] = {None: "best-effort job killed for the cluster's own users",
                                     KillReason.PREEMPT: "job preempted by cigri's fair share",
                                     KillReason.FLOOD: "job killed by flood control: it waited too long or beyond the tap"}


def _decide(ctx: CycleContext, conn: Any, campaign_id: int, job: dict[str, Any], tail: str | None,
            walltime_resubmit: int) -> bool:
    """Move the task on from its job's ending; True when it counts as an exit error."""
    task_id, state, name = job["task_id"], job["state"], job["name"]
    where = dict(campaign_id=campaign_id, cluster_id=job["cluster_id"], job_id=job["id"], task_id=task_id)
    if state == JobState.CANCELLED and job["kill_reason"] == KillReason.USER:
        stored_tasks.set_state(conn, task_id, TaskState.CANCELLED)
    elif state == JobState.PREEMPTED:  # the cluster's own users, fair share or flood control: not the task's fault
        stored_tasks.preempted(conn, task_id)
        killer = job["kill_reason"] if job["kill_reason"] in _KILLED_BY else None
        record(conn, "BEST_EFFORT_KILL", f"{_KILLED_BY[killer]}; task resubmitted", signature=killer or "", **where)
    elif state == JobState.FAILED:
        stored_tasks.set_state(conn, task_id, TaskState.FAILED)
        record(conn, "EXIT_ERROR", f"task {name} exited with status {job['exit_code']}", stderr_tail=tail,
               signature=signature(tail), **where)
        return True
    elif state == JobState.TIMEOUT and job["walltime_kills"] >= walltime_resubmit:
        stored_tasks.fail_at_walltime(conn, task_id)
        record(conn, "WALLTIME", f"task {name} was killed at its walltime {job['walltime_kills'] + 1} time(s) "
                                 f"(walltime_resubmit = {walltime_resubmit}); task failed", **where)
    elif state == JobState.TIMEOUT:
        _resubmit(ctx, conn, job, bag.PRIORITY_TAIL, "WALLTIME_RESUBMIT",
                  "task killed at its walltime; resubmitted at the tail of the bag", where, walltime=True)
    elif state == JobState.RESUBMIT:
        head = job["exit_code"] == EXIT_RESUBMIT_HEAD
        _resubmit(ctx, conn, job, bag.PRIORITY_HEAD if head else bag.PRIORITY_TAIL, "RESUBMIT",
                  f"exit status {job['exit_code']}: resubmitted at the {'head' if head else 'tail'} of the bag",
                  where, signature=str(job["exit_code"]))
    else:
        _resubmit(ctx, conn, job, bag.PRIORITY_HEAD, "LOST_JOB",
                  f"job {state} on the cluster (not by cigri); resubmitted", where, signature=state)
    return False


def _resubmit(ctx: CycleContext, conn: Any, job: dict[str, Any], priority: int, code: str, message: str,
              where: dict[str, Any], *, walltime: bool = False, signature: str = "") -> None:
    """Put the task back in the bag, unless it has been resubmitted too many times in a row."""
    limit = ctx.grid.config.settings.max_resubmit
    if job["resubmits"] >= limit:
        stored_tasks.set_state(conn, job["task_id"], TaskState.FAILED)
        record(conn, "TOO_MANY_RESUBMIT", f"task {job['name']} resubmitted {job['resubmits']} times in a row "
                                          f"(max_resubmit); its last job ended {job['state']}; task failed", **where)
        return
    stored_tasks.resubmit(conn, job["task_id"], priority, walltime)
    record(conn, code, message, signature=signature, **where)


def _judge_pair(ctx: CycleContext, conn: Any, campaign_id: int, cluster_id: int, new_errors: int) -> None:
    """Blacklist the cluster for the campaign once its exit errors there reach ``failure_rate``
    of its ended jobs (and at least ``failure_rate_min`` errors) since the last reset."""
    settings = ctx.grid.config.settings
    errors, base, blacklisted = stored_campaigns.count_exit_errors(conn, campaign_id, cluster_id, new_errors)
    terminated = stored_campaigns.terminated_on(conn, campaign_id, cluster_id) - base
    if blacklisted is None and errors >= max(settings.failure_rate_min, 1) \
            and errors / (errors + terminated) >= settings.failure_rate:
        blacklist_pair(conn, campaign_id, cluster_id,
                       f"{errors} exit errors against {terminated} successes (failure_rate {settings.failure_rate})")
        log.warning("campaign %s: cluster %s blacklisted for it (%s exit errors)", campaign_id, ctx.name(cluster_id),
                    errors)


def _autofix_pairs(ctx: CycleContext) -> None:
    """Lift a campaign's blacklist on a cluster once its delay (``autofix_delay``, doubled at each
    new blacklisting) has passed and the cluster answered this cycle's capacity call."""
    now, delay = database.now(), ctx.grid.config.settings.autofix_delay
    due = [event_id for event_id, cluster_id, checked_at, strikes in stored_campaigns.blacklists(ctx.grid.db.conn)
        if cluster_id in ctx.capacities and now - checked_at >= delay * 2 ** max(strikes - 1, 0)]
    if not due:
        return
    with database.write(ctx.grid.db) as conn:
        for event_id in due:
            close(conn, *stored.fixable(event_id=event_id))


def _stuck_launching(ctx: CycleContext) -> None:
    """Report jobs still ``submitting`` after ``stuck_delay``; close the reports once they are sent."""
    stuck = stored_jobs.stuck_launching(ctx.grid.db.conn, database.now() - ctx.grid.config.settings.stuck_delay)
    if not stuck and not stored.any_open(ctx.grid.db.conn, "STUCK_LAUNCHING"):
        return
    with database.write(ctx.grid.db) as conn:
        for job_id, campaign_id, cluster_id, task_id in stuck:
            record(conn, "STUCK_LAUNCHING", f"jobs not accepted by the cluster after "
                                            f"{ctx.grid.config.settings.stuck_delay:.0f}s; re-sent each cycle",
                   campaign_id=campaign_id, cluster_id=cluster_id, job_id=job_id, task_id=task_id)
        close(conn, *stored.launched())


def _script_failures(ctx: CycleContext) -> None:
    """Prologue/epilogue jobs that ended badly get one event; a campaign with no cluster left fails its bag."""
    failed = stored.unreported_script_failures(ctx.grid.db.conn)
    if not failed:
        return
    with database.write(ctx.grid.db) as conn:
        for job_id, campaign_id, cluster_id, kind, state, exit_code in failed:
            record(conn, f"{kind.upper()}_FAILED",
                   f"{kind} ended as {state} (exit status {exit_code}); "
                   + ("no task of this campaign will run on this cluster" if kind == "prologue" else
                      "the campaign is over anyway"),
                   campaign_id=campaign_id, cluster_id=cluster_id, job_id=job_id)
            if kind == "prologue" and stored_campaigns.clusters_left(conn, campaign_id) == 0:
                bag.end_all(conn, campaign_id, (TaskState.PENDING,), TaskState.FAILED)
                log.warning("campaign %s: prologue failed on every cluster; its tasks fail", campaign_id)
