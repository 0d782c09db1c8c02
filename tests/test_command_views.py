"""What the status commands show: tables that fit a 110-column terminal, gridstat's filters,
its chosen columns (``-o``, ``--noheader``), only a campaign's failed tasks, labelled
``-O -E``, the pointer from a failed campaign to its events, and the words of the cycle's
``-v`` log."""

from __future__ import annotations

import json
import os
import pty
import re
import sqlite3
import subprocess
import time

import pytest
from harness import BIN, Cigri, read_terminal, wait_for

pytestmark = pytest.mark.slow
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
WIDTH = 110


def terminal(cigri: Cigri, *args: str) -> list[str]:
    """A command's stdout as a 110-column terminal shows it, colours removed."""
    env = dict(cigri.env, FORCE_COLOR="1", COLUMNS=str(WIDTH), LINES="50")
    saved, cigri.env = cigri.env, env
    try:
        return [ANSI.sub("", line).rstrip() for line in cigri.run(*args).stdout.splitlines()]
    finally:
        cigri.env = saved


def failing_campaign(cigri: Cigri, name: str, tasks: int = 3) -> int:
    """A campaign whose tasks all fail with a long message on stderr, run to its end."""
    program = cigri.script("fails.sh", 'echo "cannot open the input file of $1: no such file or directory, '
                                       'and a long explanation follows it" >&2\nexit 3\n')
    campaign_id = cigri.submit(cigri.jdl(name, exec_file=str(program), params=[f"t{i}" for i in range(tasks)]))
    cigri.drain(campaign_id)
    return campaign_id


def test_tables_fit_a_110_column_terminal_one_row_a_line(cigri: Cigri) -> None:
    """Dates split over two lines and an ETA cut in two: compact dates, and the widest columns
    (names, messages) give up their width first, ending with an ellipsis."""
    long_name = "a campaign whose name is much longer than a terminal column would like it to be"
    failed = failing_campaign(cigri, long_name)
    running = cigri.submit(cigri.jdl(long_name + " too", exec_file="/bin/true", nb_jobs=5))
    views = {"gridstat -a": terminal(cigri, "gridstat", "-a"),
             "gridevents": terminal(cigri, "gridevents"),
             "gridclusters": terminal(cigri, "gridclusters"),
             "gridstat -c": terminal(cigri, "gridstat", "-c", str(failed)),
             "gridstat -f": terminal(cigri, "gridstat", "-c", str(failed), "-f")}
    views["gridstat -c"] = views["gridstat -c"][1:]  # its first line is the name's, as long as the name
    for view, lines in views.items():
        assert max(map(len, lines)) <= WIDTH, (view, lines)
    date = r"\d\d-\d\d \d\d:\d\d"  # this year's, compact
    rows = [line for line in views["gridstat -a"] if re.match(r"\d+ ", line)]
    assert [int(row.split()[0]) for row in rows] == [failed, running]
    for row in rows:
        assert re.search(rf"  {date}  [RF]e?  ", row), row  # the whole date, on the row's line
        assert "…" in row  # the name gave up its width
    events = [line for line in views["gridevents"] if re.match(r"\d+ ", line)]
    assert events and all(re.search(rf"^\d+ +{date} +open +high +(EXIT_ERROR|BLACKLISTED) ", row) for row in events)
    assert any("cannot open" in row and row.endswith("…") for row in events)


def test_gridstat_filters_and_chosen_columns(cigri: Cigri) -> None:
    """What squeue and condor_q users reach for: --state (a name or its letter), --name,
    --since, and -o with named fields, without the header (-H, --noheader)."""
    alpha = cigri.submit(cigri.jdl("alpha-1", exec_file="/bin/true", nb_jobs=2))
    beta = cigri.submit(cigri.jdl("beta-1", exec_file="/bin/true", nb_jobs=2))
    old = cigri.submit(cigri.jdl("alpha-old", exec_file="/bin/true", nb_jobs=2))
    cigri.run("griddel", str(beta))
    conn = sqlite3.connect(cigri.home / "cigri.db")
    with conn:
        conn.execute("UPDATE campaigns SET submitted_at = ? WHERE id = ?", [time.time() - 3 * 86400, old])
    conn.close()

    def ids(*args: str) -> list[int]:
        return [c["id"] for c in cigri.json("gridstat", *args)]

    assert ids() == [alpha, old]
    assert ids("--state", "C") == ids("--state", "cancelled") == [beta]
    assert ids("--state", "running") == ids("--state", "Running") == ids("--state", "R") == [alpha, old]
    assert ids("--state", "R,C") == ids("--state", "R", "--state", "cancelled") == [alpha, beta, old]
    assert ids("--name", "alpha*") == [alpha, old]
    assert ids("--since", "1d") == [alpha]
    assert ids("-a", "--since", "1d") == [alpha, beta]
    assert ids("--since", "2000-01-01", "--name", "*-old") == [old]
    plain = cigri.run("gridstat", "-o", "id,name,S,percent", "-H").stdout.splitlines()
    assert [line.split() for line in plain] == [[str(alpha), "alpha-1", "R", "0.0"],
                                                [str(old), "alpha-old", "R", "0.0"]]
    headed = cigri.run("gridstat", "-c", str(alpha), "--format", "state,total").stdout.splitlines()
    assert [line.split() for line in headed] == [["State", "Total"], ["in_treatment", "2"]]
    for args, message in ((["-o", "id,color"], "gridstat: -o: unknown field 'color'; known: id, name, "),
                          (["--state", "done"], "gridstat: state: expected one of in_treatment, paused, "),
                          (["--since", "yesterday"], "gridstat: --since: expected a duration (90m, 12h, 3d) "),
                          (["-c", str(alpha), "--name", "x"], "gridstat: -u, -a, --name and --since select "),
                          (["--json", "-o", "id"], "gridstat: --json prints every field: "),
                          (["-j", "1", "-o", "id"], "gridstat: -o is for listings of campaigns or tasks; ")):
        refused = cigri.run("gridstat", *args, expect=2)
        assert refused.stderr.startswith(message) and refused.stderr.count("\n") == 1, refused.stderr


def test_only_the_failed_tasks_and_the_pointer_to_their_events(cigri: Cigri) -> None:
    program = cigri.script("some.sh", '[ "$1" != bad ] || { echo "bad input" >&2; exit 4; }\n')
    campaign_id = cigri.submit(cigri.jdl("some", exec_file=str(program), params=["ok1", "bad", "ok2"]))
    waited = cigri.run("gridsub", "-c", str(campaign_id), "--wait", "--period", "0.05", expect=1)
    assert waited.stderr.splitlines()[-1] == (f"campaign {campaign_id}: failed, 2 succeeded, 1 failed, 0 cancelled; "
                                              f"why: gridevents -c {campaign_id}")
    failed = cigri.json("gridstat", "-c", str(campaign_id), "--state", "failed")
    assert [t["name"] for t in failed] == ["bad"] and failed[0]["jobs"][-1]["exit_code"] == 4
    assert [t["name"] for t in cigri.json("gridstat", "-c", str(campaign_id), "--state", "terminated")] == ["ok1",
                                                                                                           "ok2"]
    lines = cigri.run("gridstat", "-c", str(campaign_id), "--state", "failed", "-o", "name,exit", "-H").stdout
    assert lines == "bad  4\n"
    detail = cigri.run("gridstat", "-c", str(campaign_id)).stdout
    assert f"What failed and why: gridevents -c {campaign_id}" in detail
    ok = cigri.submit(cigri.jdl("fine", exec_file="/bin/true", nb_jobs=1))
    cigri.drain(ok)
    assert "gridevents" not in cigri.run("gridstat", "-c", str(ok)).stdout


def test_stdout_and_stderr_together_are_labelled(cigri: Cigri) -> None:
    program = cigri.script("talk.sh", 'echo "out of $1"\necho "err of $1" >&2\nprintf "no newline" >&2\n')
    campaign_id = cigri.submit(cigri.jdl("talk", exec_file=str(program), params=["x"]))
    cigri.drain(campaign_id)
    job = cigri.tasks(campaign_id)[0]["jobs"][0]["id"]
    assert cigri.run("gridstat", "-j", str(job), "-O").stdout == "out of x\n"  # one stream: as it is
    both = cigri.run("gridstat", "-j", str(job), "-O", "-E").stdout
    assert both == (f"==> job {job} stdout <==\nout of x\n\n==> job {job} stderr <==\nerr of x\nno newline\n")
    assert json.loads(cigri.run("gridstat", "-j", str(job), "-O", "-E", "--json").stdout) == {
        "job": job, "stdout": "out of x\n", "stderr": "err of x\nno newline"}


def test_why_explains_a_campaign_to_its_owner(cigri: Cigri) -> None:
    """``cigri shares`` is an admin's; ``gridstat -c N --why`` is that campaign's line of it."""
    running = cigri.submit(cigri.jdl("why", exec_file="/bin/true", nb_jobs=40, clusters={"local": {"max_jobs": 2}}))
    why = cigri.json("gridstat", "-c", str(running), "--why")
    assert why["id"] == running and why["scheduled"] and why["demand"] == 4  # counted up to the grid's cores
    assert why["target"] == {"local": 2} and why["reason"].startswith("capped by max_jobs")
    text = cigri.run("gridstat", "-c", str(running), "--why").stdout
    assert "why: capped by max_jobs" in text and re.search(r"^local +0 +0 +2 +2 +0$", text, re.MULTILINE), text
    cigri.run("griddel", "-p", str(running))
    paused = cigri.json("gridstat", "-c", str(running), "--why")
    assert paused["reason"].startswith("paused")
    cigri.run("griddel", str(running))
    ended = cigri.json("gridstat", "-c", str(running), "--why")
    assert ended == {"id": running, "name": "why", "user": ended["user"], "state": "cancelled", "scheduled": False,
                     "reason": "cancelled: the campaign has ended"}
    assert cigri.run("gridstat", "-c", "999", "--why", expect=1).stderr == "gridstat: campaign 999: no such campaign\n"
    assert cigri.run("gridstat", "--why", expect=2).stderr == "gridstat: --why needs -c CAMPAIGN\n"


def test_the_cycle_log_names_what_it_reports(cigri: Cigri) -> None:
    """``cigri -v`` logged ``CycleReport(updated=0, …)`` and ``cluster 1``."""
    program = cigri.script("fails.sh", "exit 3\n")
    cigri.env["CIGRI_FAILURE_RATE_MIN"] = "2"
    cigri.submit(cigri.jdl("fails", exec_file=str(program), nb_jobs=6))
    logged = ""
    for _ in range(30):
        logged += cigri.run("cigri", "-v", "cycle").stderr
        if "blacklisted for it" in logged:
            break
        time.sleep(0.2)
    assert re.search(r"cigri.cycle INFO cycle: \d+ updated, \d+ decided, \d+ submitted, \d+ killed, "
                     r"\d+ campaign\(s\) finished in [\d.]+s", logged)
    assert "campaign 1: cluster local blacklisted for it" in logged
    assert "new job(s) on local" in logged
    assert "CycleReport" not in logged and not re.search(r"cluster \d", logged), logged
    assert re.fullmatch(r"cycle: \d+ updated, .* finished in [\d.]+s\n", cigri.run("cigri", "cycle").stdout)


def test_the_live_view_of_a_paused_campaign_says_so_and_how_to_resume(cigri: Cigri) -> None:
    """A paused campaign's bar stands still: the view says why, and which command resumes it."""
    campaign_id = cigri.submit(cigri.jdl("held", exec_file="/bin/true", params=["a", "b"]))
    cigri.run("griddel", "-p", str(campaign_id))
    with open(cigri.tmp / "view.err", "w+") as err:
        proc = subprocess.Popen([str(BIN / "gridstat"), "-c", str(campaign_id), "--wait"], env=cigri.env,
                                cwd=cigri.tmp, stdout=subprocess.DEVNULL, stderr=err, text=True)
        try:
            wait_for(lambda: "\n" in (cigri.tmp / "view.err").read_text(), 60, "the view's first line")
        finally:
            proc.terminate()
            proc.wait(60)
        err.seek(0)
        first = err.readline()
    assert first.startswith(f"campaign {campaign_id}: paused (griddel -r {campaign_id} resumes) 0/2 done "), first


def test_the_live_view_fits_80_columns(cigri: Cigri) -> None:
    """``gridsub --wait`` on a terminal of 80 columns: every line it draws fits (it ran past them)."""
    program = cigri.script("slow.sh", "sleep 0.2\n")
    jdl = cigri.jdl("a-campaign-with-a-rather-long-name", exec_file=str(program), params=[f"t{i}" for i in range(30)])
    controller, terminal = pty.openpty()
    env = {**cigri.env, "TERM": "xterm", "COLUMNS": "80", "LINES": "24"}
    view = subprocess.Popen([str(BIN / "gridsub"), "-f", str(jdl), "--wait", "--period", "0.05"], env=env,
                            cwd=cigri.tmp, stdin=terminal, stdout=terminal, stderr=terminal, start_new_session=True)
    os.close(terminal)
    drawn = bytearray()
    read_terminal(controller, drawn)
    os.close(controller)
    assert view.wait(120) == 0
    lines = [line for line in (re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", part)
                               for part in re.split(r"[\r\n]", drawn.decode(errors="replace"))) if line.strip()]
    bars = [line for line in lines if line.startswith("campaign 1 ") and "/?" not in line]  # "/?": before counts
    assert bars and max(len(line) for line in lines) <= 80, max(lines, key=len)
    odd = [line for line in bars if not re.match(r"campaign 1 +[━╸╺ ]{8,} \d+/30 .* left$", line.rstrip())]
    assert not odd, odd
