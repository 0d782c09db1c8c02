"""Life cycles of campaigns, tasks and jobs: enums, terminal sets and allowed transitions.

A state change is always one ``UPDATE ... WHERE id = ? AND state IN (allowed)``: the
transition tables below are the ``allowed`` sets, so two processes can never both move
the same row.
"""

from enum import StrEnum


class CampaignState(StrEnum):
    IN_TREATMENT = "in_treatment"
    PAUSED = "paused"
    TERMINATED = "terminated"
    FAILED = "failed"  # every task ended and some failed
    CANCELLED = "cancelled"


CAMPAIGN_ACTIVE = (CampaignState.IN_TREATMENT, CampaignState.PAUSED)


class TaskState(StrEnum):
    """A task is one parameter line; ``pending`` means still in the bag."""

    PENDING = "pending"
    WAITING = "waiting"  # a job is queued on a cluster
    RUNNING = "running"
    TERMINATED = "terminated"  # a job ended with exit status 0
    FAILED = "failed"
    CANCELLED = "cancelled"


TASK_OPEN = (TaskState.PENDING, TaskState.WAITING, TaskState.RUNNING)
TASK_ENDED = (TaskState.TERMINATED, TaskState.FAILED, TaskState.CANCELLED)


class JobState(StrEnum):
    """One attempt of a task (or a prologue/epilogue) on one cluster."""

    SUBMITTING = "submitting"  # row written, key reserved, remote call may not have happened
    WAITING = "waiting"
    RUNNING = "running"
    TERMINATED = "terminated"
    FAILED = "failed"
    TIMEOUT = "timeout"  # killed at walltime
    CANCELLED = "cancelled"
    LOST = "lost"  # the cluster no longer knows the job
    PREEMPTED = "preempted"  # best-effort job killed by the cluster: resubmitted, not counted
    RESUBMIT = "resubmit"  # exit status 66/67: the task asked to be run again


class KillReason(StrEnum):
    """Why nikita kills a job, which decides what becomes of its task."""

    USER = "user"  # griddel: the task is cancelled
    PREEMPT = "preempt"  # fair share: the task goes back to the head of the bag, no attempt counted
    FLOOD = "flood"  # waited too long on a cluster: back to the bag, to run elsewhere
    REPLICA = "replica"  # another copy of the task won: the task is left as it is
    PAUSE = "pause"  # its campaign was paused before it started: back to the head of the bag, nothing counted


KILL_REQUEUES = (KillReason.PREEMPT, KillReason.FLOOD)  # killed jobs end as PREEMPTED


JOB_ACTIVE = (JobState.SUBMITTING, JobState.WAITING, JobState.RUNNING)
JOB_ENDED = (
    JobState.TERMINATED,
    JobState.FAILED,
    JobState.TIMEOUT,
    JobState.CANCELLED,
    JobState.LOST,
    JobState.RESUBMIT,
    JobState.PREEMPTED,
)

EXIT_RESUBMIT_HEAD = 66
EXIT_RESUBMIT_TAIL = 67


def sql_in(states: tuple[StrEnum, ...]) -> str:
    """Render a state set for an ``IN (...)`` clause (values are enum constants, never input)."""
    return "(" + ",".join(f"'{s.value}'" for s in states) + ")"
