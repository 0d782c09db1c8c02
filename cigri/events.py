"""Events: what went wrong (or what cigri did about it), for users (gridevents) and admins.

The catalogue below is the one place where codes, their severity and whether they stay open
live; README "Events" shows it as a table. Identical occurrences (same code, campaign,
cluster and signature, e.g. the stderr line saying what failed with its numbers, paths and
hexadecimal masked: :func:`signature`) add to one event's ``count`` with a few examples, so a
thousand tasks failing the same way on their own inputs are one row, one line in gridevents and
one notification. An *opening* event waits for someone to look at it
(``gridevents --fix``) and remembers every job it covers, so ``--fix --resubmit`` can put their
tasks back; the others are recorded closed, as a counted log of what cigri did on its own.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from enum import StrEnum

from cigri import db as database
from cigri.db import events as stored


class Severity(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"

    @property
    def rank(self) -> int:
        return ("low", "medium", "high").index(self.value)


@dataclass(frozen=True)
class Code:
    kind: str  # job, campaign or cluster: who the event is about
    severity: Severity
    opens: bool  # stays open until fixed; otherwise recorded closed
    action: str  # what cigri does about it (README's catalogue)


LOW, MEDIUM, HIGH = Severity.LOW, Severity.MEDIUM, Severity.HIGH
CONNECTION_CODES = ("CLUSTER_UNREACHABLE", "CLUSTER_TIMEOUT", "CLUSTER_AUTH_FAILURE", "CLUSTER_BAD_ANSWER")
EXAMPLES = 5
MANUALLY_DISABLED = "CLUSTER_MANUALLY_DISABLED"  # an admin's blacklist: lifted by an admin only (CiGri's code)
IMPORTED = "CLUSTER_IMPORTED"  # a cluster import-v3 added: not contacted at all until an admin lifts it
UNCONFIRMED = "UNCONFIRMED_LAUNCH"  # a job CiGri may have sent: its task waits for its owner's look

CATALOGUE: dict[str, Code] = {
    "EXIT_ERROR": Code("job", HIGH, True, "task failed, stderr tail kept; counts toward the campaign's "
                                          "failure rate on the cluster (`failure_rate`)"),
    "BEST_EFFORT_KILL": Code("job", LOW, False, "killed by the cluster for its own users, by fair share or by "
                                                "flood control (one event each): task back at the head of the "
                                                "bag, without limit; counted in "
                                                "the task's preemptions, not its attempts"),
    "WALLTIME_RESUBMIT": Code("job", LOW, False, "task back at the tail of the bag (JDL `walltime_resubmit` "
                                                 "times, default 3)"),
    "WALLTIME": Code("job", MEDIUM, True, "task failed: killed at its walltime once more than "
                                          "`walltime_resubmit` allows"),
    "RESUBMIT": Code("job", LOW, False, "exit status 66: task back at the head of the bag; 67: at the tail"),
    "LOST_JOB": Code("job", MEDIUM, False, "the cluster forgot the job or it was cancelled outside cigri: "
                                           "task back at the head of the bag"),
    "TOO_MANY_RESUBMIT": Code("job", HIGH, True, "task failed after `max_resubmit` resubmissions in a row "
                                                 "(best-effort kills aside)"),
    "STUCK_LAUNCHING": Code("job", MEDIUM, True, "a job stayed `submitting` longer than `stuck_delay`: re-sent "
                                                 "each cycle (idempotently); closed once sent"),
    "MANUAL_EVENT": Code("job", HIGH, True, "none: an admin's mark on the job, open until fixed"),
    "USER_CANCEL": Code("campaign", LOW, False, "griddel: open tasks cancelled, jobs killed by nikita"),
    "PROLOGUE_FAILED": Code("campaign", HIGH, True, "no task of the campaign runs on that cluster; with no "
                                                    "cluster left, its remaining tasks fail"),
    "EPILOGUE_FAILED": Code("campaign", MEDIUM, True, "none: the campaign ends anyway"),
    "CAMPAIGN_FINISHED": Code("campaign", LOW, False, "none (notified)"),
    "CAMPAIGN_FAILED": Code("campaign", HIGH, False, "none (notified): every task ended, some failed"),
    "SUBMISSION_ERROR": Code("cluster", HIGH, True, "the cluster refused a campaign's jobs as described: their "
                                                    "tasks go back to the head of the bag for the campaign's other "
                                                    "clusters (no attempt counted), and none of its jobs go to "
                                                    "that cluster until the event is fixed; with no cluster "
                                                    "left, its tasks wait in the bag. Another call refused so "
                                                    "(a cancel as a user with no login there) counts toward "
                                                    "`blacklist_after`"),
    "SUBMIT_LIMIT": Code("cluster", LOW, False, "the cluster took no more jobs from cigri's account (a site's "
                                                "submit limit): the jobs that did not fit go back to the head "
                                                "of the bag, nothing fails; cigri holds at most what it held "
                                                "there for an hour (`max_jobs` sets it for good)"),
    "CLUSTER_UNREACHABLE": Code("cluster", MEDIUM, True, "cluster skipped this cycle; counts toward "
                                                         "`blacklist_after`; closed when it answers again"),
    "CLUSTER_TIMEOUT": Code("cluster", MEDIUM, True, "as CLUSTER_UNREACHABLE"),
    "CLUSTER_AUTH_FAILURE": Code("cluster", HIGH, True, "as CLUSTER_UNREACHABLE"),
    "CLUSTER_BAD_ANSWER": Code("cluster", MEDIUM, True, "as CLUSTER_UNREACHABLE"),
    "CLUSTER_STRESSED": Code("cluster", MEDIUM, True, "no new job on the cluster (taps 0; waiting jobs "
                                                      "flood-killed after `flood_grace`) until its stress falls "
                                                      "to half its `stress_factor`; closed then"),
    "BLACKLISTED": Code("cluster", HIGH, True, "no new job on the cluster (class cluster) or for the campaign "
                                               "there (class campaign); re-checked after `autofix_delay` and "
                                               "lifted when healthy, or by `gridevents --fix`"),
    "CLUSTER_MANUALLY_DISABLED": Code("cluster", HIGH, True, "an admin's blacklist (`cigri cluster blacklist`): no "
                                                             "new job on the cluster, its jobs there followed to "
                                                             "their end; lifted by `gridevents --fix` on it or "
                                                             "`cigri cluster unblacklist`, never automatically"),
    "CLUSTER_IMPORTED": Code("cluster", HIGH, True, "a cluster `cigri import-v3` added from CiGri's database: "
                                                    "cigri sends, polls and cancels nothing there, and tells "
                                                    "whoever asks for it so, until an admin has set its options "
                                                    "and lifts it (`cigri cluster unblacklist` or `gridevents "
                                                    "--fix` on it)"),
    "UNCONFIRMED_LAUNCH": Code("job", HIGH, True, "a job CiGri was sending when its database was imported "
                                                     "(`launching`, or no remote id): it may run there; its task "
                                                     "stays failed until its owner has looked on the cluster: "
                                                     "`gridevents --fix --resubmit` sends it again, `--fix` "
                                                     "leaves it"),
    "SET_ASIDE": Code("campaign", HIGH, True, "a cycle step raised on stored data: a task whose parameter line "
                                              "cannot be split fails alone (class job); a campaign (or cluster) "
                                              "whose data raised gets no new job and no decision (is not used) "
                                              "until `gridevents --fix` on the event; the others go on"),
}


def record(conn: sqlite3.Connection, code: str, message: str, *, campaign_id: int | None = None,
           cluster_id: int | None = None, job_id: int | None = None, task_id: int | None = None,
           stderr_tail: str | None = None, signature: str = "", kind: str | None = None) -> int:
    """Count one occurrence of ``code`` in its aggregate event (created if needed); return its id.

    The event keeps its first :data:`EXAMPLES` occurrences (task, job, and the telling line of
    their stderr). A job already covered by the open event is not counted twice (a stuck job
    seen each cycle).
    """
    entry = CATALOGUE[code]
    now = database.now()
    example: dict[str, object] = {"task_id": task_id, "job_id": job_id}
    if stderr_tail is not None:  # each example's own line: the group masks what tells them apart
        example["line"] = telling_line(stderr_tail)
    state = "open" if entry.opens else "closed"
    found = stored.aggregate(conn, code, campaign_id, cluster_id, signature, state)
    if found is None:
        event_id = stored.insert(conn, kind=kind or entry.kind, code=code, severity=entry.severity, state=state,
                                 campaign_id=campaign_id, cluster_id=cluster_id, job_id=job_id, task_id=task_id,
                                 message=message, stderr_tail=stderr_tail, signature=signature,
                                 examples=[example] if job_id or task_id else [], now=now)
        if entry.opens and job_id is not None:
            stored.cover(conn, event_id, job_id, task_id)
        return event_id
    event_id, examples = found
    if entry.opens and job_id is not None and not stored.cover(conn, event_id, job_id, task_id):
        return event_id
    if (job_id or task_id) and len(examples) < EXAMPLES:
        examples.append(example)
    stored.count_again(conn, event_id, examples, now)
    return event_id


def open_event(conn: sqlite3.Connection, kind: str, code: str, message: str, **where: int | str | None) -> int:
    """:func:`record` with the event's class given first (the runner's calls)."""
    return record(conn, code, message, kind=kind, **where)  # type: ignore[arg-type]


def telling_line(tail: str | None) -> str:
    """The line of a stderr tail that says what failed: its first non-blank one, or the last of
    a Python traceback (whose first line, ``Traceback (most recent call last):``, is every
    error's, and whose tail may start inside its frames); at most 200 characters."""
    lines = [line.strip() for line in (tail or "").splitlines() if line.strip()]
    if not lines:
        return ""
    traceback = "Traceback (most recent call last):" in lines or lines[0].startswith('File "')
    return (lines[-1] if traceback else lines[0])[:200]


# What tells one failure from another is the shape of its message and the kind of error, not
# the numbers, paths and hashes naming the input, file, node, job or line it happened on: 16
# tasks failing with ``error: input 9 is corrupt (checksum mismatch)``, ``… input 18 …`` are one
# failure, ``error: input <n> is corrupt (checksum mismatch)``. So every number goes, within a
# word too (``node12``, ``job00411``, ``cigri.12.sh``, a shell's ``script: 16:`` line), every
# word with a slash (a path, ``/var/spool/slurmd/job411/slurm_script``), and every hexadecimal
# run (``0x7ffd…``, a checksum, a UUID). The words stay, case included, and so do the numbers
# that name the kind of error: an errno, a signal, an exit status or code, ``error 404``.
_MASKS = re.compile(
    r"(?P<kind>\b(?:errno|signal|status|code|exit)\s*[=:#]?\s*\d+|\berror\s+\d+)"
    r"|(?P<path>[\w.~+@%/-]*/[\w.~+@%/-]*)"
    r"|(?P<hex>\b(?:0x[0-9a-f]+|[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}"
    r"|(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,})\b)"
    r"|(?P<n>\d+(?:\.\d+)*(?:e[-+]?\d+)?)", re.IGNORECASE)


def _mask(match: re.Match[str]) -> str:
    if match["path"] is not None and not re.search(r"\w", match[0]):
        return match[0]  # a slash alone is no path
    return match[0] if match["kind"] else f"<{match.lastgroup}>"


def signature(tail: str | None) -> str:
    """What identical failures have in common: the telling line of their stderr tail
    (:func:`telling_line`) with its numbers, paths and hexadecimal runs masked as ``<n>``,
    ``<path>`` and ``<hex>`` (:data:`_MASKS`), so that a thousand tasks failing the same way on
    their own inputs are one event, and two kinds of error two events."""
    return _MASKS.sub(_mask, telling_line(tail))


def close(conn: sqlite3.Connection, where: str, args: list[object]) -> int:
    """Close the open events matching ``where`` (a fixed SQL condition) and lift the blacklists
    they hold; return how many were closed."""
    return len(stored.close(conn, where, args, database.now()))


def close_cluster_problems(conn: sqlite3.Connection, cluster_id: int) -> None:
    """The cluster answered: its connection problems are over."""
    close(conn, *stored.connection_problems(cluster_id, CONNECTION_CODES))


def blacklist_cluster(conn: sqlite3.Connection, cluster_id: int, reason: str) -> None:
    """Blacklist a whole cluster automatically: a BLACKLISTED event holds it (autofix re-checks)."""
    event_id = record(conn, "BLACKLISTED", f"cluster blacklisted: {reason}", cluster_id=cluster_id)
    stored.hold_cluster(conn, cluster_id, event_id, reason, database.now())


def blacklist_pair(conn: sqlite3.Connection, campaign_id: int, cluster_id: int, reason: str) -> None:
    """Stop sending the campaign's tasks to the cluster; other campaigns and clusters go on."""
    event_id = record(conn, "BLACKLISTED", f"cluster blacklisted for this campaign: {reason}",
                      campaign_id=campaign_id, cluster_id=cluster_id, kind="campaign")
    stored.hold_pair(conn, campaign_id, cluster_id, event_id, database.now())
