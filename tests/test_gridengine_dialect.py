"""The Grid Engine dialect without a cluster: the generated script run for real by sh (the
hostile words, the warning before a kill), qsub's flags, the requests a JDL may send, the state
table, and the parsers on outputs recorded from Son of Grid Engine 8.1.9."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from harness import wait_for

from cigri.backends import Capacity, JobSpec, RemoteJob, RemoteState
from cigri.backends import _grouping as grouping
from cigri.backends._batch import Acting
from cigri.backends._ssh import CommandResult
from cigri.backends.gridengine import REMOTE_ID, commands, requests
from cigri.backends.gridengine.batch import build
from cigri.backends.gridengine.states import Record, ended, qstat_state
from cigri.errors import BackendError, ClusterBadAnswer, SubmissionRefused, SubmitLimitReached

RECORDED = Path(__file__).parent / "recorded"
HOSTILE = ("; touch pwned", "$(touch pwned)", "`touch pwned`", "it's \"quoted\"", "two\nlines", "*", "-n", "",
           " spaced ", "\\", "$HOME", "a|b&c>d<e", "~", "#c", "é 日本")
OPTIONS = {"user": "gridtest", "queue": "all.q", "parallel_environment": "smp", "best_effort_queue": "besteffort.q"}


def spec(key: str = "1", *argv: str, directory: str = "/tmp", **fields: Any) -> JobSpec:
    values: dict[str, Any] = dict(batch="7", name=f"job-{key}", argv=argv or ("/bin/true",), directory=directory,
                                  walltime_seconds=600, resources="core=1")
    values.update(fields)
    return JobSpec(key=key, **values)


def recorded(name: str) -> str:
    return (RECORDED / name).read_text()


# --- the job script, run by sh as Grid Engine's execd would run task 1 of job 9 ---------------

def run_task(tmp_path: Path, specs: list[JobSpec], task: int = 1) -> subprocess.Popen[bytes]:
    built = build([dataclasses.replace(s, directory=str(tmp_path)) for s in specs], OPTIONS)
    (tmp_path / "job.sh").write_text(built.script)
    env = {**os.environ, "SGE_TASK_ID": str(task), "JOB_ID": "9", "SGE_CELL": "c"}
    return subprocess.Popen(["sh", str(tmp_path / "job.sh")], env=env, start_new_session=True)


def test_every_hostile_word_reaches_the_program_literally(tmp_path: Path) -> None:
    program = 'printf "%s\\0" "$@" > argv.bin; printf "%s" "$HOSTILE" > env.bin; exit 3'
    job = spec("1", "/bin/sh", "-c", program, "sh", *HOSTILE, environment={"HOSTILE": "$(touch pwned)'\"\n`x`"})
    assert run_task(tmp_path, [job]).wait(timeout=20) == 3
    assert (tmp_path / "argv.bin").read_bytes() == b"".join(w.encode() + b"\0" for w in HOSTILE)
    assert (tmp_path / "env.bin").read_text() == "$(touch pwned)'\"\n`x`"
    assert not list(tmp_path.glob("pwned*"))
    trace = grouping.parse_status((tmp_path / "cigri.c.9.1.status").read_text())
    assert (trace[0].walltime, trace[0].status) == (600, "3")  # the task's trace: its h_rt, then its end
    assert grouping.forgotten("9.1", (tmp_path / "cigri.c.9.1.status").read_text()).exit_code == 3


def test_a_program_named_like_an_option_is_refused() -> None:
    with pytest.raises(SubmissionRefused, match="must be named and not start with '-'"):
        build([spec("1", "-n")], OPTIONS)


def test_the_warning_before_a_kill_becomes_a_sigterm_with_time_to_clean_up(tmp_path: Path) -> None:
    """qdel of a task submitted with -notify sends SIGUSR2 to its whole process group, then SIGKILL
    the queue's notify time later: the program ignores the warning, gets a SIGTERM from the
    script, and cleans up; the script notes the kill in the task's trace."""
    script = ('trap \'sleep 1; echo done > cleaned; exit 143\' TERM; touch started; '
              'while :; do sleep 0.1; done')
    process = run_task(tmp_path, [spec("1", "/bin/sh", "-c", script)])
    wait_for(lambda: (tmp_path / "started").exists(), 10, "the program to start")
    os.killpg(process.pid, signal.SIGUSR2)
    assert process.wait(timeout=10) == 143
    assert (tmp_path / "cleaned").read_text() == "done\n"
    text = (tmp_path / "cigri.c.9.1.status").read_text()
    assert grouping.killed_at(text) is not None and text.count("kill") == 1
    assert grouping.forgotten("9.1", text).state == RemoteState.CANCELLED


def test_a_task_with_a_group_runs_its_jobs_in_turn(tmp_path: Path) -> None:
    group = [spec(str(n), "/bin/sh", "-c", f"echo {n}; exit {n}", group="g", group_walltime_seconds=60)
             for n in range(3)]
    assert run_task(tmp_path, group).wait(timeout=20) == 0
    text = (tmp_path / "cigri.c.9.1.status").read_text()
    assert [grouping.forgotten(f"9.1+{n}", text).exit_code for n in range(3)] == [0, 1, 2]
    assert (tmp_path / "cigri.c.9.1+2.stdout").read_text() == "2\n"


# --- qsub's flags -----------------------------------------------------------------------------

def test_qsub_flags() -> None:
    built = build([spec("1", memory_mb=4000, resources="core=4", properties="arch=lx-amd64,queue=fast.q"),
                   spec("2", memory_mb=4000, resources="core=4", properties="arch=lx-amd64,queue=fast.q")],
                  {**OPTIONS, "memory_complex": "mem_free", "project": "p1"})
    assert built.size == 2 and built.name.startswith("cigri.7.")
    assert list(built.flags) == ["-wd", "/tmp", "-o", "/dev/null", "-e", "/dev/null", "-S", "/bin/sh", "-notify",
                                 "-r", "n", "-w", "e", "-l", "h_rt=600,mem_free=1000M,arch=lx-amd64",
                                 "-pe", "smp", "4", "-q", "fast.q", "-P", "p1"]
    plain = build([spec()], OPTIONS)
    assert plain.flags[-4:] == ("-l", "h_rt=600", "-q", "all.q")  # one slot: no parallel environment
    best_effort = build([spec(best_effort=True, properties="queue=all.q")], OPTIONS)
    assert best_effort.flags[-2:] == ("-q", "besteffort.q")  # the site's killable queue, whatever was asked
    grouped = build([spec("1", group="g", group_walltime_seconds=900), spec("2", group="g", group_walltime_seconds=900)],
                    OPTIONS)
    assert grouped.size == 1 and "h_rt=900" in grouped.flags


@pytest.mark.parametrize("change, words", [
    ({"resources": "core=2"}, "parallel_environment"),
    ({"resources": "/nodes=2/core=1"}, "one node"),
    ({"properties": "h_rt=100"}, "walltime"),
    ({"properties": "arch=$(reboot)"}, "not Grid Engine requests"),
    ({"project": "a b"}, "project"),
    ({"job_types": ("idempotent",)}, "OAR job types"),
])
def test_what_grid_engine_cannot_carry_is_refused(change: dict[str, Any], words: str) -> None:
    with pytest.raises(SubmissionRefused, match=words):
        build([spec(**change)], {k: v for k, v in OPTIONS.items() if k != "parallel_environment"})


def test_a_batch_must_share_its_flags() -> None:
    with pytest.raises(SubmissionRefused, match="one walltime_seconds"):
        build([spec("1"), spec("2", walltime_seconds=60)], OPTIONS)


# --- the requests a JDL may send -------------------------------------------------------------

def test_requests_are_parsed_into_resources_and_queues() -> None:
    assert requests.parse("arch=lx-amd64, hostname=!(n1|n2)&n*,queue=all.q@node[0-9]*|long.q") == \
        requests.Requests(("arch=lx-amd64", "hostname=!(n1|n2)&n*"), ("all.q@node[0-9]*|long.q",))
    assert requests.parse("  ") == requests.Requests()


@pytest.mark.parametrize("text", ["arch", "=x", "1a=b", "a=", "a=b c", "a='b'", 'a="b"', "a=$b", "a=`b`", "a=b;c",
                                  "a=b\\c", "a=b\nc", "a=(b", "a=b)", "a=b,,c=d", "h_rt=60", "s_rt=60", "a=b=c",
                                  "a=" + "!" * 30 + "b", "a=b" * 1000])
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not Grid Engine requests"):
        requests.parse(text)


def test_slots_of_a_task() -> None:
    assert [requests.slots(r) for r in ("", "core=1", "core=4", "/nodes=1/core=4", "cpu=2/core=4")] == [1, 1, 4, 4, 8]
    for refused in ("nodes=2", "core=0", "core=x", "core=1/cpu=2", "core=1+core=2", "gpu=1"):
        with pytest.raises(SubmissionRefused):
            requests.slots(refused)


# --- states ------------------------------------------------------------------------------------

@pytest.mark.parametrize("code, state", [
    ("qw", RemoteState.QUEUED), ("hqw", RemoteState.QUEUED), ("hRwq", RemoteState.QUEUED),
    ("r", RemoteState.RUNNING), ("t", RemoteState.RUNNING), ("Rr", RemoteState.RUNNING), ("dr", RemoteState.RUNNING),
    ("s", RemoteState.RUNNING), ("S", RemoteState.RUNNING), ("T", RemoteState.RUNNING),
    ("Eqw", RemoteState.COMPLETED), ("Ehqw", RemoteState.COMPLETED),
])
def test_qstat_states(code: str, state: RemoteState) -> None:
    assert qstat_state(code) == state


def test_an_unknown_state_is_refused_loudly() -> None:
    with pytest.raises(ClusterBadAnswer, match="unknown Grid Engine job state"):
        qstat_state("X")


def record(**fields: Any) -> Record:
    values: dict[str, Any] = dict(queue="all.q", host="vm", failed=0, exit_status=0, started_at=100.0,
                                  finished_at=110.0, walltime=60)
    values.update(fields)
    return Record(**values)


@pytest.mark.parametrize("fields, trace, expected", [
    ({}, "0 start 100 60\n0 end 110 0", (RemoteState.COMPLETED, 0)),
    ({"exit_status": 3}, "", (RemoteState.COMPLETED, 3)),
    ({"failed": 37, "exit_status": 137}, "", (RemoteState.TIMEOUT, None)),  # h_rt
    ({"failed": 0, "exit_status": 143}, "0 start 100 60\nkill 105 USR2", (RemoteState.CANCELLED, None)),  # qdel
    ({"exit_status": 143}, "0 start 100 60\nkill 161 USR2", (RemoteState.TIMEOUT, None)),  # at h_rt, warned
    # at h_rt counted from before the record's start (a loaded execd), warned
    ({"exit_status": 143}, "0 start 101 60\nkill 157.5 USR2", (RemoteState.TIMEOUT, None)),
    ({"exit_status": 143}, "0 start 100 60\nkill 149 USR2", (RemoteState.CANCELLED, None)),  # qdel near the end
    ({"failed": 100, "exit_status": 137, "queue": "besteffort.q"}, "0 start 100 60", (RemoteState.PREEMPTED, None)),
    ({"failed": 100, "exit_status": 137}, "0 start 100 60", (RemoteState.CANCELLED, None)),  # a kill elsewhere
    ({"failed": 26, "exit_status": 0}, "", (RemoteState.COMPLETED, 1)),  # could not open its output: never a success
])
def test_an_ended_task_from_its_record_and_trace(fields: dict[str, Any], trace: str,
                                                 expected: tuple[RemoteState, int | None]) -> None:
    job = ended("9.1", record(**fields), trace, "besteffort.q")
    assert (job.state, job.exit_code) == expected


# --- parsers of recorded outputs ---------------------------------------------------------------

def test_parse_poll_on_recorded_output() -> None:
    """The POLL script after a task array (exit 0 and 3), a task over its h_rt=5, a task cancelled
    while it ran, a group (exit 0 then 2) and a held array; 999999.1 was never a job."""
    ids = ["2.1", "2.2", "3.1", "4.1", "5.1", "12.1", "999999.1"]
    polled = commands.parse_poll(recorded("gridengine-poll.txt"), ids, OPTIONS)
    assert {i: (j.state, j.exit_code) for i, j in polled.jobs.items()} == {
        "2.1": (RemoteState.COMPLETED, 0), "2.2": (RemoteState.COMPLETED, 3), "3.1": (RemoteState.TIMEOUT, None),
        "4.1": (RemoteState.CANCELLED, None), "5.1": (RemoteState.COMPLETED, 0), "12.1": (RemoteState.QUEUED, None)}
    assert polled.jobs["2.2"] == RemoteJob("2.2", RemoteState.COMPLETED, 3, "vm", 1795873028.0, 1795873028.0)
    assert set(polled.texts) == {"2.1", "2.2", "3.1", "4.1", "5.1", "999999.1"}  # the traces read in passing
    assert grouping.parse_status(polled.texts["5.1"])[1].status == "2"
    assert polled.texts["999999.1"] == ""


def test_parse_poll_lists_running_tasks_with_their_start_in_the_front_ends_zone() -> None:
    text = recorded("gridengine-poll.txt").replace("#zone +0000", "#zone -0130")
    polled = commands.parse_poll(text, ["11.1", "11.2"], OPTIONS)
    assert polled.jobs["11.1"] == RemoteJob("11.1", RemoteState.RUNNING, None, "vm", 1795873047.0 + 5400, None)
    assert polled.jobs["11.2"].state == RemoteState.RUNNING  # transferring to its host


def test_a_task_killed_without_a_word_waits_for_its_record_while_grid_engine_still_lists_its_job() -> None:
    """A best-effort task killed by the subordination of its queue leaves qstat a moment before
    its accounting record is written: running, until the record says it was preempted."""
    text = recorded("gridengine-poll.txt")
    without_record = text.replace("#qacct 4\n", "#qacct 4-dropped\n").replace(
        "0 start 1795873029.187726441 600\nkill 1795873032.538369622 USR2\nkill 1795873032.539394616 USR2\n",
        "0 start 1795873029.187726441 600\n")
    assert commands.parse_poll(without_record, ["4.1"], OPTIONS).jobs["4.1"].state == RemoteState.RUNNING
    forgotten = without_record.replace("#zombies 2 5 4 3", "#zombies 2 5 3")
    assert "4.1" not in commands.parse_poll(forgotten, ["4.1"], OPTIONS).jobs  # left to its trace: unfinished, lost


def test_parse_poll_refuses_garbage() -> None:
    with pytest.raises(ClusterBadAnswer):
        commands.parse_poll("#zone +0000\nerror: commlib error\n", ["1.1"], OPTIONS)
    with pytest.raises(ClusterBadAnswer, match="time zone"):
        commands.parse_poll("#zone CET\n<job_info/>\n", ["1.1"], OPTIONS)


def test_parse_capacity_on_recorded_output() -> None:
    assert commands.parse_capacity(recorded("gridengine-capacity.txt"), OPTIONS) == Capacity(8, 6, 0, node_cores=8)
    # every queue instance but the best-effort queue's, where no queue is named
    everything = recorded("gridengine-capacity-all-queues.txt")
    unnamed = {k: v for k, v in OPTIONS.items() if k != "queue"}
    assert commands.parse_capacity(everything, unnamed).total_slots == 8
    assert commands.parse_capacity(everything, {}).total_slots == 16
    disabled = recorded("gridengine-capacity.txt").replace("<qtype>BP</qtype>", "<qtype>BP</qtype><state>d</state>")
    assert commands.parse_capacity(disabled, OPTIONS) == Capacity(0, 0, 0)
    with pytest.raises(ClusterBadAnswer):
        commands.parse_capacity("error: can't unpack\n#pending\n0\n", OPTIONS)


def result(stdout: str, status: int = 0, stderr: str = "") -> CommandResult:
    return CommandResult(status, stdout, stderr)


def test_parse_submit() -> None:
    two = [spec("1"), spec("2")]
    assert commands.parse_submit("c", result("42\n"), two) == ["42.1", "42.2"]
    with pytest.raises(SubmissionRefused, match="no suitable queues"):
        commands.parse_submit("c", result("", 1, "Unable to run job: error: no suitable queues.\nExiting.\n"), two)
    with pytest.raises(SubmitLimitReached):
        commands.parse_submit("c", result("", 1, "Unable to run job: job rejected: Only 10 jobs are allowed per user "
                                                 "(current job count: 10)\n"), two)
    with pytest.raises(BackendError) as error:
        commands.parse_submit("c", result("", 1, "error: commlib error: got select error (Connection refused)\n"
                                                 "unable to contact qmaster using port 16444 on host \"vm\"\n"), two)
    assert type(error.value) is BackendError
    with pytest.raises(ClusterBadAnswer, match="no job id"):
        commands.parse_submit("c", result("Your job-array 42.1-2:1 has been submitted\n"), two)


def test_the_submit_script_adopts_a_batch_it_kept_and_keeps_a_new_one(tmp_path: Path) -> None:
    """SUBMIT run by sh against stand-ins for qstat and qsub: a new batch is kept in the index
    (where its tasks write, whose they are, and its job id by name); sent again, it is adopted."""
    log = tmp_path / "calls"
    fakes = {"qstat": f'echo "qstat $*" >> {log}; echo "<job_info/>"', "qsub": f'echo "qsub $*" >> {log}; echo 42'}
    for name, body in fakes.items():
        (tmp_path / name).write_text(f"#!/bin/sh\n{body}\n")
        (tmp_path / name).chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "HOME": str(tmp_path), "SGE_CELL": "c"}
    argv, script = commands.submit_argv([spec("1"), spec("2")], OPTIONS, Acting("", "gridtest"), "", "index")
    for _ in range(2):
        done = subprocess.run(argv, input=script, text=True, capture_output=True, env=env, timeout=10)
        assert (done.returncode, done.stdout) == (0, "42\n"), done.stderr
    assert [c.split()[:2] for c in log.read_text().splitlines()] == [["qstat", "-u"], ["qsub", "-terse"]]
    assert (tmp_path / "index" / "42").read_text() == "\n/tmp/cigri.c.42"
    name = argv[4]
    assert (tmp_path / "index" / name).read_text() == "42\n"


def test_remote_ids_and_where_their_files_are() -> None:
    assert REMOTE_ID.match("42.3") and REMOTE_ID.match("42.3+1") and not REMOTE_ID.match("42_3")
    assert commands.trace("42.3") == ("42", ".3")
    assert commands.cancel_argv(["1.1", "2.3"], "alice") == ["sudo", "-n", "-u", "alice", "--", "qdel", "1.1", "2.3"]


def test_the_poll_script_reads_a_trace_only_where_the_record_does_not_say_all(tmp_path: Path) -> None:
    """POLL run by sh against stand-ins for qstat and qacct: task 5.1 is listed, 6.1 ended by
    itself (its record says all), 6.2 was warned of a kill (exit 143) and 7.1 has no record yet."""
    listed = "<job_info>\\n<job_list>\\n<JB_job_number>5</JB_job_number>\\n<state>r</state>\\n<tasks>1</tasks>\\n" \
             "</job_list>\\n</job_info>"
    records = "\n".join(f"{'=' * 62}\njobnumber {6}\ntaskid {task}\nfailed 0\nexit_status {status}"
                        for task, status in ((1, 0), (2, 143)))
    fakes = {"qstat": f'case "$*" in *"-s z"*) echo "<x>"; echo "<JB_job_number>7</JB_job_number>";; '
                      f'*) printf "{listed}\\n";; esac',
             "qacct": f'[ "$2" = 6 ] && printf "%s\\n" "{records}" || exit 1'}
    for name, body in fakes.items():
        (tmp_path / name).write_text(f"#!/bin/sh\n{body}\n")
        (tmp_path / name).chmod(0o755)
    (tmp_path / "index").mkdir()
    for job in ("6", "7"):
        (tmp_path / "index" / job).write_text(f"\n{tmp_path}/cigri.c.{job}")
        for task in (1, 2):
            (tmp_path / f"cigri.c.{job}.{task}.status").write_text("0 start 1 60\nkill 2 USR2\n")
    done = subprocess.run(commands.poll_argv(["5.1", "6.1", "6.2", "7.1"], "index"), capture_output=True, text=True,
                          env={"PATH": f"{tmp_path}:/usr/bin:/bin", "HOME": str(tmp_path)}, timeout=10)
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stdout.splitlines() if line.startswith("#")] == \
        ["#zone +0000", "#qacct 6", "#qacct 7", "#trace 6.2", "#trace 7.1", "#zombies 7 "]


def test_the_configuration_checks_a_grid_engine_cluster_through_the_registry() -> None:
    from cigri.config import _cluster_configs
    from cigri.errors import ConfigError

    table = {"backend": "gridengine", "host": "h", "user": "u", "queue": "all.q", "identity": "sudo"}
    [cluster] = _cluster_configs({"g": table})  # ssh, its only transport, is the default
    assert cluster.options["queue"] == "all.q"
    for change, words in (({"transport": "rest"}, "clusters.g.transport: expected 'ssh'"),
                          ({"identity": "tokens"}, "clusters.g.identity: expected one of account, sudo"),
                          ({"partition": "main"}, "unknown key clusters.g.partition"),
                          ({"host": None}, "clusters.g.host: required")):
        with pytest.raises(ConfigError, match=words):
            _cluster_configs({"g": {k: v for k, v in {**table, **change}.items() if v is not None}})
