"""The OAR dialect without a cluster: the generated script and parameter lines run for real by
the shells OAR would use, command and request building, the state table, and the parsers on
outputs recorded from OAR 2.5.9 (the REST lists trimmed to a few items)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cigri.backends import Capacity, JobSpec, RemoteState
from cigri.backends.oar import batch, commands, rest
from cigri.backends.oar.batch import Batch, build
from cigri.backends.oar.states import ERROR_EVENTS, STATES, exit_status, remote_job, remote_state
from cigri.errors import ClusterBadAnswer, SubmissionRefused

RECORDED = Path(__file__).parent / "recorded"
HOSTILE = ("a;b", "$(touch pwned)", "`touch pwned`", "it's \"quoted\"", "new\nline", "*", "?", "[a]",
           "-n", "--help", "", " ", "\\", "\\\\x", "$HOME", "${HOME}", "~", "~/x", "/~/x", "#c", "a#b",
           "'", '"', "\t", "|&><", "é€", "%s", "!x")
ODD_DIRECTORY = "meta dir 'q' $(touch pwned) ; `x` ~ é"
DUMP_ARGV = "import json, sys; print(json.dumps(sys.argv[1:]))"
SHELLS = [shell for shell in ("sh", "dash", "bash") if shutil.which(shell)]


def spec(key: str, *argv: str, directory: str = "/work/dir", **fields: Any) -> JobSpec:
    settings: dict[str, Any] = dict(batch="100", name=f"cigri.1.{key}", argv=argv or ("/bin/true",),
                                    directory=directory, walltime_seconds=3600, resources="core=1")
    settings.update(fields)
    return JobSpec(key=key, **settings)


def recorded(name: str) -> str:
    return (RECORDED / name).read_text()


def recorded_json(name: str) -> Any:
    return json.loads(recorded(name))


# --- the generated script and parameter lines, run by real shells ---------------------------

def run_job(built: Batch, key: str, shell: str = "sh", path: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run one job as OAR does: the user's shell runs the command with the job's parameter line
    appended (after OAR's reading rules: '#' starts a comment), in the launch directory."""
    launch = Path(built.launch_directory)
    (launch / built.script_name).write_text(built.script)
    line = next(line for line in built.parameters if line.endswith(f" {key}"))
    line = re.sub("#.*", "", line)
    env = {**os.environ, "PATH": path} if path else None
    return subprocess.run([shell, "-c", f"sh {built.script_name} {line}"], cwd=launch, env=env,
                          capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("shell", SHELLS)
def test_hostile_argv_environment_and_directory_arrive_literally(tmp_path: Path, shell: str) -> None:
    directory = tmp_path / ODD_DIRECTORY
    directory.mkdir()
    env = {"CIGRI_JOB_ID": "7", "CIGRI_ODD": "x'; touch pwned; '$(id)`id`\n~/~/", "EMPTY": ""}
    specs = [spec("7", sys.executable, "-c", DUMP_ARGV + "; import os; print(json.dumps("
                  "[os.getcwd(), os.environ['CIGRI_ODD'], os.environ['EMPTY']]))",
                  *HOSTILE, directory=str(directory), environment=env),
             spec("8", "/bin/false", directory=str(directory))]
    built = build(specs)
    assert built.launch_directory == str(tmp_path)
    result = run_job(built, "7", shell)
    assert result.returncode == 0, result.stderr
    argv_line, env_line = (directory / "cigri.7.stdout").read_text().splitlines()
    assert json.loads(argv_line) == list(HOSTILE)
    assert json.loads(env_line) == [str(directory), env["CIGRI_ODD"], ""]
    assert (directory / "cigri.7.stderr").read_text() == ""
    assert not list(tmp_path.glob("**/pwned")) and not (directory / "cigri.8.stdout").exists()


def test_script_survives_oar_rest_home_rewrite() -> None:
    """OAR's API replaces ``/~/`` in a posted script by the home directory: there is none."""
    text = build([spec("1", "/~/prog", "/~/", "a/~/b", environment={"X": "/~/y"})]).script
    assert "/~/" not in text
    assert re.sub("/~/", "/home/u/", text) == text


def test_exit_status_and_output_files_of_a_job(tmp_path: Path) -> None:
    built = build([spec("1", "/bin/sh", "-c", "echo out; echo err >&2; exit 7", directory=str(tmp_path)),
                   spec("2", "/bin/sh", "-c", "kill -TERM $$", directory=str(tmp_path))])
    assert run_job(built, "1").returncode == 7
    assert (tmp_path / "cigri.1.stdout").read_text() == "out\n"
    assert (tmp_path / "cigri.1.stderr").read_text() == "err\n"
    assert run_job(built, "2", "bash").returncode == -15  # the signal reaches OAR as such


@pytest.mark.parametrize("shell", SHELLS)
def test_program_starting_with_a_dash_and_a_missing_program(tmp_path: Path, shell: str) -> None:
    program = tmp_path / "-prog"
    program.write_text('#!/bin/sh\necho "ran $*"\n')
    program.chmod(0o755)
    built = build([spec("1", "-prog", "-x", directory=str(tmp_path)),
                   spec("2", "./no-such-program", directory=str(tmp_path))])
    result = run_job(built, "1", shell, path=f"{tmp_path}:{os.environ['PATH']}")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "cigri.1.stdout").read_text() == "ran -x\n"
    assert run_job(built, "2", shell).returncode == 127
    assert "no-such-program" in (tmp_path / "cigri.2.stderr").read_text()


def test_unknown_key_or_missing_directory_runs_nothing(tmp_path: Path) -> None:
    built = build([spec("1", "/usr/bin/touch", "ran", directory=str(tmp_path))])
    (tmp_path / built.script_name).write_text(built.script)
    result = subprocess.run(["sh", built.script_name, str(tmp_path), "2"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 1 and "no job 2" in result.stderr
    result = subprocess.run(["sh", built.script_name, str(tmp_path / "gone"), "1"], cwd=tmp_path,
                            capture_output=True, text=True)
    assert result.returncode != 0 and not (tmp_path / "ran").exists()


def test_a_job_is_found_again_from_its_oar_command() -> None:
    built = build([spec("10", directory=f"/x/{ODD_DIRECTORY}"), spec("11", directory=f"/x/{ODD_DIRECTORY}")])
    for line, key in zip(built.parameters, ("10", "11")):
        for command in (f"sh {built.script_name} {line}", f"./oarapi.subscript.v8nx9 {line}"):
            assert batch.job_of(command) == (f"/x/{ODD_DIRECTORY}", key)
            assert batch.output_path(command, "stderr") == f"/x/{ODD_DIRECTORY}/cigri.{key}.stderr"
    for foreign in ("sleep 300", "true", "sh cigri.1.sh", "sh cigri.1.sh 5", "sh other.sh /x 5",
                    "sh cigri.1.sh relative 5", "sh cigri.1.sh '/x 5", "sh cigri.1.sh /x 5 6"):
        assert batch.job_of(foreign) is None


def test_batch_name_follows_script_and_parameters() -> None:
    name = build([spec("1"), spec("2")]).name
    assert re.fullmatch(r"cigri\.100\.[0-9a-f]{12}", name)
    assert name == build([spec("1"), spec("2")]).name
    assert name != build([spec("1"), spec("3")]).name
    assert name != build([spec("1", directory="/other"), spec("2", directory="/other")]).name


@pytest.mark.parametrize(("directory", "launch"), [
    ("/work/dir", "/work/dir"), ("/", "/"), ("/home/u/my dir/x", "/home/u"), ("/a/b'c", "/a"),
    ("/a/~u/b", "/a"), ("/a/../b", "/a"), ("/a/b/", "/a/b"),
])
def test_launch_directory_is_the_longest_plain_ancestor(directory: str, launch: str) -> None:
    assert batch.launch_directory(directory) == launch


# --- what one oarsub can carry ------------------------------------------------------------------

@pytest.mark.parametrize(("resources", "seconds", "wanted"), [
    ("core=1", 3600, "core=1,walltime=01:00:00"),
    ("/nodes=1/core=4", 90, "/nodes=1/core=4,walltime=00:01:30"),
    ("", 5, "walltime=00:00:05"),
    (" core=2 ", 360000, "core=2,walltime=100:00:00"),
])
def test_resource_request(resources: str, seconds: int, wanted: str) -> None:
    assert build([spec("1", resources=resources, walltime_seconds=seconds)]).resources == wanted


def test_properties_of_cluster_and_campaign_both_apply() -> None:
    assert build([spec("1")]).properties == ""
    assert build([spec("1")], "cluster='a'").properties == "cluster='a'"
    assert build([spec("1", properties="gpu='YES'")]).properties == "gpu='YES'"
    assert build([spec("1", properties="gpu='YES'")], "a='1' OR b='2'").properties == \
        "(a='1' OR b='2') AND (gpu='YES')"
    assert build([spec("1")], cluster_project="p").project == "p"
    assert build([spec("1", project="mine")], cluster_project="p").project == "mine"


@pytest.mark.parametrize(("specs", "reason"), [
    ([spec("1", directory="relative/dir")], "directory"),
    ([spec("1", directory="/a#b")], "directory"),
    ([spec("1", directory="/a\nb")], "directory"),
    ([spec("1 2")], "key"),
    ([spec("--")], "key"),
    ([spec("1"), spec("1")], "twice"),
    ([spec("1"), spec("2", walltime_seconds=60)], "walltime_seconds"),
    ([spec("1"), spec("2", best_effort=True)], "best_effort"),
    ([spec("1"), spec("2", job_types=("idempotent",))], "job_types"),
    ([spec("1"), spec("2", directory="/other")], "directory"),
    ([spec("1", environment={"BAD-NAME": "x"})], "environment variable"),
    ([spec("1", "/bin/echo", "nul\0byte")], "NUL"),
    ([spec("1", resources="core=1,walltime=1:00:00")], "walltime"),
    ([spec("1", batch="../x")], "batch"),
])
def test_what_oar_cannot_run_is_refused(specs: list[JobSpec], reason: str) -> None:
    with pytest.raises(SubmissionRefused, match=reason):
        build(specs)


def test_oarsub_command_line() -> None:
    built = build([spec(key, directory="/w/odd dir", best_effort=True, properties="gpu='YES'", project="p",
                        job_types=("idempotent", "timesharing=user,*")) for key in ("1", "2")])
    argv, stdin = commands.submit(built, "grid'user")
    assert argv[:3] == ["sh", "-c", commands.SUBMIT] and stdin == built.script
    assert argv[4] == f"job_user = 'grid''user' AND job_name = '{built.name}'"
    assert argv[5:9] == ["", "/w", "cigri.100.sh", "cigri.100.params"]  # "": run as the account itself
    separator = argv.index("--")
    assert argv[9:separator] == ["'/w/odd dir' 1", "'/w/odd dir' 2"]
    assert argv[separator + 1:] == [
        "oarsub", "-n", built.name, "-l", "core=1,walltime=01:00:00", "-d", "/w", "-O", "/dev/null",
        "-E", "cigri.100.oar.stderr", "--array-param-file", "/w/cigri.100.params", "-p", "gpu='YES'",
        "--project", "p", "-t", "idempotent", "-t", "timesharing=user,*", "-t", "besteffort", "sh cigri.100.sh"]
    plain, _ = commands.submit(build([spec("1")]), "u")
    assert not {"-p", "--project", "-t"} & set(plain)
    as_alice, _ = commands.submit(built, "alice", "alice")
    assert as_alice[4] == f"job_user = 'alice' AND job_name = '{built.name}'" and as_alice[5] == "alice"


def test_rest_payload() -> None:
    """Launched from the login's home (the API copies its script there; a copy into /tmp, its own
    temporary directory, was refused), OAR's stderr in the job's directory's plain ancestor."""
    built = build([spec("1", directory="/w/odd dir", best_effort=True)])
    payload = rest.submit(built, "/home/u")
    assert payload == {"name": built.name, "resource": "core=1,walltime=01:00:00", "workdir": "/home/u",
                       "directory": "/home/u", "stdout": "/dev/null", "stderr": "/w/cigri.100.oar.stderr",
                       "type": ["besteffort"], "script": built.script, "param_file": "'/w/odd dir' 1\n"}
    assert rest.submit(build([spec("1", job_types=("idempotent", "timesharing=user,*"))]), "/h")["type"] == \
        ["idempotent", "timesharing=user,*"]
    for bad in ({"project": "$HOME"}, {"resources": "core=1\\"},
                {"job_types": ("idempotent", "x$(id)")}):
        with pytest.raises(SubmissionRefused, match="evaluate"):
            rest.submit(build([spec("1", **bad)]), "/h")
    with pytest.raises(SubmissionRefused, match="evaluate"):
        rest.submit(built, "/home/$USER")


# --- the state table ---------------------------------------------------------------------------

@pytest.mark.parametrize(("state", "neutral"), [
    ("Waiting", RemoteState.QUEUED), ("Hold", RemoteState.QUEUED), ("toLaunch", RemoteState.QUEUED),
    ("toAckReservation", RemoteState.QUEUED), ("Launching", RemoteState.QUEUED),
    ("Running", RemoteState.RUNNING), ("Finishing", RemoteState.RUNNING), ("Suspended", RemoteState.RUNNING),
    ("Resuming", RemoteState.RUNNING), ("toError", RemoteState.RUNNING),
    ("Terminated", RemoteState.COMPLETED), ("Error", RemoteState.COMPLETED),
])
def test_state_table(state: str, neutral: RemoteState) -> None:
    assert STATES[state] == neutral == remote_state(state)


def test_state_table_covers_every_oar_state() -> None:
    # the states OAR 2.5.9's oarstat knows (its %hashestat), less "NA"
    assert set(STATES) == {"Waiting", "toLaunch", "Launching", "Hold", "Running", "Terminated", "Error",
                           "toError", "Finishing", "Suspended", "Resuming", "toAckReservation"}
    with pytest.raises(ClusterBadAnswer, match="Zombie"):
        remote_state("Zombie")


@pytest.mark.parametrize(("events", "neutral"), [
    (["SCHEDULER_PRIORITY_UPDATED_START", "BESTEFFORT_KILL", "FRAG_JOB_REQUEST", "SEND_KILL_JOB",
      "SWITCH_INTO_ERROR_STATE"], RemoteState.PREEMPTED),
    (["FRAG_JOB_REQUEST", "WALLTIME", "SEND_KILL_JOB", "SWITCH_INTO_ERROR_STATE"], RemoteState.TIMEOUT),
    (["FRAG_JOB_REQUEST", "SWITCH_INTO_ERROR_STATE"], RemoteState.CANCELLED),
    (["FRAG_JOB_REQUEST"], RemoteState.CANCELLED),  # deleted while waiting: no kill needed
    (["WORKING_DIRECTORY"], RemoteState.COMPLETED),
    ([], RemoteState.COMPLETED),
])
def test_error_is_decided_by_events(events: list[str], neutral: RemoteState) -> None:
    assert remote_state("Error", events) == neutral
    assert remote_state("Terminated", events) == RemoteState.COMPLETED  # an ended job frag'ed later
    assert [event for event, _ in ERROR_EVENTS][0] == "BESTEFFORT_KILL"


@pytest.mark.parametrize(("raw", "code"), [
    (0, 0), (768, 3), ("16896", 66), (9, 137), (15, 143), (None, None), ("N", None), ("", None),
])
def test_exit_status_from_raw_wait_status(raw: object, code: int | None) -> None:
    assert exit_status(raw) == code


def test_remote_job_keeps_times_and_code_only_when_they_mean_something() -> None:
    ended = remote_job("5", "Error", ["FRAG_JOB_REQUEST"], 9, "node1", 100, 200)
    assert (ended.state, ended.exit_code, ended.node, ended.started_at, ended.finished_at) == \
        (RemoteState.CANCELLED, None, "node1", 100.0, 200.0)
    finishing = remote_job("5", "Finishing", [], None, "node1", 100, 200)
    assert (finishing.state, finishing.finished_at) == (RemoteState.RUNNING, None)
    waiting = remote_job("5", "Waiting", [], None, None, 0, 0)
    assert (waiting.started_at, waiting.finished_at, waiting.node) == (None, None, None)
    failed = remote_job("5", "Error", ["WORKING_DIRECTORY"], None, None, 100, 101)
    assert (failed.state, failed.exit_code) == (RemoteState.COMPLETED, None)


# --- oarsub/oarstat/oarnodes over SSH (outputs recorded on OAR 2.5.9) --------------------------

def test_parse_submitted_oarsub_output_and_adopted_jobs() -> None:
    keys = ["70010", "70011"]
    assert commands.parse_submitted(recorded("oar-ssh-oarsub.txt"), keys) == {"70010": "57", "70011": "58"}
    assert commands.parse_submitted(recorded("oar-ssh-adopt.json"), keys) == {"70010": "57", "70011": "58"}
    with pytest.raises(ClusterBadAnswer, match="3 jobs"):
        commands.parse_submitted(recorded("oar-ssh-oarsub.txt"), [*keys, "70012"])
    with pytest.raises(ClusterBadAnswer):
        commands.parse_submitted(recorded("oar-ssh-adopt.json"), ["70010", "other"])


def test_parse_poll_on_recorded_output() -> None:
    polled = commands.parse_poll(recorded("oar-ssh-poll.json"))
    jobs = polled.jobs
    assert {i: (j.state, j.exit_code) for i, j in jobs.items()} == {
        "57": (RemoteState.RUNNING, None), "58": (RemoteState.RUNNING, None), "59": (RemoteState.QUEUED, None),
        "34": (RemoteState.TIMEOUT, None), "37": (RemoteState.COMPLETED, 1), "41": (RemoteState.CANCELLED, None),
        "43": (RemoteState.COMPLETED, 0), "46": (RemoteState.PREEMPTED, None)}
    assert (jobs["37"].node, jobs["37"].started_at, jobs["37"].finished_at) == ("localhost", 1795427246.0, 1795427256.0)
    assert (jobs["59"].node, jobs["59"].started_at) == (None, None)
    # where each writes (its command says), for its owner
    assert polled.files["57"] == ("gridtest", "/tmp/cigri-clusters/exec/oar-record/cigri.70010")
    assert polled.files["43"] == ("gridtest", "/tmp/cigri-clusters/exec/oar-ssh-meta dir 'q' $(x) ;-1c329f/cigri.438f6b3c")
    assert commands.parse_poll("").jobs == {}
    with pytest.raises(ClusterBadAnswer):
        commands.parse_poll("Job id    S User\n")


def test_poll_and_cancel_command_lines() -> None:
    assert commands.poll_argv(["5", "6"]) == ["oarstat", "-J", "-f", "-j", "5", "-j", "6"]
    assert commands.cancel_argv(["5", "6"]) == ["oardel", "5", "6"]
    assert commands.terminate_argv(["5", "6"]) == ["oardel", "--signal", "SIGTERM", "5", "6"]
    # as oardel --signal answered for a running job, then for one that was not running
    assert commands.signalled("Signaling the job 57 with SIGTERM signal.\nDONE.\n"
                              "The job 57 was notified to signal itself with SIGTERM on localhost.\n")
    assert not commands.signalled("Signaling the job 58 with SIGTERM signal.\nERROR.\n")


def test_parse_capacity_on_recorded_output() -> None:
    assert commands.parse_capacity(recorded("oar-ssh-capacity.txt")) == Capacity(8, 6, 1, node_cores=8)
    assert commands.parse_capacity("\n0\n") == Capacity(0, 0, 0)
    assert commands.capacity_argv({"properties": "gpu='YES'"})[-2:] == ["--sql", "gpu='YES'"]
    with pytest.raises(ClusterBadAnswer):
        commands.parse_capacity("oarnodes: error\n")


def test_parse_capacity_node_size_is_alive_resources_per_host() -> None:
    """Recorded after adding host node-b with 4 cores to the test cluster's 8-core localhost:
    hosts of different sizes have no node size; resources not Alive are no part of a node."""
    two_hosts = recorded("oar-ssh-capacity-two-hosts.txt")
    assert commands.parse_capacity(two_hosts) == Capacity(12, 12, 0)
    resources_text, _, queued = two_hosts.rstrip("\n").rpartition("\n")
    resources = json.loads(resources_text)
    for resource in resources.values():
        if resource["network_address"] == "node-b":
            resource["state"] = "Absent"
    assert commands.parse_capacity(f"{json.dumps(resources)}\n{queued}\n") == Capacity(8, 8, 0, node_cores=8)


# --- oarapi (answers recorded from OAR 2.5.9's REST API) ----------------------------------------

def test_rest_submit_answer_and_adoption() -> None:
    assert rest.parse_submitted(recorded_json("oar-rest-submit.json"), ["71010", "71011"]) == \
        {"71010": "60", "71011": "61"}
    with pytest.raises(ClusterBadAnswer):
        rest.parse_submitted({"id": 3}, ["1"])
    recent = recorded_json("oar-rest-recent.json")
    name = next(job["name"] for job in recent["items"] if job["name"].startswith("cigri.7101."))
    assert rest.named(recent, name) == ["60", "61"]
    assert rest.named(recent, "cigri.7101.000000000000") == []
    assert rest.array_of(recorded_json("oar-rest-job.json")) == "20"
    assert rest.found_ids(recorded_json("oar-rest-array.json"), ["71010", "71011"]) == {"71010": "60", "71011": "61"}


def test_a_re_sent_batch_finds_its_jobs_while_they_launch() -> None:
    """oarapi's date filter (``from``) matches a job not yet started only while its start time is
    0, and a started one only once Running: a job OAR has scheduled (start time set) but not
    yet run (toLaunch, Launching) is in none of its cases. A batch re-sent then was submitted
    twice (seen in CI on the real oar-rest). The jobs that have not ended are asked by state."""
    by_state, by_date = rest.recent_jobs("alice", 10_000.0)
    assert "from" not in by_state[1]
    assert {"Waiting", "toLaunch", "Launching", "Running", "Finishing", "toError"} <= \
        set(by_state[1]["state"].split(","))
    assert by_date[1]["from"] == 10_000 - rest.ADOPT_WINDOW and by_date[1]["state"] == "Terminated,Error"
    with pytest.raises(ClusterBadAnswer, match="lacks"):
        rest.found_ids(recorded_json("oar-rest-array.json"), ["71010", "71012"])


@pytest.mark.parametrize(("answer", "words"), [
    ("oar-rest-submit-too-big.json", "(?s)status 8: .* not enough resources"),  # oarapi's 400
    ("oar-rest-submit-admission-refused.json", "status 254: .* unknown job type: bogus$"),  # its 500
])
def test_rest_oarsub_refusals_are_refusals_whatever_the_http_status(answer: str, words: str) -> None:
    with pytest.raises(SubmissionRefused, match=words):
        rest.parse_submitted(recorded_json(answer), ["1"])


def test_rest_other_server_errors_are_the_clusters() -> None:
    with pytest.raises(ClusterBadAnswer, match="oarapi failed: Cannot connect to the database"):
        rest.parse_submitted({"code": 500, "title": "Oar server error",
                              "message": "Cannot connect to the database"}, ["1"])


def test_rest_parse_poll_on_recorded_answer() -> None:
    jobs = rest.parse_poll(recorded_json("oar-rest-details.json"))
    assert {i: (j.state, j.exit_code) for i, j in jobs.items()} == {
        "15": (RemoteState.COMPLETED, 1), "19": (RemoteState.CANCELLED, None), "21": (RemoteState.COMPLETED, 0),
        "24": (RemoteState.PREEMPTED, None), "33": (RemoteState.TIMEOUT, None), "59": (RemoteState.QUEUED, None),
        "60": (RemoteState.QUEUED, None), "61": (RemoteState.QUEUED, None)}
    assert jobs["15"].node == "localhost" and jobs["60"].node is None  # only planned, not assigned
    assert rest.poll([str(i) for i in range(1, 1001)])[2] == \
        ("/jobs/details.json", {"ids": ":".join(str(i) for i in range(801, 1001)), "limit": 200})
    with pytest.raises(ClusterBadAnswer):
        rest.parse_poll({"code": 500})


def test_rest_output_tail_paths() -> None:
    job = recorded_json("oar-rest-job.json")
    assert rest.output_tail(job, "stderr", 5) == \
        "/media/tmp/cigri-clusters/exec/oar-rest-fail-cc24d0/cigri.bc15ae94.stderr?tail=5"
    odd = {**job, "command": "./oarapi.subscript.x '/a b' 1"}
    assert rest.output_tail(odd, "stderr", 5) is None  # the media API would split the path
    assert rest.output_tail({"code": 404}, "stderr", 5) is None


def test_rest_capacity_on_recorded_answers() -> None:
    answers = [recorded_json(f"oar-rest-{name}.json") for name in ("resources", "busy", "waiting")]
    assert rest.parse_capacity(*answers) == Capacity(8, 6, 3, node_cores=8)
    assert rest.parse_capacity(*answers, cluster_properties="host = 'localhost' AND cpu='0'") == \
        Capacity(8, 6, 3, node_cores=8)
    assert rest.parse_capacity(*answers, cluster_properties="(core = '1')").total_slots == 1
    assert rest.parse_capacity(*answers, cluster_properties="host = 'nowhere'") == Capacity(0, 0, 3)
    assert rest.parse_capacity(*answers, cluster_properties="core > 3").total_slots == 8  # not understood


def test_rest_capacity_node_size_is_alive_resources_per_host() -> None:
    """Recorded after adding host node-b with 4 cores to the test cluster's 8-core localhost
    (the busy and waiting answers are the other recording's: only the node size is read here)."""
    resources, busy, waiting = (recorded_json(f"oar-rest-{name}.json")
                                for name in ("resources-two-hosts", "busy", "waiting"))
    assert rest.parse_capacity(resources, busy, waiting).node_cores is None  # hosts of different sizes
    assert rest.parse_capacity(resources, busy, waiting, "host = 'node-b'").node_cores == 4
    assert rest.parse_capacity(resources, busy, waiting, "host = 'localhost'").node_cores == 8
    for resource in resources["items"]:
        if resource["network_address"] == "node-b":
            resource["state"] = "Suspected"
    assert rest.parse_capacity(resources, busy, waiting).node_cores == 8  # only Alive resources make a node


def test_rest_cancel_kills_only_what_runs_and_whole_arrays_at_once() -> None:
    assert rest.active_by_array(recorded_json("oar-rest-details.json")) == {"59": ["59"], "60": ["60", "61"]}
    assert rest.array_members("60") == ("/jobs.json", {"array": "60", "state": rest.CURRENT_STATES,
                                                       "limit": rest.UNBOUNDED})
    assert rest.ids(recorded_json("oar-rest-waiting.json")) == {"59"}
    assert (rest.cancel_array("60"), rest.cancel("61")) == ("/jobs/array/60/deletions/new.json", "/jobs/61.json")
    assert rest.running(recorded_json("oar-rest-details.json")) == []  # waiting jobs take no signal
    assert rest.running({"items": [{"id": 7, "state": "Running"}, {"id": 8, "state": "Waiting"}]}) == ["7"]
    assert rest.terminate("61") == "/jobs/61/signals/15.json"
