"""One cigri batch as one Grid Engine array job (``qsub -t 1-N``): its flags and its script.

Task ``i`` (from 1) runs the i-th job or group of jobs of the batch, so its remote id is
``<job id>.<i>``, Grid Engine's own way to write a task. The array is named
``cigri.<batch>.<digest>``, the digest covering the keys and the script: a re-sent batch finds the
array it already submitted (idempotent submit), and another cigri's reusing the batch number is
never mistaken for it.

The script is Slurm's (:mod:`cigri.backends._arrays`, ``-S /bin/sh``), on ``$SGE_TASK_ID``: each
task's output goes to ``cigri.<cell>.<job id>.<i>.stdout`` / ``.stderr`` in the job's directory
(named after the cell, as cells sharing a file system number their jobs independently) and its
trace to ``….status`` (:mod:`cigri.backends._grouping`). Each task is
submitted with ``-notify`` (SIGUSR2 before a kill, turned into a SIGTERM by the script: the
task's grace is the queue's ``notify`` time), ``-r n`` (never run again by Grid Engine itself:
a lost task is cigri's to run again) and ``-w e`` (a request no queue can ever meet is refused
at submission rather than left pending).

One array has one set of flags, so the jobs of a batch share directory, walltime (``h_rt``),
slots (a parallel environment's, from ``resources``), memory (the site's ``memory_complex``, per
slot), properties (``-l`` requests and ``-q`` queues, :mod:`.requests`), project (``-P``) and
best-effort flag (``best_effort_queue``). Anything Grid Engine cannot express is a
:class:`~cigri.errors.SubmissionRefused` naming the cause.

A gang of N jobs is one task of N times a job's slots in the parallel environment, its members
started in the background: Grid Engine grants the task whole or not at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cigri.backends import JobSpec
from cigri.backends import _arrays as arrays
from cigri.backends import _grouping as grouping
from cigri.backends.gridengine import requests
from cigri.errors import SubmissionRefused, shown

NOTIFY = "USR2"  # what qsub -notify sends the task's process group before a kill
DEFAULT_MEMORY_COMPLEX = "h_vmem"
_PROJECT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")


@dataclass(frozen=True)
class Batch:
    name: str
    size: int
    directory: str
    flags: tuple[str, ...]  # qsub's, but -t, -N and the script
    script: str


def job_script(specs: list[JobSpec], walltime: int) -> str:
    """The array's script (:func:`cigri.backends._arrays.script`), task ``i`` of job ``J`` naming its
    files ``cigri.<cell>.J.i``, warned with SIGUSR2 before a kill; a gang's members start in the
    task's own slots."""
    prefix: Callable[[int], str] = lambda i: f'"cigri.${{SGE_CELL:-default}}.$JOB_ID.{i}"'
    return arrays.script(specs, "SGE_TASK_ID", prefix, walltime, first=1, notify=NOTIFY)


def build(specs: list[JobSpec], options: Mapping[str, Any]) -> Batch:
    """The array for one batch on a cluster with these options (``queue``, ``parallel_environment``...)."""
    if not specs:
        raise ValueError("empty batch")
    first = specs[0]
    arrays.alike(specs, ("batch", "directory", "walltime_seconds", "resources", "memory_mb", "properties", "project",
                         "best_effort", "group_walltime_seconds", "gang"), "Grid Engine")
    jobs = grouping.split(specs)
    per_job = slots = requests.slots(first.resources)
    if first.gang:
        if not grouping.same_size(jobs):
            raise SubmissionRefused(f"batch {first.batch}: a Grid Engine array of gangs needs gangs of one size")
        slots = per_job * len(jobs[0])
    walltime = max(1, first.group_walltime_seconds if first.group else first.walltime_seconds)
    script = job_script(specs, walltime)
    return Batch(arrays.name(specs, script), len(jobs), first.directory,
                 flags(first, options, slots, per_job, walltime), script)


def flags(spec: JobSpec, options: Mapping[str, Any], slots: int, per_job: int, walltime: int) -> tuple[str, ...]:
    """qsub's flags for a task of ``slots`` slots (``per_job`` each of its jobs), from the
    cluster's options and the spec."""
    try:
        asked = requests.parse(str(options.get("properties", ""))) + requests.parse(spec.properties)
    except ValueError as error:
        raise SubmissionRefused(f"properties {shown(spec.properties)}: {error}") from None
    resources = [f"h_rt={walltime}"]
    if spec.memory_mb:
        per_slot = -(-spec.memory_mb // per_job)
        resources.append(f"{options.get('memory_complex') or DEFAULT_MEMORY_COMPLEX}={per_slot}M")
    result = ["-wd", spec.directory, "-o", "/dev/null", "-e", "/dev/null", "-S", "/bin/sh", "-notify", "-r", "n",
              "-w", "e", "-l", ",".join([*resources, *asked.resources])]
    if slots > 1:
        environment = str(options.get("parallel_environment", ""))
        if not environment:
            raise SubmissionRefused(f"resources {shown(spec.resources)}: {slots} slots a task need the cluster's "
                                    "parallel_environment")
        result += ["-pe", environment, str(slots)]
    if spec.best_effort:  # the site's killable queue, whatever the campaign asked
        queues = [str(options.get("best_effort_queue", ""))]
    else:
        queues = list(asked.queues) or [str(options.get("queue", ""))]
    if any(queues):
        result += ["-q", ",".join(queues)]
    project = spec.project or str(options.get("project", ""))
    if project:
        if not _PROJECT.match(project):
            raise SubmissionRefused(f"project {shown(project)}: not a Grid Engine project name")
        result += ["-P", project]
    return tuple(result)
