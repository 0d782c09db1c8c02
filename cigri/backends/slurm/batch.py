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

import hashlib
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cigri.backends import JobSpec
from cigri.backends import _grouping as grouping
from cigri.errors import SubmissionRefused

REMOTE_ID = re.compile(r"[0-9]+_[0-9]+(\+[0-9]+)?\Z")  # an array task (+ position in its group)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_COUNT = re.compile(r"[0-9]+\Z")
# Slurm feature expressions (--constraint): names joined by & | , with [ ] ( ) and *count
_CONSTRAINT = re.compile(r"[A-Za-z0-9_.:+\-&|,\[\]()*]+\Z")
# OAR's resource hierarchy, outermost first; cpu, core and resource_id all count Slurm CPUs
_LEVELS = {"nodes": 0, "host": 0, "network_address": 0, "cpu": 1, "core": 2, "resource_id": 2}


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
    text = resources.strip()
    if not text:
        return Shape(None, 1, 1)
    counts: dict[int, int] = {}
    for part in text.removeprefix("/").split("/"):
        name, _, value = part.partition("=")
        level = _LEVELS.get(name.strip())
        if level is None or not _COUNT.match(value.strip()) or int(value) < 1 or \
                (counts and level <= max(counts)):
            raise SubmissionRefused(
                f"resources {resources!r}: Slurm cannot run {part!r}; expected [/nodes=N][/cpu=N][/core=N] "
                "(core, cpu and resource_id count CPUs; no properties, walltime or '+' in resources)")
        counts[level] = int(value)
    nodes, cpus = counts.get(0), counts.get(1, 1) * counts.get(2, 1)
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


def _check(spec: JobSpec) -> None:
    if not spec.argv or spec.argv[0].startswith("-"):
        raise SubmissionRefused(f"job {spec.key}: the program must be named and not start with '-'")
    for word in (*spec.argv, spec.directory, *spec.environment.values()):
        if "\0" in word:
            raise SubmissionRefused(f"job {spec.key}: NUL bytes cannot be passed to a program")
    bad = [name for name in spec.environment if not _ENV_NAME.match(name)]
    if bad:
        raise SubmissionRefused(f"job {spec.key}: invalid environment variable name {bad[0]!r}")


def job_script(specs: list[JobSpec], step: tuple[str, ...] = (), walltime: int = 0) -> str:
    """The array's script: one ``case`` branch per array task (a job leaving its trace, or a group
    of jobs run one after another, or a gang's members each launched by ``step``, see
    :mod:`cigri.backends._grouping`), every word quoted; ``walltime`` is the limit Slurm enforces."""
    for spec in specs:
        _check(spec)
    lines = ["#!/bin/sh", "# generated by cigri: array task i runs the i-th job (or group of jobs) of the batch",
             grouping.SAVE_UMASK, grouping.FUNCTION.rstrip("\n"), 'case "$SLURM_ARRAY_TASK_ID" in']
    for index, members in enumerate(grouping.split(specs)):
        spec = members[0]
        prefix = f'"cigri.$SLURM_CLUSTER_NAME.${{SLURM_ARRAY_JOB_ID}}_{index}"'
        lines += [f"{index})", f"  cd {shlex.quote(spec.directory)} || exit 1"]
        if spec.group:
            lines += grouping.branch(members, prefix, shlex.quote, step)
        else:
            lines += grouping.alone(spec, prefix, shlex.quote, walltime or spec.walltime_seconds)
        lines.append("  ;;")
    lines += ['*) echo "cigri: no job for array task $SLURM_ARRAY_TASK_ID" >&2; exit 1 ;;', "esac", ""]
    return "\n".join(lines)


def build(specs: list[JobSpec], options: Mapping[str, Any]) -> Batch:
    """The array for one batch on a cluster with these options (``partition``, ``project``...)."""
    if not specs:
        raise ValueError("empty batch")
    first = specs[0]
    for field in ("batch", "directory", "walltime_seconds", "resources", "memory_mb", "properties", "project",
                  "best_effort", "group_walltime_seconds"):
        if any(getattr(spec, field) != getattr(first, field) for spec in specs):
            raise SubmissionRefused(f"batch {first.batch}: one Slurm array needs one {field} for all its jobs")
    if any(spec.group for spec in specs) and not all(spec.group for spec in specs):
        raise SubmissionRefused(f"batch {first.batch}: one Slurm array cannot mix grouped and lone jobs")
    if any(spec.job_types for spec in specs):  # gridsub refuses them for a cluster that was Slurm then
        raise SubmissionRefused(f"cluster_job_type {list(first.job_types)}: OAR job types, Slurm has none")
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
    digest = hashlib.sha256("\0".join([*(s.key for s in specs), script]).encode()).hexdigest()[:12]
    partition = str(options.get("partition", ""))
    if first.best_effort:
        partition = str(options.get("best_effort_partition") or partition)
    return Batch(
        name=f"cigri.{first.batch}.{digest}", size=len(jobs), directory=first.directory,
        minutes=minutes, shape=task,
        partition=partition, qos=str(options.get("best_effort_qos", "")) if first.best_effort else "",
        account=first.project or str(options.get("project", "")),
        constraint=constraint(str(options.get("properties", "")), first.properties), script=script,
        memory_mb=memory, memory_per_cpu_mb=per_cpu)


def array_task_ids(specs: list[JobSpec], array_id: str) -> dict[str, str]:
    """``{key: remote id}`` once the array has an id (``<array>_<i>+<n>`` for grouped jobs)."""
    jobs = grouping.split(specs)
    return grouping.ids(jobs, [f"{array_id}_{index}" for index in range(len(jobs))])
