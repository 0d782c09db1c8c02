"""Temporal grouping: sizing (pure), the status file, and the group script run for real by sh."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from contextlib import suppress
from pathlib import Path

import pytest
from harness import wait_for

from cigri import grouping
from cigri.backends import JobSpec, RemoteJob, RemoteState
from cigri.backends import _grouping as groups
from cigri.backends.slurm.batch import array_task_ids, job_script


def test_target_follows_the_cluster_unless_the_campaign_says_otherwise() -> None:
    assert grouping.target_seconds({}, {"group_seconds": 300}) == 300
    assert grouping.target_seconds({}, {}) == 0
    assert grouping.target_seconds({"temporal_grouping": False}, {"group_seconds": 300}) == 0
    assert grouping.target_seconds({"temporal_grouping": True, "temporal_grouping_batch_duration": 120}, {}) == 120


@pytest.mark.parametrize("target, average, asked, jobs, free, expected", [
    (300, 1.0, False, 1000, 8, 50),      # capped at CiGri's maximum
    (300, 30.0, False, 1000, 8, 10),     # the target over the average
    (300, 1.0, False, 40, 8, 5),         # spread over the free slots
    (300, None, False, 1000, 8, 1),      # the cluster's default waits for durations
    (300, None, True, 1000, 8, 50),      # the campaign asked: CiGri's maximum
    (300, 600.0, False, 1000, 8, 1),     # tasks longer than the target run alone
    (0, 1.0, True, 1000, 8, 1),
])
def test_group_size(target: int, average: float | None, asked: bool, jobs: int, free: int, expected: int) -> None:
    assert grouping.group_size(target, average, asked, jobs, free) == expected


def test_group_walltime_leaves_room_for_one_full_walltime_past_the_target() -> None:
    assert grouping.group_walltime(3, 60, 900) == 180
    assert grouping.group_walltime(50, 3600, 900) == 4500


def test_status_file_and_member_states() -> None:
    status = groups.parse_status("0 start 10.5 60\n0 end 11.5 0\n1 start 11.6 60\n1 end 20 timeout\n"
                                 "2 start 20.1 60\n2 en")
    assert status[0] == groups.Member(10.5, 60, 11.5, "0")
    running = RemoteJob("7", RemoteState.RUNNING, node="n1")
    cancelled = RemoteJob("7", RemoteState.CANCELLED, finished_at=30.0)
    timeout = RemoteJob("7", RemoteState.TIMEOUT, finished_at=30.0)
    assert groups.member_job("7+0", running, status[0]).state == RemoteState.COMPLETED
    assert groups.member_job("7+1", running, status[1]).state == RemoteState.TIMEOUT
    assert (groups.member_job("7+2", running, status[2]).state, groups.member_job("7+2", running, status[2]).started_at) \
        == (RemoteState.RUNNING, 20.1)
    assert groups.member_job("7+3", running, None).state == RemoteState.RUNNING
    assert groups.member_job("7+2", cancelled, status[2]).state == RemoteState.CANCELLED
    assert groups.member_job("7+2", timeout, status[2]).state == RemoteState.PREEMPTED  # the group's walltime
    assert groups.member_job("7+3", cancelled, None).state == RemoteState.PREEMPTED
    assert groups.member_job("7+3", RemoteJob("7", RemoteState.QUEUED), None).state == RemoteState.QUEUED


def spec(key: str, *argv: str, walltime: int = 60) -> JobSpec:
    return JobSpec(key=key, batch="b", name=key, argv=argv, directory="/nonexistent", walltime_seconds=walltime,
                   resources="core=1", environment={"CIGRI_JOB_ID": key}, group="g", group_walltime_seconds=300)


def run_script(tmp_path: Path, specs: list[JobSpec]) -> subprocess.Popen[bytes]:
    """The Slurm array's script, run as slurmd would run array task 0 of array 9."""
    script = job_script([s.__class__(**{**s.__dict__, "directory": str(tmp_path)}) for s in specs])
    (tmp_path / "job.sh").write_text(script)
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_JOB_ID": "9", "SLURM_CLUSTER_NAME": "c"}
    return subprocess.Popen(["sh", str(tmp_path / "job.sh")], env=env, start_new_session=True)


def first_started(tmp_path: Path) -> Path:
    """The status file of the script's group, once it says its first job has started (the shell
    creates the file before it writes the line)."""
    status_file = tmp_path / "cigri.c.9_0.status"
    wait_for(lambda: status_file.exists() and 0 in groups.parse_status(status_file.read_text()), 10,
             "the group's first job to start")
    return status_file


def test_the_group_script_runs_each_job_with_its_own_environment_output_and_status(tmp_path: Path) -> None:
    specs = [spec("1", "/bin/sh", "-c", 'echo "$CIGRI_JOB_ID $0"; exit 3', "a b"),
             spec("2", "/bin/echo", "$(touch pwned)", ";", "*"),
             spec("3", "/bin/sleep", "30", walltime=1)]
    assert run_script(tmp_path, specs).wait(timeout=20) == 0
    assert (tmp_path / "cigri.c.9_0+0.stdout").read_text() == "1 a b\n"
    assert (tmp_path / "cigri.c.9_0+1.stdout").read_text() == "$(touch pwned) ; *\n"
    assert not (tmp_path / "pwned").exists()
    status = groups.parse_status((tmp_path / "cigri.c.9_0.status").read_text())
    assert [status[n].status for n in range(3)] == ["3", "0", "timeout"]
    assert array_task_ids(specs, "9") == {"1": "9_0+0", "2": "9_0+1", "3": "9_0+2"}


def test_a_term_stops_the_group_before_its_next_job(tmp_path: Path) -> None:
    specs = [spec("1", "/bin/sleep", "30"), spec("2", "/bin/touch", "never")]
    process = run_script(tmp_path, specs)
    status_file = first_started(tmp_path)
    os.killpg(process.pid, signal.SIGTERM)  # what scancel and oardel do
    process.wait(timeout=10)
    assert not (tmp_path / "never").exists()
    assert set(groups.parse_status(status_file.read_text())) == {0}


def session_members(session: int) -> set[int]:
    """The processes of a session, from /proc (field 6 of a stat line, after the command's parenthesis)."""
    members = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # ended meanwhile
            continue
        if int(fields[3]) == session:
            members.add(int(stat.parent.name))
    return members


def test_a_term_reaching_the_script_last_still_starts_no_other_job(tmp_path: Path) -> None:
    """Slurm's proctrack/linuxproc signals a job's processes one kill(2) at a time, the deepest
    first: the script's shell may see its running job's subshell die before its own TERM comes."""
    specs = [spec("1", "/bin/sleep", "30"), spec("2", "/bin/touch", "never")]
    process = run_script(tmp_path, specs)
    status_file = first_started(tmp_path)
    # the script's shell, the job's subshell, timeout (its own subshell exec'd) and sleep
    wait_for(lambda: len(session_members(process.pid)) == 4, 10, "the job's program to start")
    for pid in sorted(session_members(process.pid) - {process.pid}, reverse=True):  # the youngest first
        with suppress(ProcessLookupError):  # gone already when its child's TERM ended it, as linuxproc skips it
            os.kill(pid, signal.SIGTERM)
    time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) != 0
    assert not (tmp_path / "never").exists()
    assert set(groups.parse_status(status_file.read_text())) == {0}


def test_a_term_reaching_the_script_after_its_spec_ended_still_starts_no_other_job(tmp_path: Path) -> None:
    """The same, when the spec's subshell saw its program die, wrote its end and returned before
    the kills reached it (CI: the group then ran its next job): the spec's status, above 128,
    holds the group until the script's own TERM comes."""
    specs = [spec("1", "/bin/sleep", "30"), spec("2", "/bin/touch", "never")]
    process = run_script(tmp_path, specs)
    status_file = first_started(tmp_path)
    wait_for(lambda: len(session_members(process.pid)) == 4, 10, "the job's program to start")
    youngest = max(session_members(process.pid))  # sleep: timeout then ends, and the spec's subshell with it
    os.kill(youngest, signal.SIGTERM)
    wait_for(lambda: 0 in groups.parse_status(status_file.read_text())
             and groups.parse_status(status_file.read_text())[0].status is not None, 10, "the spec's end")
    time.sleep(0.3)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) != 0
    assert not (tmp_path / "never").exists()


def test_a_spec_whose_program_dies_of_a_signal_by_itself_costs_the_group_a_second(tmp_path: Path) -> None:
    """A segfault is the program's own: nothing kills the job, so after a second the group goes on."""
    specs = [spec("1", "/bin/sh", "-c", "kill -SEGV $$"), spec("2", "/bin/touch", "ran")]
    started = time.monotonic()
    assert run_script(tmp_path, specs).wait(timeout=20) == 0
    assert 1 <= time.monotonic() - started < 10
    assert (tmp_path / "ran").exists()
    status = groups.parse_status((tmp_path / "cigri.c.9_0.status").read_text())
    assert [status[0].status, status[1].status] == ["139", "0"]
