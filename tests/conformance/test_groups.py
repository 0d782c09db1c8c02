"""Temporal grouping on every backend: the jobs of a group keep their own endings and outputs.

The local pool runs each job alone (it needs no grouping); Slurm (with SSH) and OAR run a group
as one remote job, whose members' ids are ``<group>+<n>``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cigri.backends import JobSpec, RemoteState

from backend_targets import GROUPING_NAMES, Target
from harness import REAL_CLUSTERS
from test_backends import ended, token, wait

pytestmark = REAL_CLUSTERS


def grouped(target: Target) -> bool:
    return target.name in GROUPING_NAMES


def member(key: str, group: str, directory: Path, *argv: str, walltime: int = 600) -> JobSpec:
    return JobSpec(key=key, batch=group, name=f"group-{key}", argv=argv, directory=str(directory),
                   walltime_seconds=walltime, resources="core=1", environment={"CIGRI_JOB_ID": key},
                   group=group, group_walltime_seconds=900)


def test_a_group_keeps_each_jobs_exit_status_and_output(cluster: Target) -> None:
    group, directory = token(), cluster.workdir("group")
    specs = [member(f"{group}{i}", group, directory, "/bin/sh", "-c",
                    'echo "out $CIGRI_JOB_ID $0"; echo "err $0" >&2; exit "$0"', str(i)) for i in range(3)]
    specs.append(member(f"{group}3", group, directory, "/bin/echo", "$(touch pwned)", "it's"))
    ids = cluster.submit(specs)
    if grouped(cluster):
        assert {remote_id.rpartition("+")[0] for remote_id in ids.values()} != {""}
        assert len({remote_id.rpartition("+")[0] for remote_id in ids.values()}) == 1
    jobs = wait(cluster, list(ids.values()), ended)
    assert [(jobs[ids[s.key]].state, jobs[ids[s.key]].exit_code) for s in specs] == \
        [(RemoteState.COMPLETED, i) for i in (0, 1, 2, 0)]
    assert all(jobs[remote_id].started_at for remote_id in ids.values())
    if cluster.reads_output:
        assert cluster.backend.output_tail(ids[specs[2].key], "stdout", 1) == f"out {specs[2].key} 2\n"
        assert cluster.backend.output_tail(ids[specs[1].key], "stderr", 1) == "err 1\n"
        assert cluster.backend.output_tail(ids[specs[3].key], "stdout", 1) == "$(touch pwned) it's\n"
    assert not (directory / "pwned").exists()
    assert cluster.submit(specs) == ids  # a re-sent group is adopted


@pytest.mark.parametrize("target", ["local", *GROUPING_NAMES], indirect=True)
def test_a_job_of_a_group_is_killed_at_its_own_walltime(cluster: Target) -> None:
    """The group goes on with its next job (Slurm alone would round a walltime up to a minute)."""
    group, directory = token(), cluster.workdir("group-walltime")
    specs = [member(f"{group}0", group, directory, "/bin/sleep", "60", walltime=3),
             member(f"{group}1", group, directory, "/bin/echo", "next", walltime=3)]
    ids = cluster.submit(specs)
    jobs = wait(cluster, list(ids.values()), ended)
    assert jobs[ids[specs[0].key]].state == RemoteState.TIMEOUT
    assert (jobs[ids[specs[1].key]].state, jobs[ids[specs[1].key]].exit_code) == (RemoteState.COMPLETED, 0)


@pytest.mark.parametrize("target", GROUPING_NAMES, indirect=True)
def test_cancelling_a_group_requeues_the_jobs_it_never_started(cluster: Target) -> None:
    group, directory = token(), cluster.workdir("group-cancel")
    specs = [member(f"{group}0", group, directory, "/bin/true"),
             member(f"{group}1", group, directory, "/bin/sleep", "300"),
             member(f"{group}2", group, directory, "/bin/touch", "never")]
    ids = cluster.submit(specs)
    wait(cluster, list(ids.values()), lambda j: j.remote_id != ids[specs[1].key] or j.started_at is not None)
    cluster.backend.cancel([ids[specs[1].key]])
    jobs = wait(cluster, list(ids.values()), ended, timeout=60)
    assert [jobs[ids[s.key]].state for s in specs] == \
        [RemoteState.COMPLETED, RemoteState.CANCELLED, RemoteState.PREEMPTED]
    assert not (directory / "never").exists()
