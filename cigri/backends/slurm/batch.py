"""One cigri batch as one Slurm job array: what both dialects (sbatch, slurmrestd) send.

A batch of ``n`` jobs becomes the array ``0-(n-1)``; array task ``i`` runs ``specs[i]``, so its
remote id is ``<array id>_<i>``. The array is named ``cigri.<batch>.<digest>``, the digest
covering the keys and the script: re-sending the same batch finds the array it already
started (idempotent submit), and an array of another cigri that reuses the batch number is
never mistaken for it.

The job script is POSIX sh: a ``case`` on ``$SLURM_ARRAY_TASK_ID`` with one branch per job that
enters the job's directory, exports its environment and runs the argv, its output in
``cigri.<cluster>.<remote id>.stdout`` / ``.stderr`` there (named after the remote id, the only
thing :meth:`~cigri.backends.ClusterBackend.output_tail` is given, and the cluster, as clusters
sharing a file system number their jobs independently), noting its start and end in
``cigri.<cluster>.<remote id>.status``: its trace, which says how it ended once Slurm has
forgotten it (:mod:`cigri.backends._grouping`). Every word goes through :func:`shlex.quote`;
nothing is ever interpolated raw.

One array has one set of flags, so the jobs of a batch must share directory, walltime,
resources, memory, properties, project and best-effort flag (the runner's batches always do).
Anything Slurm cannot express is a :class:`~cigri.errors.SubmissionRefused` naming the cause.

A gang of N jobs is one array task of N tasks (``--ntasks=N``, each task's cores per task, its
memory per CPU): its members start in the background as job steps (``srun --exact``), so the
allocation of them all is granted at once or not at all. The gangs of a batch are alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cigri.backends import JobSpec
from cigri.backends import _arrays as arrays
from cigri.backends import _grouping as grouping
from cigri.errors import SubmissionRefused

REMOTE_ID = re.compile(r"[0-9]+_[0-9]+(\+[0-9]+)?\Z")  # an array task (+ position in its group)
# Slurm feature expressions (--constraint): names joined by & | , with [ ] ( ) and *count
_CONSTRAINT = re.compile(r"[A-Za-z0-9_.:+\-&|,\[\]()*]+\Z")


@dataclass(frozen=True)
class Shape:
    """What one array task asks for, in sbatch's terms."""

    nodes: int | None  # --nodes; None: Slurm picks
    tasks: int  # --ntasks (one per node when nodes is set: --ntasks-per-node=1)
    cpus_per_task: int
    exclusive: bool = False  # whole nodes, as OAR's bare nodes=N gives


@dataclass(frozen=True)
class Batch:
    name: str
    size: int
    directory: str
    minutes: int  # Slurm's time limits are whole minutes
    shape: Shape
    partition: str
    qos: str
    account: str
    constraint: str
    script: str
    memory_mb: int = 0  # --mem (per node); 0: the partition's default
    memory_per_cpu_mb: int = 0  # --mem-per-cpu, for a gang's tasks sharing nodes


def shape(resources: str) -> Shape:
    """Translate an OAR resource request (``core=4``, ``/nodes=2/core=4``...) for sbatch."""
    counts = arrays.levels(resources, "Slurm", "[/nodes=N][/cpu=N][/core=N]")
    nodes, cpus = counts.get(arrays.NODE), counts.get(arrays.CPU, 1) * counts.get(arrays.CORE, 1)
    if nodes is None:
        return Shape(None, 1, cpus)
    if len(counts) == 1:
        return Shape(nodes, nodes, 1, exclusive=True)
    return Shape(nodes, nodes, cpus)


def constraint(*properties: str) -> str:
    """The ``--constraint`` for the cluster's and the campaign's properties, ANDed."""
    parts = [p.strip() for p in properties if p.strip()]
    for part in parts:
        if not _CONSTRAINT.match(part):
            raise SubmissionRefused(f"properties {part!r}: not a Slurm feature expression (e.g. 'avx2&ib')")
    if len(parts) < 2:
        return "".join(parts)
    return "&".join(f"({p})" for p in parts)


def job_script(specs: list[JobSpec], step: tuple[str, ...] = (), walltime: int = 0) -> str:
    """The array's script (:func:`cigri.backends._arrays.script`), task ``i`` of array ``A``
    naming its files ``cigri.<cluster>.A_i``; ``walltime``: the limit Slurm enforces."""
    prefix: Callable[[int], str] = lambda i: f'"cigri.$SLURM_CLUSTER_NAME.${{SLURM_ARRAY_JOB_ID}}_{i}"'
    return arrays.script(specs, "SLURM_ARRAY_TASK_ID", prefix, walltime or specs[0].walltime_seconds, step=step)


def build(specs: list[JobSpec], options: Mapping[str, Any]) -> Batch:
    """The array for one batch on a cluster with these options (``partition``, ``project``...)."""
    if not specs:
        raise ValueError("empty batch")
    first = specs[0]
    arrays.alike(specs, ("batch", "directory", "walltime_seconds", "resources", "memory_mb", "properties", "project",
                         "best_effort", "group_walltime_seconds"), "Slurm")
    jobs, task = grouping.split(specs), shape(first.resources)
    memory, per_cpu, step = first.memory_mb, 0, ()
    if first.gang:
        if task.nodes is not None or not grouping.same_size(jobs):
            raise SubmissionRefused(f"batch {first.batch}: a Slurm array of gangs needs gangs of one size, "
                                    "each task asking for cores of one node")
        memory, per_cpu = 0, -(-first.memory_mb // task.cpus_per_task)
        task = Shape(None, len(jobs[0]), task.cpus_per_task)
        step = ("srun", "--exact", "--nodes=1", "--ntasks=1", f"--cpus-per-task={task.cpus_per_task}",
                *((f"--mem-per-cpu={per_cpu}M",) if per_cpu else ()))
    walltime = first.group_walltime_seconds if first.group else first.walltime_seconds
    minutes = max(1, -(-walltime // 60))
    script = job_script(specs, step, minutes * 60)
    partition = str(options.get("partition", ""))
    if first.best_effort:
        partition = str(options.get("best_effort_partition") or partition)
    return Batch(
        name=arrays.name(specs, script), size=len(jobs), directory=first.directory,
        minutes=minutes, shape=task,
        partition=partition, qos=str(options.get("best_effort_qos", "")) if first.best_effort else "",
        account=first.project or str(options.get("project", "")),
        constraint=constraint(str(options.get("properties", "")), first.properties), script=script,
        memory_mb=memory, memory_per_cpu_mb=per_cpu)


def array_task_ids(specs: list[JobSpec], array_id: str) -> dict[str, str]:
    """``{key: remote id}`` once the array has an id (``<array>_<i>+<n>`` for grouped jobs)."""
    jobs = grouping.split(specs)
    return grouping.ids(jobs, [f"{array_id}_{index}" for index in range(len(jobs))])
