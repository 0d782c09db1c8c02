"""Every command fails in one line: expected errors, database errors and bugs alike.

The unexpected error is real: a cluster row whose options are not JSON (a database edited by
hand) makes ``cigri cluster list`` raise a ``JSONDecodeError`` nobody planned for.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess

import pytest
from harness import BIN, Cigri, wait_for


def _break_a_cluster_row(cigri: Cigri) -> None:
    cigri.run("cigri", "db", "init")
    conn = sqlite3.connect(cigri.home / "cigri.db")
    with conn:
        conn.execute("INSERT INTO clusters(name, backend, options, source) VALUES ('hand', 'local', '{oops', 'admin')")
    conn.close()


def test_an_unexpected_error_is_one_line_and_exit_1(cigri: Cigri) -> None:
    _break_a_cluster_row(cigri)
    result = cigri.run("cigri", "cluster", "list", expect=1)
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("cigri: internal error: JSONDecodeError: ")
    assert line.endswith("; set CIGRI_DEBUG=1 for the traceback")


def test_cigri_debug_shows_the_traceback(cigri: Cigri) -> None:
    _break_a_cluster_row(cigri)
    cigri.env["CIGRI_DEBUG"] = "1"
    result = cigri.run("cigri", "cluster", "list", expect=1)
    assert "Traceback (most recent call last)" in result.stderr
    assert "JSONDecodeError: Expecting property name" in result.stderr
    assert "internal error" not in result.stderr


def test_an_expected_error_keeps_its_own_line_and_status(cigri: Cigri) -> None:
    result = cigri.run("gridsub", "-f", str(cigri.tmp / "missing.json"), expect=2)
    assert result.stderr.splitlines() == [f"gridsub: {cigri.tmp / 'missing.json'}: No such file or directory"]
    cigri.env["CIGRI_CYCLE_PERIOD"] = "soon"
    result = cigri.run("gridstat", expect=2)
    assert result.stderr.splitlines() == ["gridstat: CIGRI_CYCLE_PERIOD: expected float, got 'soon'"]


def test_a_non_finite_environment_value_is_refused_before_anything_is_written(cigri: Cigri) -> None:
    """nan in the tap factor once made every cycle fail converting the tap to an integer."""
    cigri.env.update(CIGRI_RUNNER_JOB_RATIO="cigri_tap", CIGRI_RUNNER_TAP_FACTOR="nan")
    result = cigri.run("cigri", "cycle", expect=2)
    assert result.stderr.splitlines() == ["cigri: CIGRI_RUNNER_TAP_FACTOR: expected a finite number, got nan"]
    assert not cigri.home.exists()


def test_a_configuration_file_not_in_utf8_is_one_line_naming_it(cigri: Cigri) -> None:
    cigri.config.write_bytes(b"# Param\xe8tres\n[cigri]\ncycle_period = 30\n")  # a Latin-1 comment
    result = cigri.run("gridstat", expect=2)
    assert result.stderr.splitlines() == [f"gridstat: {cigri.config}: not UTF-8 (byte 0xe8 at offset 7)"]
    assert not cigri.home.exists()
    [check] = json.loads(cigri.run("cigri", "doctor", "--json", expect=1).stdout)
    assert check == {"what": "configuration", "ok": False, "detail": f"{cigri.config}: not UTF-8 (byte 0xe8 at offset 7)"}


def test_a_cluster_missing_what_its_transport_needs_is_not_added(cigri: Cigri) -> None:
    """It used to be added, then every cycle failed to open it until it was blacklisted."""
    cigri.run("cigri", "db", "init")
    result = cigri.run("cigri", "cluster", "add", "foo", "--backend", "slurm", "-o", "transport=rest",
                       "-o", "base_url=notaurl", expect=2)
    assert result.stderr.splitlines() == [
        "cigri: clusters.foo.base_url: expected an http:// or https:// URL, got 'notaurl'"]
    result = cigri.run("cigri", "cluster", "add", "foo", "--backend", "slurm", "-o", "transport=rest",
                       "-o", "base_url=https://slurm:6820", "-o", "user=u", expect=2)
    assert result.stderr.splitlines() == [
        "cigri: clusters.foo.token_file: required with backend 'slurm' and transport 'rest'"]
    result = cigri.run("cigri", "cluster", "add", "foo", "--backend", "sim", "-o", "cores=0", expect=2)
    assert result.stderr.splitlines() == ["cigri: clusters.foo.cores: a sim cluster needs at least one core"]
    assert [c["name"] for c in cigri.json("cigri", "cluster", "list")] == ["local"]


def test_a_directory_that_cannot_be_created_is_one_line_naming_it(cigri: Cigri) -> None:
    """Like a database error, a home, spool or log directory in the way is the environment, not a bug."""
    cigri.home.mkdir()
    (cigri.home / "spool").write_text("")  # a regular file where the spool goes
    result = cigri.run("gridstat", expect=1)
    assert result.stderr.splitlines() == [f"gridstat: cannot create directory {cigri.home / 'spool'}: File exists"]
    (cigri.tmp / "file").write_text("")
    result = cigri.run("cigri", "--home", str(cigri.tmp / "file" / "home"), "db", "init", expect=1)
    assert result.stderr.splitlines() == [f"cigri: cannot create directory {cigri.tmp / 'file' / 'home'}: Not a directory"]
    assert not (cigri.home / "cigri.db").exists()


def test_a_database_error_is_one_line(cigri: Cigri) -> None:
    cigri.run("cigri", "db", "init")
    (cigri.home / "cigri.db").write_bytes(b"this is not a database file, not at all" * 100)
    result = cigri.run("gridstat", expect=1)
    [line] = result.stderr.splitlines()
    assert line.startswith("gridstat: database ") and "file is not a database" in line, line


def test_ctrl_c_exits_130_without_a_traceback(cigri: Cigri) -> None:
    program = cigri.script("sleep.sh", ": > started\nexec sleep 30\n")
    jdl = cigri.jdl("interrupted", exec_file=str(program), params=["a"])
    env = {k: v for k, v in cigri.env.items() if k != "PYTHONUNBUFFERED"}  # a pipe buffers what is printed
    with open(cigri.tmp / "wait.err", "w+") as err:
        proc = subprocess.Popen([str(BIN / "gridsub"), "-f", str(jdl), "--wait", "--period", "0.05"],
                                env=env, cwd=cigri.tmp, stdout=subprocess.PIPE, stderr=err, text=True)
        assert proc.stdout is not None and proc.stdout.readline() == "Campaign successfully submitted\n"
        assert proc.stdout.readline().startswith("CAMPAIGN_ID=")  # while --wait waits: a script has it now
        wait_for((cigri.work / "started").exists, 60, "the task to start")  # gridsub is in its wait loop
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 130
        err.seek(0)
        assert "Traceback" not in err.read()


def test_json_logs_and_the_log_level_of_cycles(cigri: Cigri) -> None:
    cigri.env.update(CIGRI_LOG_FORMAT="json", CIGRI_LOG_LEVEL="debug")
    result = cigri.run("cigri", "-v", "cycle")
    entries = [json.loads(line) for line in result.stderr.splitlines()]
    assert entries and all({"time", "level", "logger", "message", "pid"} <= set(e) for e in entries)
    assert any(e["logger"] == "cigri.cycle" and e["message"].startswith("cycle: ") for e in entries)
    log = cigri.home / "log" / "cigri.log"
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert any(e["level"] == "info" for e in logged)

    cigri.env.update(CIGRI_LOG_FORMAT="text", CIGRI_LOG_LEVEL="error")
    before = log.read_text()
    cigri.run("cigri", "cycle")
    assert log.read_text() == before, "an INFO line reached a log at level error"
    cigri.env["CIGRI_LOG_LEVEL"] = "loud"
    result = cigri.run("cigri", "cycle", expect=2)
    assert result.stderr.splitlines() == [
        "cigri: cigri.log_level: expected one of debug, info, warning, error, got 'loud'"]


def test_the_daemon_survives_a_failing_cycle(cigri: Cigri) -> None:
    _break_a_cluster_row(cigri)  # every cycle now fails while gathering the clusters' capacity
    daemon = cigri.start_daemon(period=0.05)
    log = cigri.home / "log" / "cigri.log"
    wait_for(lambda: log.exists() and log.read_text().count("cycle failed") >= 2, 20, "two failed cycles")
    assert daemon.poll() is None, cigri.daemon_log(daemon)
    assert "Traceback" in log.read_text()


def test_a_failing_cron_cycle_is_logged_with_its_traceback_in_the_file_only(cigri: Cigri) -> None:
    """README, Operations: cigri cycle logs to the file as the daemon does; stderr stays brief."""
    _break_a_cluster_row(cigri)
    result = cigri.run("cigri", "cycle", expect=1)
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1].startswith("cigri: internal error: JSONDecodeError: ")
    logged = (cigri.home / "log" / "cigri.log").read_text()
    assert "cigri.cycle ERROR cycle failed\nTraceback (most recent call last)" in logged
    assert "JSONDecodeError: Expecting property name" in logged


@pytest.mark.parametrize("period", ["0", "-1", "nan", "inf"])
def test_a_bad_daemon_period_is_one_line_naming_the_flag(cigri: Cigri, period: str) -> None:
    result = cigri.run("cigri", "daemon", "--period", period, "--cycles", "1", expect=2)
    assert result.stderr.splitlines() == ["cigri: --period: must be > 0 and finite"]


@pytest.mark.parametrize(("argv", "line"), [
    (["daemon", "--cycles", "-1"], "--cycles: must be >= 1"),  # ran nothing and exited 0
    (["daemon", "--cycles", "0"], "--cycles: must be >= 1"),
    (["cluster", "test", "local", "--timeout", "-5"], "--timeout: must be > 0 and finite"),  # submitted a job first
    (["cluster", "test", "local", "--timeout", "nan"], "--timeout: must be > 0 and finite"),
    (["--home", "", "db", "path"], "--home: must not be empty"),  # read as the current directory
])
def test_a_bad_argument_is_refused_before_anything_is_done(cigri: Cigri, argv: list[str], line: str) -> None:
    result = cigri.run("cigri", *argv, expect=2)
    assert result.stderr.splitlines() == [f"cigri: {line}"]
    assert result.stdout == ""
    assert not cigri.home.exists()


def test_an_empty_cigri_home_is_refused(cigri: Cigri) -> None:
    """An empty variable (a typo'd $VAR) used to mean the default home without a word."""
    cigri.env["CIGRI_HOME"] = ""
    result = cigri.run("gridstat", expect=2)
    assert result.stderr.splitlines() == ["gridstat: CIGRI_HOME: must not be empty (unset it for the default)"]


def test_several_jdls_are_all_submitted_or_none(cigri: Cigri) -> None:
    ok = cigri.jdl("ok", exec_file="/bin/true", params=["a", "b"])
    bad = cigri.tmp / "bad.json"
    bad.write_text('{"name": "x",')
    cigri.run("cigri", "db", "init")
    counts = cigri.db_counts()
    result = cigri.run("gridsub", "-f", str(ok), "-f", str(bad), expect=2)
    assert result.stderr.splitlines() == [f"gridsub: {bad}: not valid JSON: Expecting property name enclosed in "
                                          "double quotes at line 1 column 14"]
    assert cigri.db_counts() == counts
    result = cigri.run("gridsub", "-f", "-", "-f", "-", expect=2, stdin=ok.read_text())
    assert result.stderr.splitlines() == ["gridsub: -f -: stdin can be given only once"]
    empty = cigri.jdl("empty", exec_file="/bin/true", params=[])  # found while storing: undoes the first
    cigri.run("gridsub", "-f", str(ok), "-f", str(empty), expect=2)
    assert cigri.db_counts() == counts
    result = cigri.run("gridsub", "-f", str(ok), "-f", "-", stdin=ok.read_text())
    assert result.stdout.splitlines() == ["Campaign successfully submitted", "CAMPAIGN_ID=1",
                                          "Campaign successfully submitted", "CAMPAIGN_ID=2"]


def test_griddel_acts_on_every_id_and_reports_each(cigri: Cigri) -> None:
    jdl = cigri.jdl("three", exec_file="/bin/true", params=["a"])
    first, second = cigri.submit(jdl), cigri.submit(jdl)
    result = cigri.run("griddel", "-p", str(first), "999", str(second), expect=1)
    assert result.stdout.splitlines() == [f"Campaign {first}: paused", f"Campaign {second}: paused"]
    assert result.stderr.splitlines() == ["griddel: campaign 999: no such campaign"]
    result = cigri.run("griddel", "-r", str(first), str(first), str(second), expect=1)
    assert result.stdout.splitlines() == [f"Campaign {first}: resumed", f"Campaign {second}: resumed"]
    assert result.stderr.splitlines() == [f"griddel: campaign {first} is in_treatment, not paused"]
    result = cigri.run("griddel", "-j", "7", str(first), "999", str(second), expect=1)
    assert result.stdout.splitlines() == [f"Campaign {first}: cancelled", f"Campaign {second}: cancelled"]
    assert result.stderr.splitlines() == ["griddel: job 7: no such job", "griddel: campaign 999: no such campaign"]
    assert {cigri.campaign_state(first), cigri.campaign_state(second)} == {"cancelled"}


@pytest.mark.parametrize("args", [["-a"], ["-c", "1", "-f"], ["-a", "--json"]])
def test_a_reader_that_left_ends_the_command_quietly_with_141(cigri: Cigri, args: list[str]) -> None:
    cigri.submit(cigri.jdl("piped", exec_file="/bin/true", nb_jobs=100))
    read_end, write_end = os.pipe()
    os.close(read_end)  # as `gridstat | head -0` once head has exited
    try:
        result = subprocess.run([str(BIN / "gridstat"), *args], env=cigri.env, cwd=cigri.tmp, stdout=write_end,
                                stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (141, "")


def test_adding_no_parameter_is_refused_and_leaves_an_ended_campaign_ended(cigri: Cigri) -> None:
    jdl = cigri.jdl("ended", exec_file="/bin/true", params=["a"])
    campaign_id = json.loads(cigri.run("gridsub", "-f", str(jdl), "--json", "--wait", "--period", "0.05").stdout)[
        "campaign_id"]
    before, counts = cigri.stat(campaign_id), cigri.db_counts()
    empty = cigri.tmp / "comments.txt"
    empty.write_text("# nothing here\n\n")
    for path in ("/dev/null", str(empty)):
        result = cigri.run("gridsub", "-c", str(campaign_id), "-F", path, expect=2)
        assert result.stderr.splitlines() == [f"gridsub: {path}: no parameters to add"]
        assert result.stdout == ""
    after = cigri.stat(campaign_id)
    assert before["state"] == "terminated" and before["finished_at"] is not None
    assert (after["state"], after["finished_at"]) == (before["state"], before["finished_at"])
    assert cigri.db_counts() == counts


def test_ids_beyond_64_bits_are_no_such_ids(cigri: Cigri) -> None:
    cigri.run("cigri", "db", "init")
    huge = "99999999999999999999"
    for argv, what in ((["gridstat", "-c", huge], "campaign"), (["gridstat", huge, "-f"], "campaign"),
                       (["gridstat", "-j", huge], "job"), (["griddel", huge], "campaign"),
                       (["griddel", "-j", huge], "job"), (["gridsub", "-c", huge, "-F", "/dev/null"], "campaign"),
                       (["gridevents", "-e", huge], "event"), (["gridevents", "-c", "-" + huge], "campaign"),
                       (["gridnotify", "unsubscribe", huge], "subscription")):
        result = cigri.run(*argv, expect=1)
        sign = "-" if "-" + huge in argv else ""
        assert result.stderr.splitlines() == [f"{argv[0]}: {what} {sign}{huge}: no such {what}"], argv


@pytest.mark.parametrize("period", ["0", "-1", "nan", "inf"])
def test_a_bad_gridsub_period_is_refused_before_submitting(cigri: Cigri, period: str) -> None:
    cigri.run("cigri", "db", "init")
    counts = cigri.db_counts()
    jdl = cigri.jdl("waited", exec_file="/bin/true", params=["a"])
    result = cigri.run("gridsub", "-f", str(jdl), "--wait", "--period", period, expect=2)
    assert result.stderr.splitlines() == ["gridsub: --period: must be > 0 and finite"]
    assert result.stdout == "" and cigri.db_counts() == counts


def test_byte_order_marks_are_dropped_from_jdls_and_parameter_files(cigri: Cigri) -> None:
    params = cigri.tmp / "bom.txt"
    params.write_bytes(b"\xef\xbb\xbfa 1\nb 2\n")
    jdl = cigri.jdl("bom", exec_file="/bin/true", param_file=str(params))
    jdl.write_bytes(b"\xef\xbb\xbf" + jdl.read_bytes())
    campaign_id = cigri.submit(jdl)
    assert [(t["name"], t["param"]) for t in cigri.tasks(campaign_id)] == [("a", "a 1"), ("b", "b 2")]
    cigri.run("gridsub", "-c", str(campaign_id), "-F", "/dev/stdin", stdin="\ufeffc 3\n")
    assert cigri.tasks(campaign_id)[-1]["name"] == "c"


def test_bad_names_duplicate_keys_and_ignored_arguments_are_one_line_errors(cigri: Cigri) -> None:
    cigri.submit(cigri.jdl("valid", exec_file="/bin/true", params=["a"]))
    counts = cigri.db_counts()
    long_name = "n" * 100_000

    def named(label: str, name: str) -> Path:
        path = cigri.jdl(label, exec_file="/bin/true", params=["a"])
        path.write_text(json.dumps({**json.loads(path.read_text()), "name": name}))
        return path

    duplicate = cigri.tmp / "duplicate.json"
    duplicate.write_text('{"name": "x", "params": ["a"], "exec_file": "/bin/true", "clusters": {"local": {}}, '
                         '"name": "y"}')
    cases = [
        (["gridsub", "-f", str(named("nl", "two\nlines"))],
         f"gridsub: {cigri.tmp / 'nl.json'}: $.name: contains the control character U+000A; a name is one line "
         "of text"),
        (["gridsub", "-f", str(named("esc", "red\x1b[31m"))],
         f"gridsub: {cigri.tmp / 'esc.json'}: $.name: contains the control character U+001B; a name is one line "
         "of text"),
        (["gridsub", "-f", str(named("long", long_name))],
         f"gridsub: {cigri.tmp / 'long.json'}: $.name: {repr(long_name)[:60]}… (100002 characters) is too long"),
        (["gridsub", "-f", str(duplicate), "--strict"],  # without --strict, the last one with a warning, as CiGri
         f"gridsub: {duplicate}: duplicate key 'name' (JSON would keep only the last)"),
        (["griddel", "-p", "-j", "1"], "griddel: -p, -r and --purge act on campaigns; a job (-j) can only be killed"),
        (["griddel", "-r", "-j", "1"], "griddel: -p, -r and --purge act on campaigns; a job (-j) can only be killed"),
        (["gridstat", "-c", "1", "5"], "gridstat: give the campaign once: CAMPAIGN or -c CAMPAIGN"),
        (["gridstat", "-j", "1", "1"], "gridstat: -j JOB excludes a campaign"),
        (["gridstat", "-c", "1", "-a"], "gridstat: -u, -a, --name and --since select campaigns to list; with -c or "
                                        "-j they would be ignored"),
        (["gridstat", "-j", "1", "-u", "bob"], "gridstat: -u, -a, --name and --since select campaigns to list; with "
                                               "-c or -j they would be ignored"),
    ]
    for argv, line in cases:
        result = cigri.run(*argv, expect=2)
        assert result.stderr.splitlines() == [line], argv
        assert result.stdout == "" and cigri.db_counts() == counts, argv
    assert cigri.campaign_state(1) == "in_treatment"


def test_a_jobs_output_with_json_is_one_json_value(cigri: Cigri) -> None:
    program = cigri.script("talk.sh", 'echo "out $1"; echo "err $1" >&2\n')
    jdl = cigri.jdl("talk", exec_file=str(program), params=["a"])
    campaign_id = json.loads(cigri.run("gridsub", "-f", str(jdl), "--json", "--wait", "--period", "0.05").stdout)[
        "campaign_id"]
    [task] = cigri.tasks(campaign_id)
    job = str(task["jobs"][0]["id"])
    assert cigri.json("gridstat", "-j", job, "-O", "-E") == {"job": int(job), "stdout": "out a\n", "stderr": "err a\n"}
    assert cigri.json("gridstat", "-j", job, "-E") == {"job": int(job), "stderr": "err a\n"}
    assert cigri.run("gridstat", "-j", job, "-O", "-E").stdout == (f"==> job {job} stdout <==\nout a\n\n"
                                                                   f"==> job {job} stderr <==\nerr a\n")
