"""End to end: the real commands as subprocesses, real pool daemon, real jobs and signals.

Every test has its own ``CIGRI_HOME`` and a configuration with one local cluster of 4 slots
(see :class:`Cigri`). Assertions read the commands' ``--json`` outputs, the files the
jobs write, and, for "nothing changed", the database's row counts.
"""

from __future__ import annotations

import collections
import getpass
import json
import random
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from harness import COMMANDS, SLOTS, Cigri, process_alive, wait_for

# --- shared by the tests ------------------------------------------------------------------

ANSI = "\x1b["


def read_env_file(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def pid_files(directory: Path) -> dict[str, int]:
    """``{task name: pid}`` from the ``NAME.pid`` files the sleeping programs write."""
    result = {}
    for path in directory.glob("*.pid"):
        text = path.read_text().strip()
        if text:
            result[path.stem] = int(text)
    return result


SLEEPER = 'echo $$ > "$1.pid.tmp" && mv "$1.pid.tmp" "$1.pid"\nexec sleep "${2:-60}"\n'


# --- 1. a real campaign ------------------------------------------------------------------

@pytest.mark.slow
def test_every_parameter_of_a_200_task_campaign_runs_exactly_once(cigri: Cigri) -> None:
    program = cigri.script("task.sh", (
        '{ printf "name=%s\\n" "$CIGRI_JOB_NAME"; printf "args=%s\\n" "$*"; '
        'printf "campaign=%s\\n" "$CIGRI_CAMPAIGN_ID"; env | grep "^CIGRI_"; } > "$CIGRI_JOB_NAME.out"\n'
        'echo "$CIGRI_JOB_NAME" >> shared.log\n'))
    params = cigri.tmp / "params.txt"
    lines = [f"p{i} {i} x{i * 7}" for i in range(200)]
    params.write_text("# a comment, then one line per task\n\n" + "\n".join(lines) + "\n")
    jdl = cigri.jdl("big", param_file=str(params), exec_file=str(program), walltime="00:05:00")

    result = cigri.run("gridsub", "-f", str(jdl), "--wait", "--period", "0.05", "--json", timeout=90)
    campaign_id = int(json.loads(result.stdout)["campaign_id"])

    summary = cigri.stat(campaign_id)
    assert summary["state"] == "terminated"
    assert summary["tasks"]["terminated"] == summary["tasks"]["total"] == 200
    log = (cigri.work / "shared.log").read_text().splitlines()
    assert len(log) == 200 and set(log) == {f"p{i}" for i in range(200)}
    outputs = sorted(cigri.work.glob("*.out"))
    assert len(outputs) == 200
    jobs = {t["name"]: t["jobs"] for t in cigri.tasks(campaign_id)}
    for i, line in enumerate(lines):
        out = read_env_file(cigri.work / f"p{i}.out")
        assert out["name"] == f"p{i}"
        assert out["args"] == line
        assert out["campaign"] == out["CIGRI_CAMPAIGNID"] == str(campaign_id)
        assert [j["id"] for j in jobs[f"p{i}"]] == [int(out["CIGRI_JOB_ID"])]
        assert out["CIGRI_USER"] == getpass.getuser()
        assert out["CIGRI_WORKDIR"] == str(cigri.work)
        assert out["CIGRI_RESOURCES"] == "core=1"
        assert out["CIGRI_WALLTIME"] == "00:05:00"
        assert out["CIGRI_WALLTIME_SECONDS"] == "300"


# --- 2. parameters are arguments, never shell code ---------------------------------------

def test_parameters_reach_the_program_as_literal_arguments(cigri: Cigri) -> None:
    program = cigri.script("argv.sh", 'for a in "$@"; do printf "%s\\000" "$a"; done > "$1.argv"\n')
    lines = [
        "t1 a;b ; touch PWNED",
        "t2 $(touch PWNED) $(id)",
        "t3 `touch PWNED`",
        "t4 'single quoted' \"double quoted\" 'a;touch PWNED'",
        "t5 * ?.out [a-z]* ~ $HOME ${PATH}",
        "t6 x&&touch PWNED && touch PWNED",
        "t7 a|touch PWNED | touch PWNED",
        "t8 \"it's\" 'say \"hi\"' > PWNED",
        "t9 back\\slash a\\ b \"$(touch PWNED)\" '`touch PWNED`'",
        "t10 \"\" '' x",
    ]
    params = cigri.tmp / "evil.txt"
    params.write_text("\n".join(lines) + "\n")
    jdl = cigri.jdl("evil", param_file=str(params), exec_file=str(program))
    cigri.run("gridsub", "-f", str(jdl), "--wait", "--period", "0.05", timeout=60)

    for line in lines:
        name = line.split()[0]
        argv = (cigri.work / f"{name}.argv").read_bytes().decode().split("\0")[:-1]
        assert argv == shlex.split(line), line
    assert not list(cigri.tmp.rglob("PWNED"))
    assert not (Path.cwd() / "PWNED").exists()


# --- 3. test mode ------------------------------------------------------------------------

@pytest.mark.slow
def test_test_mode_runs_one_job_at_a_time_and_goes_first(cigri: Cigri) -> None:
    program = cigri.script("serial.sh", 'echo "start $1" >> "$2.log"\nsleep 0.2\necho "end $1" >> "$2.log"\n')
    normal = cigri.submit(cigri.jdl("normal", exec_file=str(program),
                                    params=[f"n{i} normal" for i in range(6)]))
    tested = cigri.submit(cigri.jdl("tested", exec_file=str(program), test_mode="true",
                                    params=[f"t{i} tested" for i in range(5)]))
    cigri.cycle()
    first = [j["id"] for t in cigri.tasks(tested) for j in t["jobs"]]
    others = [j["id"] for t in cigri.tasks(normal) for j in t["jobs"]]
    assert len(first) == 1 and others, (first, others)
    assert first[0] < min(others), "the test-mode campaign submitted later must be scheduled first"

    def one_at_a_time(summary: dict[str, Any]) -> None:
        assert summary["tasks"]["running"] + summary["tasks"]["waiting"] <= 1, summary

    summary = cigri.drain(tested, timeout=40, check=one_at_a_time)
    assert summary["state"] == "terminated" and summary["tasks"]["terminated"] == 5
    # The programs' own log proves that no two of them ever overlapped.
    log = (cigri.work / "tested.log").read_text().splitlines()
    assert len(log) == 10
    for start, end in zip(log[::2], log[1::2]):
        assert start.startswith("start ") and end == "end " + start.split()[1], log


# --- 4. failures become events -----------------------------------------------------------

def test_failing_tasks_raise_events_with_their_stderr_and_the_campaign_ends(cigri: Cigri) -> None:
    program = cigri.script("fail.sh", 'if [ "$3" = fail ]; then echo "boom $2" >&2; exit 3; fi\necho fine\n')
    params = [f"t{i} {i} {'fail' if i % 2 else 'ok'}" for i in range(6)]
    jdl = cigri.jdl("failing", exec_file=str(program), params=params)
    result = cigri.run("gridsub", "-f", str(jdl), "--wait", "--period", "0.05", expect=1, timeout=60)
    campaign_id = int(result.stdout.split("=")[-1])

    summary = cigri.stat(campaign_id)
    assert summary["state"] == "failed"
    assert summary["tasks"]["failed"] == 3 and summary["tasks"]["terminated"] == 3
    [event] = cigri.events(campaign_id)  # one failure, on three inputs: one group of three
    assert summary["open_events"] == 1
    assert (event["code"], event["cluster"], event["count"], event["summary"]) == ("EXIT_ERROR", "local", 3, "boom <n>")
    failed_jobs = {j["id"]: t["name"] for t in cigri.tasks(campaign_id) if t["state"] == "failed" for j in t["jobs"]}
    assert sorted(x["job_id"] for x in event["examples"]) == sorted(failed_jobs)
    for example in event["examples"]:
        assert example["task"] == failed_jobs[example["job_id"]] and example["line"] == f"boom {example['task'][1:]}"
    assert f"boom {failed_jobs[event['job_id']][1:]}" in event["stderr_tail"]


def test_a_prologue_failing_everywhere_fails_the_tasks_and_a_fix_runs_it_again(cigri: Cigri) -> None:
    """The prologue fails once (a file system away, say): the campaign's tasks fail with a
    PROLOGUE_FAILED event; ``gridevents --fix --resubmit`` runs the prologue again on its
    cluster and puts the tasks back, and the campaign ends with every task done once."""
    marker, ran = cigri.work / "prologue-tried", cigri.work / "ran"
    program = cigri.script("record.sh", f'echo "$1" >> {ran}\n')
    jdl = cigri.jdl("staged", exec_file=str(program), params=["t0", "t1", "t2"],
                    prologue=[f"test -e {marker} || {{ touch {marker}; echo staging failed >&2; exit 4; }}"])
    result = cigri.run("gridsub", "-f", str(jdl), "--wait", "--period", "0.05", expect=1, timeout=60)
    campaign_id = int(result.stdout.split("=")[-1])
    summary = cigri.stat(campaign_id)
    assert (summary["state"], summary["tasks"]["failed"]) == ("failed", 3)
    [event] = cigri.events(campaign_id)
    assert event["code"] == "PROLOGUE_FAILED" and "exit status 4" in event["message"]
    fixed = cigri.json("gridevents", "-e", str(event["id"]), "--fix", "--resubmit")
    assert (fixed["closed"], fixed["resubmitted"]) == (1, 3)
    summary = cigri.drain(campaign_id)
    assert (summary["state"], summary["tasks"]["terminated"]) == ("terminated", 3)
    assert sorted(ran.read_text().split()) == ["t0", "t1", "t2"]
    assert cigri.events(campaign_id) == []


# --- 5. exit status 66 -------------------------------------------------------------------

def test_exit_status_66_resubmits_the_task_and_endless_resubmission_stops(cigri: Cigri) -> None:
    # "once" asks for one more run, whose second attempt outlives several cycles: the first
    # attempt's ending, already decided, must not put the task back in the bag meanwhile.
    # "forever" always asks again (67) and must stop after max_resubmit (4) with one event.
    program = cigri.script("again.sh", '[ "$1" = forever ] && exit 67\n'
                                       'if [ ! -e "$1.marker" ]; then : > "$1.marker"; exit 66; fi\n'
                                       'echo "$1" >> runs.log\nsleep 1\n')
    # finalize=false: a replica of the tail task would add a third (killed) job to "once".
    jdl = cigri.jdl("again", exec_file=str(program), params=["once", "forever"], finalize="false")
    result = cigri.run("gridsub", "-f", str(jdl), "--wait", "--period", "0.05", "--json", expect=1)
    campaign_id = json.loads(result.stdout)["campaign_id"]

    once, forever = cigri.tasks(campaign_id)
    assert once["state"] == "terminated" and once["attempts"] == 2
    assert [(j["state"], j["exit_code"]) for j in once["jobs"]] == [("resubmit", 66), ("terminated", 0)]
    assert (cigri.work / "runs.log").read_text() == "once\n"
    assert forever["state"] == "failed" and forever["attempts"] == 5  # 1 + cigri.max_resubmit
    assert [(j["state"], j["exit_code"]) for j in forever["jobs"]] == [("resubmit", 67)] * 5
    assert [(e["code"], e["task_id"]) for e in cigri.events(campaign_id)] == [("TOO_MANY_RESUBMIT", forever["id"])]


# --- 6. cancelling kills -----------------------------------------------------------------

@pytest.mark.slow
def test_griddel_kills_one_job_then_the_whole_campaign(cigri: Cigri) -> None:
    program = cigri.script("sleeper.sh", SLEEPER)
    campaign_id = cigri.submit(cigri.jdl("sleepy", exec_file=str(program),
                                         params=[f"s{i}" for i in range(SLOTS + 2)]))
    cigri.cycle()
    jobs = {t["name"]: t["jobs"] for t in cigri.tasks(campaign_id) if t["jobs"]}
    assert len(jobs) >= 2
    wait_for(lambda: set(pid_files(cigri.work)) >= set(jobs), 10, "the first jobs to start")
    pids = pid_files(cigri.work)

    # One job only: its process dies, its task is cancelled, the others run on.
    victim = sorted(jobs)[0]
    cigri.run("griddel", "-j", str(jobs[victim][0]["id"]))
    cigri.cycle()
    wait_for(lambda: not process_alive(pids[victim]), 5, f"job {victim} to die")
    assert all(process_alive(pid) for name, pid in pids.items() if name != victim)
    tasks = {t["name"]: t for t in cigri.tasks(campaign_id)}
    assert tasks[victim]["state"] == "cancelled"
    assert [j["state"] for j in tasks[victim]["jobs"]] == ["cancelled"]
    assert all(t["state"] != "cancelled" for name, t in tasks.items() if name != victim)

    # Then the whole campaign: every process goes, whatever started meanwhile.
    cigri.run("griddel", str(campaign_id))
    cigri.cycle()
    pids = pid_files(cigri.work)
    wait_for(lambda: not any(process_alive(pid) for pid in pids.values()), 5, "every job to die")
    summary = cigri.stat(campaign_id)
    assert summary["state"] == "cancelled"
    assert summary["tasks"]["cancelled"] == summary["tasks"]["total"] == SLOTS + 2
    time.sleep(0.5)
    assert not any(process_alive(pid) for pid in pid_files(cigri.work).values()), "a job started after the cancel"


def test_an_admin_blacklist_drains_the_cluster_its_jobs_end_and_the_campaign_with_them(cigri: Cigri) -> None:
    """Blacklisting a cluster stops new jobs there; the ones running go on, are still followed
    (their ends recorded, the campaign finished) and can still be killed."""
    program = cigri.script("sleeper.sh", SLEEPER)
    short = cigri.submit(cigri.jdl("short", exec_file=str(program), params=["a 1", "b 1", "c 1", "d 1", "e 1"]))
    cigri.cycle()
    started = {t["name"] for t in cigri.tasks(short) if t["jobs"]}
    assert len(started) == 3  # tap_initial
    cigri.run("cigri", "cluster", "blacklist", "local")
    wait_for(lambda: (cigri.cycle(), cigri.stat(short)["tasks"]["terminated"] == 3)[1], 15, "the 3 jobs' ends")
    assert cigri.stat(short)["tasks"]["pending"] == 2  # nothing new started on the drained cluster
    long = cigri.submit(cigri.jdl("long", exec_file=str(program), params=["x 60"]))
    cigri.run("cigri", "cluster", "unblacklist", "local")
    wait_for(lambda: (cigri.cycle(), cigri.stat(short)["state"] == "terminated"
                      and cigri.stat(long)["tasks"]["running"] == 1)[1], 15, "the rest to run")
    cigri.run("cigri", "cluster", "blacklist", "local")
    pid = pid_files(cigri.work)["x"]
    cigri.run("griddel", str(long))
    cigri.cycle()
    wait_for(lambda: not process_alive(pid), 5, "the killed job to die")
    assert cigri.stat(long)["state"] == "cancelled"


# --- 7. walltime -------------------------------------------------------------------------

@pytest.mark.slow
def test_walltime_kills_the_job_and_fails_the_task(cigri: Cigri) -> None:
    program = cigri.script("long.sh", SLEEPER)
    jdl = cigri.jdl("long", exec_file=str(program), walltime=2, params=["w 30"])
    result = cigri.run("gridsub", "-f", str(jdl), "--wait", "--period", "0.05", "--json", expect=1, timeout=30)
    campaign_id = json.loads(result.stdout)["campaign_id"]
    [event] = cigri.events(campaign_id)
    assert event["code"] == "WALLTIME"
    [task] = cigri.tasks(campaign_id)
    assert task["state"] == "failed" and task["jobs"][0]["state"] == "timeout"
    assert task["jobs"][0]["finished_at"] - task["jobs"][0]["started_at"] < 10
    pid = pid_files(cigri.work)["w"]
    wait_for(lambda: not process_alive(pid), 3, "the timed-out process to be gone")


# --- 8. crash safety ---------------------------------------------------------------------

@pytest.mark.slow
def test_killing_the_daemon_loses_no_task_and_runs_none_twice(cigri: Cigri) -> None:
    program = cigri.script("append.sh", 'echo "$1" >> shared.log\nsleep 0.05\n')
    names = [f"k{i}" for i in range(150)]
    campaign_id = cigri.submit(cigri.jdl("crashy", exec_file=str(program), params=names))
    seed = random.randrange(1 << 32)
    rng = random.Random(seed)
    lock = cigri.home / "cycle.lock"
    for _ in range(5):
        daemon = cigri.start_daemon()
        # Kill mid-work: once the daemon's first cycle has taken the lock, at a random moment.
        wait_for(lambda: lock.exists() and lock.read_text().strip() == str(daemon.pid), 15,
                 "the daemon's first cycle")
        time.sleep(rng.uniform(0.1, 0.7))
        daemon.send_signal(signal.SIGKILL)
        daemon.wait(10)
    summary = cigri.drain(campaign_id, timeout=60)

    assert summary["state"] == "terminated", f"seed {seed}"
    assert summary["tasks"]["terminated"] == 150, f"seed {seed}: {summary}"
    counts = collections.Counter((cigri.work / "shared.log").read_text().splitlines())
    assert set(counts) == set(names), f"seed {seed}"
    assert [n for n, c in counts.items() if c != 1] == [], f"seed {seed}: tasks run twice"
    assert all(t["attempts"] == 1 and len(t["jobs"]) == 1 for t in cigri.tasks(campaign_id)), f"seed {seed}"


# --- 9. invalid JDLs ---------------------------------------------------------------------

@pytest.mark.slow
def test_invalid_jdls_are_rejected_with_one_line_per_problem_and_nothing_written(cigri: Cigri) -> None:
    cigri.submit(cigri.jdl("valid", exec_file="/bin/true", nb_jobs=3))
    before, counts = cigri.json("gridstat", "-a"), cigri.db_counts()
    bad_params = cigri.tmp / "bad-params.txt"
    bad_params.write_text("ok 1\nbroken 'unclosed\n")
    cases = {
        "unknown-cluster": ({"name": "x", "clusters": {"nowhere": {}}, "nb_jobs": 3},
                            ["$.clusters.nowhere: unknown cluster", "$.clusters.nowhere: missing mandatory key"]),
        "schema": ({"name": "x", "clusters": {"local": {"exec_file": "/bin/true", "walltime": "soon"}},
                    "nb_jobs": 3, "priority": "high"},  # (an unknown key is ignored with a warning, as CiGri)
                   ["$.clusters.local.walltime:", "$.priority:"]),
        "bad-param-line": ({"name": "x", "clusters": {"local": {}}, "exec_file": "/bin/true",
                            "param_file": str(bad_params)}, [f"{bad_params}:2:"]),
        "not-json": ("{\"name\": ", ["not valid JSON"]),
    }
    for label, (document, expected) in cases.items():
        path = cigri.tmp / f"{label}.json"
        path.write_text(document if isinstance(document, str) else json.dumps(document))
        result = cigri.run("gridsub", "-f", str(path), expect=2)
        lines = result.stderr.splitlines()
        assert len(lines) == len(expected), (label, lines)
        for line, fragment in zip(lines, expected):
            assert line.startswith("gridsub: ") and fragment in line, (label, line)
        assert "Traceback" not in result.stderr and result.stdout == ""
        assert cigri.db_counts() == counts, label
    assert cigri.json("gridstat", "-a") == before


# --- 10. command-line basics -------------------------------------------------------------

@pytest.mark.slow
def test_usage_errors_versions_and_clusters(cigri: Cigri) -> None:
    result = cigri.run("gridsub", expect=2)
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    result = cigri.run("gridstat", "-c", "999", expect=1)
    assert result.stderr.splitlines() == ["gridstat: campaign 999: no such campaign"]
    for command in COMMANDS:
        result = cigri.run(command, "--version")
        assert result.stdout.startswith(f"{command} (cigri) "), result.stdout
    [cluster] = cigri.json("gridclusters")
    assert cluster["name"] == "local" and cluster["total_slots"] == SLOTS
    assert cluster["free_slots"] == SLOTS and not cluster["blacklisted"] and cluster["error"] is None
    assert cluster["free_memory_mb"] is None  # the local pool does not reserve memory


@pytest.mark.slow
def test_plain_output_without_a_terminal_has_no_escape_codes(cigri: Cigri) -> None:
    program = cigri.script("noisy.sh", 'echo "out $1"; echo "err $1" >&2; exit 1\n')
    submitted = cigri.run("gridsub", "-f", str(cigri.jdl("plain", exec_file=str(program), params=["a", "b"])),
                          "--wait", "--period", "0.05", expect=1)
    campaign_id = submitted.stdout.split("CAMPAIGN_ID=")[1].strip()
    outputs = [submitted,
               cigri.run("gridstat", "-a"), cigri.run("gridstat", "-c", campaign_id),
               cigri.run("gridstat", "-c", campaign_id, "-f"), cigri.run("gridevents", "-c", campaign_id),
               cigri.run("gridclusters"), cigri.run("gridstat", "--no-such-option", expect=2)]
    for result in outputs:
        assert ANSI not in result.stdout and ANSI not in result.stderr, result.args
    assert "err a" in outputs[4].stdout  # the event table shows the stderr tail


def test_a_second_cycle_is_refused_while_one_holds_the_lock(cigri: Cigri) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, os, sys\n"
         "os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True)\n"
         "f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX); f.truncate(0); f.write(str(os.getpid()))\n"
         "f.flush(); print('locked', flush=True); sys.stdin.read()\n",
         str(cigri.home / "cycle.lock")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        result = cigri.run("cigri", "cycle", expect=1)
        assert result.stderr.splitlines() == [
            f"cigri: another cycle is running (pid {holder.pid}); not starting a second one"]
    finally:
        holder.communicate("", timeout=10)
    cigri.cycle()  # the lock is free again


@pytest.mark.slow
def test_pause_stops_new_jobs_resume_restarts_and_more_parameters_can_be_added(cigri: Cigri) -> None:
    program = cigri.script("log.sh", 'echo "$1" >> shared.log\n')
    campaign_id = cigri.submit(cigri.jdl("pausable", exec_file=str(program), params=[f"a{i}" for i in range(10)]))
    cigri.cycle()
    cigri.run("griddel", "-p", str(campaign_id))
    started = 10 - cigri.stat(campaign_id)["tasks"]["pending"]
    assert 0 < started < 10
    cigri.cycle()
    cigri.cycle()
    summary = cigri.stat(campaign_id)
    assert summary["state"] == "paused"
    assert summary["tasks"]["pending"] == 10 - started, "a paused campaign started new jobs"
    log = cigri.work / "shared.log"  # while the jobs already sent went on
    wait_for(lambda: log.exists() and len(log.read_text().splitlines()) == started, 10, "the jobs sent before")

    cigri.run("griddel", "-r", str(campaign_id))
    summary = cigri.drain(campaign_id)
    assert summary["state"] == "terminated" and summary["tasks"]["terminated"] == 10

    # More parameters reopen the terminated campaign; --wait follows it to its new end.
    more = cigri.tmp / "more.txt"
    more.write_text("b1\nb2 with args\nb3\n")
    result = cigri.run("gridsub", "-c", str(campaign_id), "-F", str(more), "--json", "--wait", "--period", "0.05")
    assert json.loads(result.stdout) == {"campaign_id": campaign_id, "tasks": 3}
    summary = cigri.stat(campaign_id)
    assert summary["state"] == "terminated" and summary["tasks"]["terminated"] == summary["tasks"]["total"] == 13
    ran = log.read_text().splitlines()
    assert sorted(ran) == sorted([f"a{i}" for i in range(10)] + ["b1", "b2", "b3"])
