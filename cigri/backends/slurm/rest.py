"""The slurmrestd dialect (OpenAPI v0.0.38, Slurm 22.05): payloads in, JSON answers out.

Pure, like :mod:`~cigri.backends.slurm.commands`. Quirks it absorbs: ``environment`` is
mandatory at submit; ``exit_code`` is a raw wait status (768 is exit 3); a pending array is
one record whose ``array_task_string`` (``8-11``) stands for the tasks not yet started, and
for none once they are all cancelled (an empty string, the record ``CANCELLED``);
``GET jobs`` lists every user's jobs, filtered here by cigri's name prefix (a poll reads the jobs
of every cigri user at once).
slurmrestd cannot read files: output tails need SSH (see :class:`~cigri.backends.slurm.SlurmBackend`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cigri.backends import Capacity, RemoteJob, RemoteState, node_size
from cigri.backends.slurm.batch import Batch
from cigri.backends.slurm.states import never_starts, translate
from cigri.errors import ClusterBadAnswer, SubmissionRefused, SubmitLimitReached

API = "/slurm/v0.0.38"
JOBS = f"{API}/jobs"
SUBMIT = f"{API}/job/submit"
NODES = f"{API}/nodes"
JOB_PREFIX = "cigri."
# ESLURM_ACCOUNTING_POLICY: a submit limit reached, or a job over a size or time limit; unlike
# sbatch, slurmrestd 22.05 does not say which (HTTP 500, "Job violates accounting/QOS policy")
ACCOUNTING_POLICY = 2050
# the job starts with this environment only, and the account's HOME, USER and LOGNAME (sbatch
# would pass the login's): the script exports each job's own variables
ENVIRONMENT = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
_USABLE = {"idle", "mixed", "allocated", "completing"}
_UNUSABLE_FLAGS = {"DRAIN", "DRAINING", "DRAINED", "NOT_RESPONDING", "MAINTENANCE", "POWERED_DOWN",
                   "POWERING_DOWN", "REBOOT_REQUESTED"}


def headers(user: str, token: str) -> dict[str, str]:
    return {"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": token}


def submit_payload(batch: Batch, user: str, home: str) -> dict[str, Any]:
    shape = batch.shape
    job: dict[str, Any] = {
        "name": batch.name, "array": f"0-{batch.size - 1}", "current_working_directory": batch.directory,
        "standard_output": "/dev/null", "standard_error": "/dev/null",
        "environment": {**ENVIRONMENT, "HOME": home, "USER": user, "LOGNAME": user},
        "time_limit": batch.minutes, "tasks": shape.tasks, "cpus_per_task": shape.cpus_per_task,
    }
    if shape.nodes is not None:
        job.update(nodes=[shape.nodes, shape.nodes], tasks_per_node=1)
    if shape.exclusive:
        job["exclusive"] = "true"
    if batch.memory_mb:
        job["memory_per_node"] = batch.memory_mb
    if batch.memory_per_cpu_mb:
        job["memory_per_cpu"] = batch.memory_per_cpu_mb
    for key, value in (("partition", batch.partition), ("qos", batch.qos), ("account", batch.account),
                       ("constraints", batch.constraint)):
        if value:
            job[key] = value
    return {"script": batch.script, "job": job}


def _jobs(answer: Any) -> list[dict[str, Any]]:
    if not isinstance(answer, dict) or not isinstance(answer.get("jobs"), list):
        raise ClusterBadAnswer(f"slurmrestd: no job list in {str(answer)[:200]!r}")
    return answer["jobs"]


def array_id(job: dict[str, Any]) -> str:
    return str(job.get("array_job_id") or job["job_id"])


def find_array(answer: Any, name: str, user: str) -> dict[str, Any] | None:
    """A record of the user's array of that name in a ``GET jobs`` answer (an earlier submission)."""
    for job in _jobs(answer):
        if job.get("name") == name and job.get("user_name") == user:
            return job
    return None


def parse_job(answer: Any) -> dict[str, Any]:
    """The first record of a ``GET job/{id}`` answer (an array lists one per task or pending range)."""
    jobs = _jobs(answer)
    if not jobs:
        raise ClusterBadAnswer(f"slurmrestd: no such job: {str(answer.get('errors'))[:200]}")
    return jobs[0]


def never_start_reason(job: dict[str, Any]) -> str | None:
    """The pending reason of a job slurmctld accepted but will never start (see
    :data:`~cigri.backends.slurm.states.NEVER_STARTS`), else None."""
    reason = str(job.get("state_reason") or "")
    return reason if never_starts(reason) else None


def parse_submit(answer: Any) -> str:
    errors = answer.get("errors") if isinstance(answer, dict) else None
    if errors:
        words = "slurmrestd refused the array: " + "; ".join(str(e.get("description") or e.get("error"))
                                                             for e in errors)
        if any(e.get("error_code") == ACCOUNTING_POLICY for e in errors):
            raise SubmitLimitReached(words, maybe_job=True)
        raise SubmissionRefused(words)
    if not isinstance(answer, dict) or not isinstance(answer.get("job_id"), int):
        raise ClusterBadAnswer(f"slurmrestd: no job id in {str(answer)[:200]!r}")
    return str(answer["job_id"])


def _indexes(text: str) -> Iterator[int]:
    """Expand an ``array_task_string``: ``8-11``, ``0,2-5``, ``1-9:2``, ``0-99%8``, or ``""``."""
    for part in filter(None, text.split("%", 1)[0].split(",")):
        bounds, _, step = part.partition(":")
        first, _, last = bounds.partition("-")
        yield from range(int(first), int(last or first) + 1, int(step or 1))


def _time(value: Any) -> float | None:
    return float(value) if isinstance(value, int) and value > 0 else None


def _remote_job(remote_id: str, job: dict[str, Any]) -> RemoteJob:
    remote, code = translate(str(job.get("job_state", "")), job.get("exit_code"))
    ended = remote not in (RemoteState.QUEUED, RemoteState.RUNNING)
    return RemoteJob(remote_id, remote, code, job.get("nodes") or None,
                     None if remote == RemoteState.QUEUED else _time(job.get("start_time")),
                     _time(job.get("end_time")) if ended else None)


def parse_jobs(answer: Any, remote_ids: list[str]) -> dict[str, RemoteJob]:
    """Every wanted id from one ``GET jobs`` answer; ids it does not list are UNKNOWN."""
    wanted = set(remote_ids)
    found: dict[str, RemoteJob] = {}
    for job in _jobs(answer):
        if not str(job.get("name", "")).startswith(JOB_PREFIX):
            continue
        array = array_id(job)
        if job.get("array_task_id") is not None:
            indexes: Iterator[int] = iter([int(job["array_task_id"])])
        elif job.get("array_job_id"):  # the array's tasks not started, if any
            indexes = _indexes(str(job.get("array_task_string") or ""))
        else:
            indexes = iter([0])
        for index in indexes:
            remote_id = f"{array}_{index}"
            if remote_id in wanted:
                found[remote_id] = _remote_job(remote_id, job)
    return {i: found.get(i, RemoteJob(i, RemoteState.UNKNOWN)) for i in remote_ids}


# DELETE of an unknown or ended job: 200 or 500 with "Invalid job id specified" in ``errors``;
# like scancel's exit status, not worth reading: the next poll tells what happened
CANCEL_ANSWERS = (200, 500)


def job_path(remote_id: str) -> str:
    """``GET`` reads the job (an array: every task), ``DELETE`` cancels it."""
    return f"{API}/job/{remote_id}"


def parse_nodes(answer: Any, partition: str) -> Capacity:
    """CPUs of the partition's usable nodes (any partition when none is configured), the
    memory no job holds on them (MiB), and their size when they are all alike."""
    if not isinstance(answer, dict) or not isinstance(answer.get("nodes"), list):
        raise ClusterBadAnswer(f"slurmrestd: no node list in {str(answer)[:200]!r}")
    total = free = held_memory = 0
    free_memory: int | None = 0
    sizes = []
    for node in answer["nodes"]:
        if partition and partition not in (node.get("partitions") or []):
            continue
        if node.get("state") not in _USABLE or _UNUSABLE_FLAGS & set(node.get("state_flags") or []):
            continue
        total += int(node.get("cpus") or 0)
        free += int(node.get("idle_cpus") or 0)
        memory, held = node.get("real_memory"), int(node.get("alloc_memory") or 0)
        sizes.append((int(node.get("cpus") or 0), memory))
        held_memory += held
        if free_memory is not None and isinstance(memory, int):
            free_memory += max(0, memory - held)
        else:
            free_memory = None  # a node that does not say: memory is not counted here
    node_cores, node_memory = node_size(sizes)
    return Capacity(total, free, free_memory_mb=free_memory, node_cores=node_cores, node_memory_mb=node_memory,
                    allocated_memory_mb=held_memory)
