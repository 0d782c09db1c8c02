"""Every command fails in one line: expected errors, database errors and bugs alike.

The unexpected error is real: a cluster row whose options are not JSON (a database edited by
hand) makes ``cigri cluster list`` raise a ``JSONDecodeError`` nobody planned for.
"""

from __future__ import annotations

import json
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
    with open(cigri.tmp / "wait.err", "w+") as err:
        proc = subprocess.Popen([str(BIN / "gridsub"), "-f", str(jdl), "--wait", "--period", "0.05"],
                                env=cigri.env, cwd=cigri.tmp, stdout=subprocess.PIPE, stderr=err, text=True)
        assert proc.stdout is not None and proc.stdout.readline().startswith("Campaign number: ")
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
