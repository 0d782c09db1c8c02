"""The batch backends' base without a cluster: how a poll combines what the cluster says with the
jobs' status files and traces, the traces of jobs a cluster forgot, whom a read acts as, and the
shell that reads files through the front-end's index, run for real by sh."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cigri.backends import Capacity, JobSpec, RemoteJob, RemoteState
from cigri.backends import _grouping as grouping
from cigri.backends._batch import Acting, BatchBackend, Polled
from cigri.backends._commands import FILES, Commands, parse_read
from cigri.backends._ssh import CommandResult
from cigri.backends.slurm import REMOTE_ID, commands
from cigri.errors import SubmissionRefused

ENDED = "0 start 100.5 60\n0 end 110.5 3\n"
GROUP = "0 start 100 60\n0 end 101 0\n1 start 101 60\n1 end 102 2\n2 start 102 60\n"


@dataclass
class Via:
    """A cluster that knows ``jobs`` and whose files are ``texts`` (status files and traces alike)."""

    jobs: dict[str, RemoteJob] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    reads_files: str = ""
    calls: list[str] = field(default_factory=list)
    submitted: list[list[JobSpec]] = field(default_factory=list)

    def groups(self, directory: str) -> str:
        return self.reads_files

    def submit(self, specs: list[JobSpec], acting: Acting) -> list[str]:
        self.submitted.append(specs)
        return [f"9_{i}" for i in range(len(grouping.split(specs)))]

    def poll(self, job_ids: list[str]) -> Polled:
        self.calls.append("poll")
        return Polled({i: self.jobs[i] for i in job_ids if i in self.jobs})

    def statuses(self, group_ids: list[str], polled: Polled) -> dict[str, str]:
        self.calls.append("statuses")
        return {g: self.texts[g] for g in group_ids if g in self.texts}

    def traces(self, job_ids: list[str]) -> dict[str, str]:
        self.calls.append("traces")
        return {j: self.texts.get(j, "") for j in job_ids}

    def cancel(self, job_ids: list[str], acting: Acting) -> None: ...

    def capacity(self) -> Capacity:
        return Capacity(1, 1)

    def output_tail(self, remote_id: str, stream: str, lines: int, acting: Acting) -> str:
        return ""

    def close(self) -> None: ...


def backend(via: Via) -> BatchBackend:
    return BatchBackend("c", {"user": "cigri"}, via, REMOTE_ID)


def test_a_job_the_cluster_forgot_is_read_from_its_trace() -> None:
    via = Via({"1_0": RemoteJob("1_0", RemoteState.RUNNING)}, {"2_0": ENDED, "3_0": GROUP, "4_0": ""})
    jobs = backend(via).poll(["1_0", "2_0", "3_0+0", "3_0+1", "3_0+2", "3_0+3", "4_0", "nonsense"])
    assert {i: (j.state, j.exit_code) for i, j in jobs.items()} == {
        "1_0": (RemoteState.RUNNING, None), "2_0": (RemoteState.COMPLETED, 3),
        "3_0+0": (RemoteState.COMPLETED, 0), "3_0+1": (RemoteState.COMPLETED, 2),
        "3_0+2": (RemoteState.UNKNOWN, None),  # the job died under it without a word: lost
        "3_0+3": (RemoteState.PREEMPTED, None),  # never started: back to the bag, nothing counted
        "4_0": (RemoteState.UNKNOWN, None), "nonsense": (RemoteState.UNKNOWN, None)}
    assert (jobs["2_0"].started_at, jobs["2_0"].finished_at) == (100.5, 110.5)
    assert via.calls == ["poll", "traces"]  # one read of every forgotten job's trace


def test_a_poll_reads_the_status_files_of_started_groups_only_when_the_cluster_knows_them() -> None:
    via = Via({"1_0": RemoteJob("1_0", RemoteState.RUNNING), "1_1": RemoteJob("1_1", RemoteState.QUEUED)},
              {"1_0": GROUP})
    jobs = backend(via).poll(["1_0+1", "1_0+2", "1_1+0"])
    assert [jobs[i].state for i in ("1_0+1", "1_0+2", "1_1+0")] == \
        [RemoteState.COMPLETED, RemoteState.RUNNING, RemoteState.QUEUED]
    assert via.calls == ["poll", "statuses"]
    via.calls.clear()
    backend(via).poll(["nonsense"])
    assert via.calls == []  # no valid id: no call at all


def spec(key: str, **fields: object) -> JobSpec:
    values: dict[str, object] = dict(batch="b", name=key, argv=("/bin/true",), directory="/d", walltime_seconds=60,
                                     resources="core=1")
    values.update(fields)
    return JobSpec(key=key, **values)  # type: ignore[arg-type]


def test_a_via_that_reads_no_file_runs_each_job_alone_and_refuses_a_gang() -> None:
    via = Via(reads_files="it reads no file")
    grouped = [spec(str(n), group="g", group_walltime_seconds=120) for n in range(2)]
    assert backend(via).submit(grouped) == {"0": "9_0", "1": "9_1"}
    assert [s.group for s in via.submitted[-1]] == ["", ""]
    with pytest.raises(SubmissionRefused, match="c: a gang's members report through status files, but it reads"):
        backend(via).submit([spec(str(n), group="g", gang=True) for n in range(2)])
    assert backend(Via()).submit(grouped) == {"0": "9_0+0", "1": "9_0+1"}


@pytest.mark.parametrize("text, expected", [
    ("", (RemoteState.UNKNOWN, None, None)),
    ("0 start 100 60\n", (RemoteState.UNKNOWN, None, None)),  # killed without a word
    (ENDED, (RemoteState.COMPLETED, 3, 110.5)),
    ("0 start 100 60\nkill 130 TERM\n", (RemoteState.CANCELLED, None, 130.0)),
    ("0 start 100 60\nkill 161 TERM\n0 end 162 143\n", (RemoteState.TIMEOUT, None, 161.0)),  # at its walltime
])
def test_a_lone_jobs_trace(text: str, expected: tuple[RemoteState, int | None, float | None]) -> None:
    job = grouping.forgotten("5_0", text)
    assert (job.state, job.exit_code, job.finished_at) == expected


def test_a_groups_trace_once_it_was_cancelled() -> None:
    text = "0 start 100 60\n0 end 101 0\n1 start 101 60\nkill 105 TERM\n"
    assert [grouping.forgotten(f"5_0+{n}", text).state for n in range(3)] == \
        [RemoteState.COMPLETED, RemoteState.CANCELLED, RemoteState.PREEMPTED]


@dataclass
class SSH:
    """Records the commands a via sends; answers ``stdout``."""

    stdout: str = ""
    cluster: str = "c"
    sent: list[list[str]] = field(default_factory=list)

    def run(self, argv: list[str], stdin: str | None = None, timeout: float | None = None) -> CommandResult:
        self.sent.append(argv)
        return CommandResult(0, self.stdout, "")

    def close(self) -> None: ...


def test_an_output_tail_is_read_as_whoever_asks_never_as_the_owner_the_index_keeps() -> None:
    """The index says whose a job is, so that cigri reads its trace; a user asking for another's
    output reads it as themselves, and the cluster refuses."""
    ssh = SSH("#7_0\nhello\n")
    via = Commands("c", {"user": "cigri"}, ssh, commands)  # type: ignore[arg-type]
    assert via.output_tail("7_0", "stdout", 5, Acting("bob", "bob")) == "hello\n"
    files = ssh.sent[-1]
    assert files[2] == FILES and files[4:] == [via.index, "5", "7_0", "bob", "7", "_0.stdout"]
    via.output_tail("7_0+1", "stderr", 5, Acting("", "cigri"))
    assert ssh.sent[-1][4:] == [via.index, "5", "7_0", "", "7", "_0+1.stderr"]  # the account reads as itself
    via.traces(["7_0"])
    assert ssh.sent[-1][4:] == [via.index, "+1", "7_0", "-", "7", "_0.status"]  # cigri's own read: as the owner


def files(home: Path, *words: str, lines: str = "+1") -> str:
    result = subprocess.run(["sh", "-c", FILES, "sh", "index", lines, *words], capture_output=True, text=True,
                            env={"HOME": str(home), "PATH": "/usr/bin:/bin"}, timeout=10)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_files_script_reads_through_the_index(tmp_path: Path) -> None:
    directory = tmp_path / "dir 'x' $(y)"
    directory.mkdir()
    (directory / "cigri.c.7_0.status").write_text("0 start 1 60\n")
    (directory / "cigri.c.7_0.stdout").write_text("a\nb\nc\n")
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "7").write_text(f"\n{directory}/cigri.c.7")
    read = parse_read(files(tmp_path, "7_0", "-", "7", "_0.status", "8_0", "-", "8", "_0.status",
                            "7_1", "-", "7", "_1.status"))
    assert read == {"7_0": "0 start 1 60", "8_0": "", "7_1": ""}  # no entry, no file: nothing
    assert files(tmp_path, "t", "", "7", "_0.stdout", lines="2") == "#t\nb\nc\n"
    assert files(tmp_path, "t", "", "", str(directory / "cigri.c.7_0.stdout"), lines="1") == "#t\nc\n"
