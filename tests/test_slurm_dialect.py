"""The Slurm dialects without a cluster: the job script (run for real with sh), resource
translation, the state table, and the parsers on outputs recorded from Slurm 22.05.8."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from cigri.backends import Capacity, JobSpec, RemoteJob, RemoteState
from cigri.backends._batch import Acting
from cigri.backends._http import refusal
from cigri.backends._ssh import CommandResult
from cigri.backends.slurm import commands, rest
from cigri.backends.slurm.batch import Shape, array_task_ids, build, constraint, job_script, shape
from cigri.backends.slurm.states import STATES, exit_code, never_starts, translate
from cigri.errors import ClusterBadAnswer, SubmissionRefused, SubmitLimitReached

RECORDED = Path(__file__).parent / "recorded"
HOSTILE = ("; touch pwned-semicolon", "$(touch pwned-subst)", "`touch pwned-backtick`", "it's \"quoted\"",
           "two\nlines", "*", "?", "[a-z]*", "-n", "--help", "", " spaced  out ", "\\", "$HOME", "${PATH}",
           "a|b&c>d<e", "~", "#not a comment", "é ü 日本")


def spec(key: str = "1", argv: tuple[str, ...] = ("/bin/true",), directory: str = "/tmp", **fields: object) -> JobSpec:
    values: dict[str, object] = dict(key=key, batch="7", name=f"job-{key}", argv=argv, directory=directory,
                                     walltime_seconds=3600, resources="core=1")
    values.update(fields)
    return JobSpec(**values)  # type: ignore[arg-type]


def run_task(script: str, task: int, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_JOB_ID": "77",
           "SLURM_CLUSTER_NAME": "test"}
    return subprocess.run(["sh"], input=script, env=env, cwd=tmp_path, text=True, capture_output=True, timeout=10)


# --- the job script ---------------------------------------------------------------------

def test_hostile_words_reach_the_program_literally(tmp_path: Path) -> None:
    workdir = tmp_path / "dir with 'quotes' and $(dollar) ;"
    workdir.mkdir()
    specs = [spec("a", ("/bin/false",), str(workdir)),
             spec("b", ("printf", "%s\\0", *HOSTILE), str(workdir),
                  environment={"CIGRI_X": "$(touch pwned-env)'\"\n`x`", "CIGRI_JOB_ID": "b"})]
    script = job_script(specs)
    result = run_task(script, 1, tmp_path)
    assert result.returncode == 0, result.stderr
    assert (workdir / "cigri.test.77_1.stdout").read_bytes() == b"".join(w.encode() + b"\0" for w in HOSTILE)
    assert not list(tmp_path.rglob("pwned*"))
    env_script = job_script([spec("c", ("/bin/sh", "-c", 'printf %s "$CIGRI_X"'), str(workdir),
                                  environment={"CIGRI_X": "$(touch pwned-env)'\"\n`x`"})])
    assert run_task(env_script, 0, tmp_path).returncode == 0
    assert (workdir / "cigri.test.77_0.stdout").read_text() == "$(touch pwned-env)'\"\n`x`"
    assert not list(tmp_path.rglob("pwned*"))


def test_each_task_runs_its_own_job_with_its_exit_status(tmp_path: Path) -> None:
    specs = [spec(str(i), ("/bin/sh", "-c", 'echo "$CIGRI_JOB_ID out"; echo err >&2; exit "$0"', str(i)),
                  str(tmp_path), environment={"CIGRI_JOB_ID": f"job{i}"}) for i in range(3)]
    script = job_script(specs)
    for i in range(3):
        assert run_task(script, i, tmp_path).returncode == i
        assert (tmp_path / f"cigri.test.77_{i}.stdout").read_text() == f"job{i} out\n"
        assert (tmp_path / f"cigri.test.77_{i}.stderr").read_text() == "err\n"
    stray = run_task(script, 3, tmp_path)
    assert stray.returncode == 1 and "no job for array task 3" in stray.stderr


def test_a_missing_directory_fails_the_job_instead_of_running_elsewhere(tmp_path: Path) -> None:
    script = job_script([spec(argv=("/bin/sh", "-c", "touch ran"), directory=str(tmp_path / "missing"))])
    assert run_task(script, 0, tmp_path).returncode == 1
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("argv, environment, reason", [
    ((), {}, "program must be named"),
    (("-rf",), {}, "not start with '-'"),
    (("/bin/echo", "a\0b"), {}, "NUL"),
    (("/bin/true",), {"BAD-NAME": "x"}, "BAD-NAME"),
    (("/bin/true",), {"X; rm": "x"}, "X; rm"),
])
def test_what_sh_cannot_carry_is_refused(argv: tuple[str, ...], environment: dict[str, str], reason: str) -> None:
    with pytest.raises(SubmissionRefused, match=reason):
        job_script([spec(argv=argv, environment=environment)])


# --- resources, properties, batches ----------------------------------------------------

@pytest.mark.parametrize("resources, expected, flags", [
    ("", Shape(None, 1, 1), ["--ntasks=1", "--cpus-per-task=1"]),
    ("core=1", Shape(None, 1, 1), ["--ntasks=1", "--cpus-per-task=1"]),
    ("core=4", Shape(None, 1, 4), ["--ntasks=1", "--cpus-per-task=4"]),
    ("/core=4", Shape(None, 1, 4), ["--ntasks=1", "--cpus-per-task=4"]),
    ("cpu=2", Shape(None, 1, 2), ["--ntasks=1", "--cpus-per-task=2"]),
    ("resource_id=1", Shape(None, 1, 1), ["--ntasks=1", "--cpus-per-task=1"]),
    ("/cpu=2/core=3", Shape(None, 1, 6), ["--ntasks=1", "--cpus-per-task=6"]),
    ("nodes=1", Shape(1, 1, 1, exclusive=True),
     ["--nodes=1", "--ntasks-per-node=1", "--ntasks=1", "--cpus-per-task=1", "--exclusive"]),
    ("/host=2", Shape(2, 2, 1, exclusive=True),
     ["--nodes=2", "--ntasks-per-node=1", "--ntasks=2", "--cpus-per-task=1", "--exclusive"]),
    ("/nodes=1/core=4", Shape(1, 1, 4), ["--nodes=1", "--ntasks-per-node=1", "--ntasks=1", "--cpus-per-task=4"]),
    ("network_address=2/core=4", Shape(2, 2, 4),
     ["--nodes=2", "--ntasks-per-node=1", "--ntasks=2", "--cpus-per-task=4"]),
    ("/nodes=2/cpu=2/core=4", Shape(2, 2, 8),
     ["--nodes=2", "--ntasks-per-node=1", "--ntasks=2", "--cpus-per-task=8"]),
])
def test_resources_translation(resources: str, expected: Shape, flags: list[str]) -> None:
    assert shape(resources) == expected
    batch = build([spec(resources=resources)], {})
    resource_flags = [f for f in commands.sbatch_flags(batch)
                      if f.split("=")[0] in ("--nodes", "--ntasks-per-node", "--ntasks", "--cpus-per-task", "--exclusive")]
    assert resource_flags == flags


@pytest.mark.parametrize("resources", [
    "core=0", "core=ALL", "nodes=BEST", "core=²", "core=1,walltime=1:00:00", "{gpu='YES'}/nodes=1",
    "/core=4/nodes=1", "/switch=1/nodes=1", "core=1+nodes=1", "gpu=1", "core=1/core=2", "core", "/",
])
def test_resources_slurm_cannot_express_are_refused(resources: str) -> None:
    with pytest.raises(SubmissionRefused, match="Slurm cannot run"):
        shape(resources)


def test_properties_become_a_constraint() -> None:
    assert constraint("", "") == ""
    assert constraint("avx2&ib", "") == "avx2&ib"
    assert constraint("avx2", "ib|opa") == "(avx2)&(ib|opa)"
    with pytest.raises(SubmissionRefused, match="not a Slurm feature expression"):
        constraint("cluster='dahu' AND gpu='YES'")


def test_batch_flags_follow_the_cluster_options() -> None:
    options = {"partition": "main", "best_effort_partition": "besteffort", "best_effort_qos": "scavenger",
               "project": "default-account", "properties": "avx2"}
    normal = build([spec(walltime_seconds=61, properties="ib")], options)
    assert commands.sbatch_flags(normal) == [
        "--array=0-0", f"--job-name={normal.name}", "--chdir=/tmp", "--time=2", "--output=/dev/null",
        "--error=/dev/null", "--ntasks=1", "--cpus-per-task=1", "--partition=main",
        "--account=default-account", "--constraint=(avx2)&(ib)"]
    best = build([spec(best_effort=True, project="mine"), spec("2", best_effort=True, project="mine")], options)
    assert (best.partition, best.qos, best.account, best.size) == ("besteffort", "scavenger", "mine", 2)
    assert build([spec(walltime_seconds=1)], {}).minutes == 1
    assert build([spec(walltime_seconds=120)], {}).minutes == 2


def test_a_batch_is_named_by_its_number_and_content() -> None:
    first = build([spec("1"), spec("2")], {})
    assert first.name.startswith("cigri.7.")
    assert build([spec("1"), spec("2")], {"partition": "other"}).name == first.name
    assert build([spec("1"), spec("3")], {}).name != first.name
    assert build([spec("1"), spec("2", argv=("/bin/false",))], {}).name != first.name
    assert array_task_ids([spec("1"), spec("2")], "42") == {"1": "42_0", "2": "42_1"}


def test_one_array_needs_one_set_of_flags() -> None:
    with pytest.raises(SubmissionRefused, match="one directory"):
        build([spec("1"), spec("2", directory="/elsewhere")], {})
    with pytest.raises(SubmissionRefused, match="one walltime_seconds"):
        build([spec("1"), spec("2", walltime_seconds=60)], {})
    with pytest.raises(SubmissionRefused, match="one memory_mb"):
        build([spec("1", memory_mb=1024), spec("2")], {})


def test_oar_job_types_are_refused() -> None:
    with pytest.raises(SubmissionRefused, match="OAR job types, Slurm has none"):
        build([spec("1", job_types=("idempotent",))], {})


def test_memory_is_reserved_per_node_in_mebibytes() -> None:
    assert "--mem=4096M" in commands.sbatch_flags(build([spec(memory_mb=4096)], {}))
    assert not [f for f in commands.sbatch_flags(build([spec()], {})) if f.startswith("--mem")]  # the default


# --- states ----------------------------------------------------------------------------

@pytest.mark.parametrize("state, status, expected", [
    ("PENDING", 0, (RemoteState.QUEUED, None)),
    ("REQUEUED", 0, (RemoteState.QUEUED, None)),
    ("RUNNING", 0, (RemoteState.RUNNING, None)),
    ("COMPLETING", 0, (RemoteState.RUNNING, None)),
    ("SUSPENDED", 0, (RemoteState.RUNNING, None)),
    ("COMPLETED", 0, (RemoteState.COMPLETED, 0)),
    ("FAILED", 768, (RemoteState.COMPLETED, 3)),
    ("FAILED", 9, (RemoteState.COMPLETED, 137)),
    ("OUT_OF_MEMORY", 0, (RemoteState.COMPLETED, 1)),
    ("NODE_FAIL", 0, (RemoteState.COMPLETED, 1)),
    ("BOOT_FAIL", None, (RemoteState.COMPLETED, 1)),
    ("TIMEOUT", 15, (RemoteState.TIMEOUT, None)),
    ("DEADLINE", 0, (RemoteState.TIMEOUT, None)),
    ("CANCELLED", 15, (RemoteState.CANCELLED, None)),
    ("CANCELLED by 1000", 15, (RemoteState.CANCELLED, None)),
    ("PREEMPTED", 15, (RemoteState.PREEMPTED, None)),
])
def test_state_table(state: str, status: int | None, expected: tuple[RemoteState, int | None]) -> None:
    assert translate(state, status) == expected


def test_every_slurm_22_05_state_is_in_the_table_and_nothing_else() -> None:
    slurm_states = {"BOOT_FAIL", "CANCELLED", "COMPLETED", "CONFIGURING", "COMPLETING", "DEADLINE", "FAILED",
                    "NODE_FAIL", "OUT_OF_MEMORY", "PENDING", "PREEMPTED", "RUNNING", "RESV_DEL_HOLD",
                    "REQUEUE_FED", "REQUEUE_HOLD", "REQUEUED", "RESIZING", "REVOKED", "SIGNALING",
                    "SPECIAL_EXIT", "STAGE_OUT", "STOPPED", "SUSPENDED", "TIMEOUT"}
    assert set(STATES) == slurm_states
    with pytest.raises(ClusterBadAnswer, match="UNHEARD_OF"):
        translate("UNHEARD_OF", 0)


def test_wait_status_to_exit_code() -> None:
    assert [exit_code(s) for s in (0, 256, 768, 36608, 15, 9)] == [0, 1, 3, 143, 143, 137]


# --- command-line parsers (outputs recorded on Slurm 22.05.8) ---------------------------

# the POLL script on slurm-b (squeue -O 'JobArrayID:|,State:|,exit_code:|,NodeList:|,StartTime:|,EndTime:|,
# UserName:|,Cluster:|,WorkDir:|', SLURM_TIME_FORMAT=%s): its first lines as printed (a working directory
# holding a "|"), the other states in the same format; then sacct -n -P -X for the forgotten ids
POLL_OUTPUT = """\
15_1|CANCELLED|15|slurm-b-n1|1795872934|1795872937|gridtest|slurm-b|/tmp|
14_0|COMPLETED|0|slurm-b-n1|1795872934|1795872934|gridtest|slurm-b|/tmp/cigri-clusters/exec/rec dir|x|
14_1|FAILED|256|slurm-b-n1|1795872934|1795872934|gridtest|slurm-b|/tmp/cigri-clusters/exec/rec dir|x|
14_2|FAILED|512|slurm-b-n1|1795872934|1795872934|gridtest|slurm-b|/tmp/cigri-clusters/exec/rec dir|x|
15_0|RUNNING|0|slurm-b-n1|1795872934|1795872994|gridtest|slurm-b|/tmp|
17_0|PREEMPTED|15|slurm-b-n1|1795426301|1795426303|cigri-u1|slurm-b|/home/cigri-u1|
24|COMPLETED|0|slurm-b-n1|1795426303|1795426323|gridtest|slurm-b|/tmp|
16_0|TIMEOUT|15|slurm-b-n1|1795426301|1795426363|gridtest|slurm-b|/tmp|
25_9|PENDING|0||N/A|N/A|cigri-u2|slurm-b|/home/cigri-u2|
#sacct
3_4|FAILED|2:0|slurm-b-n1|1795872934|1795872934|gridtest|slurm-b|/tmp/cigri-clusters/exec/rec dir|x
3_5|CANCELLED by 1001|0:0|slurm-b-n1|1795872934|1795872937|gridtest|slurm-b|/tmp
3_6|COMPLETED|0:0|slurm-b-n1|Unknown|Unknown|gridtest|slurm-b|/tmp
"""


def test_parse_poll_on_recorded_output() -> None:
    ids = ["17_0", "15_1", "14_0", "14_1", "14_2", "16_0", "25_9", "15_0", "3_4", "3_5", "3_6", "900_1"]
    polled = commands.parse_poll(POLL_OUTPUT, ids)
    jobs = polled.jobs
    assert {i: (j.state, j.exit_code) for i, j in jobs.items()} == {
        "17_0": (RemoteState.PREEMPTED, None), "15_1": (RemoteState.CANCELLED, None),
        "14_0": (RemoteState.COMPLETED, 0), "14_1": (RemoteState.COMPLETED, 1), "14_2": (RemoteState.COMPLETED, 2),
        "16_0": (RemoteState.TIMEOUT, None), "25_9": (RemoteState.QUEUED, None), "15_0": (RemoteState.RUNNING, None),
        "3_4": (RemoteState.COMPLETED, 2), "3_5": (RemoteState.CANCELLED, None), "3_6": (RemoteState.COMPLETED, 0)}
    assert jobs["14_2"] == RemoteJob("14_2", RemoteState.COMPLETED, 2, "slurm-b-n1", 1795872934.0, 1795872934.0)
    assert jobs["25_9"] == RemoteJob("25_9", RemoteState.QUEUED)
    assert jobs["15_0"] == RemoteJob("15_0", RemoteState.RUNNING, None, "slurm-b-n1", 1795872934.0, None)
    assert jobs["3_6"].started_at is None
    # where each writes, for its owner: the working directory keeps its "|"
    assert polled.files["14_1"] == ("gridtest", "/tmp/cigri-clusters/exec/rec dir|x/cigri.slurm-b.14_1")
    assert polled.files["3_4"] == ("gridtest", "/tmp/cigri-clusters/exec/rec dir|x/cigri.slurm-b.3_4")
    assert polled.files["25_9"] == ("cigri-u2", "/home/cigri-u2/cigri.slurm-b.25_9")


def test_parse_poll_ignores_other_jobs_and_refuses_garbage_for_ours() -> None:
    assert commands.parse_poll("garbage for someone else\n", ["1_0"]).jobs == {}
    with pytest.raises(ClusterBadAnswer, match="squeue"):
        commands.parse_poll("1_0|RUNNING\n", ["1_0"])
    with pytest.raises(ClusterBadAnswer, match="unknown Slurm job state"):
        commands.parse_poll("1_0|NEW_STATE|0|n|1|2|u|c|/d|\n", ["1_0"])


def result(stdout: str, status: int = 0, stderr: str = "") -> CommandResult:
    return CommandResult(status, stdout, stderr)


@pytest.mark.parametrize("stdout, array_id", [("42\n", "42"), ("42;slurm-a\n", "42"), (" 7 \n", "7")])
def test_parse_submit(stdout: str, array_id: str) -> None:
    assert commands.parse_submit("c", result(stdout), [spec(), spec()]) == [f"{array_id}_0", f"{array_id}_1"]


def test_parse_submit_refuses_anything_else() -> None:
    with pytest.raises(ClusterBadAnswer, match="no job id"):
        commands.parse_submit("c", result("sbatch: error: Batch job submission failed\n"), [spec()])
    with pytest.raises(SubmissionRefused, match="c: submission refused: sbatch: error: Invalid partition"):
        commands.parse_submit("c", result("", 1, "sbatch: error: Invalid partition name specified\n"), [spec()])
    with pytest.raises(SubmitLimitReached):
        commands.parse_submit("c", result("", 1, "sbatch: error: QOSMaxSubmitJobPerUserLimit\n"), [spec()])


def test_parse_capacity_on_recorded_and_multi_node_output() -> None:
    # sinfo -O 'NodeList:|,CPUsState:|,Memory:|,AllocMem:|' of slurm 22.05.8
    assert commands.parse_capacity("slurm-a-n1|0/8/0/8|8000|0|\n#pending\n0\n") == Capacity(8, 8, 0, 8000, 8, 8000)
    # a node in two partitions is listed twice; a drained node's CPUs are "other", its memory
    # is not offered; memory held by jobs is not free
    text = ("n1|3/5/0/8|8000|3000|\nn2|0/0/16/16|16000|0|\nn1|3/5/0/8|8000|3000|\nn3|8/0/0/8|8000|8000|\n"
            "#pending\n12\n")
    assert commands.parse_capacity(text) == Capacity(16, 5, 12, 5000, 8, 8000, 11000)  # the drained node aside
    mixed = "n1|0/8/0/8|8000|0|\nn4|0/16/0/16|8000|0|\n#pending\n0\n"
    assert commands.parse_capacity(mixed) == Capacity(24, 24, 0, 16000, None, 8000)  # unlike nodes: no size
    with pytest.raises(ClusterBadAnswer):
        commands.parse_capacity("sinfo: error: invalid partition\n#pending\n0\n")
    with pytest.raises(ClusterBadAnswer):
        commands.parse_capacity("n1 3/5/0/8\n#pending\n0\n")  # the former format
    with pytest.raises(ClusterBadAnswer):
        commands.parse_capacity("#pending\n0\n")


# pending reasons of slurm 22.05 (src/common/slurm_protocol_defs.c): per-job limits never lift,
# count limits do as jobs end
NEVER = ["PartitionConfig", "PartitionTimeLimit", "BadConstraints", "InvalidQOS", "QOSNotAllowed",
         "MaxMemPerLimit", "QOSMaxWallDurationPerJobLimit", "QOSMaxCpuPerJobLimit", "QOSMaxNodePerJobLimit",
         "QOSMaxCpuMinutesPerJobLimit", "QOSMaxMemoryPerJob", "AssocMaxWallDurationPerJobLimit",
         "AssocMaxCpuPerJobLimit", "QOSMinCpuNotSatisfied", "QOSMinMemory"]
SOMEDAY = ["None", "Priority", "Resources", "QOSMaxJobsPerUserLimit", "QOSMaxCpuPerUserLimit",
           "QOSMaxSubmitJobPerUserLimit", "AssocMaxJobsLimit", "AssocGrpCpuLimit", "QOSGrpNodeLimit",
           "JobHeldAdmin", "BeginTime", "ReqNodeNotAvail, UnavailableNodes:n1", "PartitionDown", ""]


@pytest.mark.parametrize("reason", NEVER + SOMEDAY)
def test_the_submit_script_refuses_and_cancels_an_array_that_will_never_start(reason: str, tmp_path: Path) -> None:
    """SUBMIT run by sh for real, against stand-ins for squeue, sbatch and scancel: its case
    patterns and :func:`never_starts` (the REST path's test) agree on every reason."""
    log = tmp_path / "calls"
    fakes = {"squeue": f'echo "squeue $*" >> {log}; case "$*" in *--name*) ;; *) echo "{reason}|slurm-b|" ;; esac',
             "sbatch": f'echo "sbatch $*" >> {log}; echo "42;slurm-b"', "scancel": f'echo "scancel $*" >> {log}'}
    for name, body in fakes.items():
        (tmp_path / name).write_text(f"#!/bin/sh\n{body}\n")
        (tmp_path / name).chmod(0o755)
    argv, script = commands.submit_argv([spec()], {}, Acting("", "u"), "", "index")
    done = subprocess.run(argv, input=script, text=True, capture_output=True,
                          env={"PATH": f"{tmp_path}:/usr/bin:/bin", "HOME": str(tmp_path)}, timeout=10)
    calls = log.read_text().splitlines()
    assert never_starts(reason) == (reason in NEVER)
    if reason in NEVER:
        assert (done.returncode, done.stdout) == (1, "") and calls[-1] == "scancel 42"
        assert f"can never run this array (pending reason {reason})" in done.stderr
    else:
        assert (done.returncode, done.stdout) == (0, "42\n") and not any(c.startswith("scancel") for c in calls)
        # the index keeps where the array's jobs write, and whose they are, for when Slurm forgets them
        assert (tmp_path / "index" / "42").read_text() == "\n/tmp/cigri.slurm-b.42"


def test_every_remote_input_is_a_positional_argument() -> None:
    argv = commands.poll_argv(["1_0", "2_3"])
    assert argv[:2] == ["sh", "-c"] and argv[2] == commands.POLL and argv[3:] == ["sh", "1_0", "2_3"]
    assert commands.cancel_argv(["1_0", "2_3"]) == ["scancel", "1_0", "2_3"]
    assert commands.cancel_argv(["1_0"], "alice") == ["sudo", "-n", "-u", "alice", "--", "scancel", "1_0"]
    batch = build([spec()], {})
    argv, script = commands.submit_argv([spec()], {}, Acting("", "u"), "", "idx")
    assert argv[3:8] == ["sh", batch.name, "", "idx", "/tmp"] and script == batch.script
    argv, _ = commands.submit_argv([spec()], {}, Acting("alice", "alice"), "alice", "idx")
    assert argv[3:8] == ["sh", batch.name, "alice", "idx", "/tmp"]
    assert commands.trace("42_3") == ("42", "_3")


# --- slurmrestd (answers recorded from slurmrestd 22.05.8, OpenAPI v0.0.38, trimmed) -----

def recorded(name: str) -> object:
    return json.loads((RECORDED / name).read_text())


def test_rest_parse_jobs_on_recorded_answer() -> None:
    ids = ["15_0", "15_1", "16_0", "17_2", "25_1", "40_6", "40_8", "40_11", "40_12", "50_0", "51_0"]
    jobs = rest.parse_jobs(recorded("slurmrestd-jobs.json"), ids)
    assert {i: (j.state, j.exit_code) for i, j in jobs.items()} == {
        "15_0": (RemoteState.COMPLETED, 3), "15_1": (RemoteState.CANCELLED, None),
        "16_0": (RemoteState.TIMEOUT, None), "17_2": (RemoteState.PREEMPTED, None),
        "25_1": (RemoteState.COMPLETED, 0), "40_6": (RemoteState.RUNNING, None),
        "40_8": (RemoteState.QUEUED, None), "40_11": (RemoteState.QUEUED, None),
        "40_12": (RemoteState.UNKNOWN, None),
        "50_0": (RemoteState.RUNNING, None),  # another cigri user's: a poll reads every owner's jobs
        "51_0": (RemoteState.UNKNOWN, None),  # not started by cigri
    }
    assert jobs["15_0"].node == "slurm-b-n1" and jobs["15_0"].finished_at is not None
    assert jobs["40_8"].started_at is None and jobs["40_6"].finished_at is None


def test_rest_finds_an_earlier_array_by_name() -> None:
    answer = recorded("slurmrestd-jobs.json")
    found = [rest.find_array(answer, "cigri.rec.b", "gridtest"), rest.find_array(answer, "cigri.probe", "gridtest")]
    assert [rest.array_id(job) for job in found if job] == ["17", "40"]
    assert [rest.never_start_reason(job) for job in found if job] == [None, None]
    assert rest.find_array(answer, "cigri.rec.b", "alice") is None
    assert rest.find_array(answer, "cigri.nothing", "gridtest") is None


def test_rest_an_array_whose_pending_tasks_were_cancelled_has_only_its_running_ones() -> None:
    """GET job/{id} of a 4-task array of which 2 run, recorded after its 2 pending tasks were
    cancelled (a pause): their record stays, CANCELLED, its task string empty. It stands for no
    task: read as task 0, it ended the running task 0 in cigri's books whenever it came after
    that task's record (``GET jobs`` lists them in any order)."""
    answer = recorded("slurmrestd-array-pending-cancelled.json")
    assert isinstance(answer, dict)
    ids = ["966_0", "966_1", "966_2", "966_3"]
    expected = {"966_0": RemoteState.RUNNING, "966_1": RemoteState.RUNNING, "966_2": RemoteState.UNKNOWN,
                "966_3": RemoteState.UNKNOWN}
    for order in (1, -1):
        jobs = rest.parse_jobs({**answer, "jobs": answer["jobs"][::order]}, ids)
        assert {i: j.state for i, j in jobs.items()} == expected


def test_rest_reads_why_an_accepted_array_will_never_start() -> None:
    """GET job/{id} of a 20-minute array in slurm-b's partition ``walled`` (QOS MaxWall 10
    minutes without DenyOnLimit), recorded right after its POST: accepted, pending for good."""
    job = rest.parse_job(recorded("slurmrestd-job-never-starts.json"))
    assert (rest.array_id(job), job["job_state"]) == ("4", "PENDING")
    assert rest.never_start_reason(job) == "QOSMaxWallDurationPerJobLimit"
    with pytest.raises(ClusterBadAnswer, match="no such job"):
        rest.parse_job({"errors": [{"error": "Invalid job id specified", "error_number": 2017}], "jobs": []})


def test_rest_submit_payload_and_answer() -> None:
    options = {"partition": "main", "best_effort_partition": "besteffort"}
    batch = build([spec(resources="/nodes=2/core=4", best_effort=True, walltime_seconds=90),
                   spec("2", resources="/nodes=2/core=4", best_effort=True, walltime_seconds=90)], options)
    payload = rest.submit_payload(batch, "alice", "/home/users/alice")
    assert payload["script"] == batch.script
    assert payload["job"] == {
        "name": batch.name, "array": "0-1", "current_working_directory": "/tmp", "standard_output": "/dev/null",
        "standard_error": "/dev/null", "time_limit": 2, "tasks": 2, "environment": {  # sbatch would pass the login's
            **rest.ENVIRONMENT, "HOME": "/home/users/alice", "USER": "alice", "LOGNAME": "alice"},
        "cpus_per_task": 4, "nodes": [2, 2], "tasks_per_node": 1, "partition": "besteffort"}
    assert "memory_per_node" not in payload["job"]
    assert rest.submit_payload(build([spec(memory_mb=2048)], {}), "a", "/a")["job"]["memory_per_node"] == 2048
    assert rest.parse_submit({"errors": [], "job_id": 25, "step_id": "BATCH"}) == "25"
    with pytest.raises(SubmissionRefused, match="Invalid partition name specified"):
        rest.parse_submit({"errors": [{"error": "Invalid partition name specified", "error_number": 2000}]})
    with pytest.raises(ClusterBadAnswer):
        rest.parse_submit({"errors": []})


def test_rest_accounting_policy_may_be_a_submit_limit_or_a_job_over_a_limit() -> None:
    """slurmrestd's answer (HTTP 500) to a submission beyond a partition QOS's
    MaxSubmitJobsPerUser, recorded on the test clusters: error 2050 and sbatch's generic words,
    which also cover a job over a size or time limit. The runner tells them apart."""
    with pytest.raises(SubmitLimitReached, match=r"job submit limit") as refused:
        rest.parse_submit(recorded("slurmrestd-submit-limit.json"))
    assert refused.value.maybe_job


def test_rest_capacity_counts_usable_nodes_of_the_partition() -> None:
    answer = recorded("slurmrestd-nodes.json")
    # n1 (8 idle CPUs, 8000 MiB free) + n3 (5 idle, 5000 MiB free); n2 drained
    assert rest.parse_nodes(answer, "main") == Capacity(16, 13, 0, 13000, 8, 8000, 3000)
    assert rest.parse_nodes(answer, "") == Capacity(48, 45, 0, 77000, None, None, 3000)  # and the gpu node: unlike
    del answer["nodes"][0]["real_memory"]  # type: ignore[index]
    assert rest.parse_nodes(answer, "main") == Capacity(16, 13, 0, None, 8, None, 3000)  # a node that does not say
    with pytest.raises(ClusterBadAnswer):
        rest.parse_nodes({"errors": ["x"]}, "main")


def test_an_unexpected_answer_is_told_by_what_it_says_on_one_line() -> None:
    """A CLUSTER_BAD_ANSWER event once quoted the first 200 characters of slurmrestd's
    pretty-printed JSON, its metadata, over several lines of the gridevents table."""
    slurm = json.loads((RECORDED / "slurmrestd-submit-limit.json").read_text())
    pretty = httpx.Response(500, text=json.dumps(slurm, indent=2))
    assert refusal(pretty) == "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
    oar = json.loads((RECORDED / "oar-rest-submit-admission-refused.json").read_text())
    assert refusal(httpx.Response(500, json=oar)).startswith("Oarsub command exited with status 254: [ADMISSION RULE]")
    assert "\n" not in refusal(httpx.Response(500, json=oar))
    assert refusal(httpx.Response(502, text="<html>\n<h1>Bad   gateway</h1>\n" + "x" * 400)) == \
        "<html> <h1>Bad gateway</h1> " + "x" * 272 + "…"
