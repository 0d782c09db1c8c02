"""Pause pauses (issue #33): a paused campaign's jobs that have not started leave the cluster and
their tasks go back to the bag, nothing counted; its running jobs run on; nothing of it starts
until ``griddel -r``, which sends them again. On the local pool, Slurm and OAR, through a real
``cigri server`` and the real commands. Before, ``griddel -p`` only stopped new submissions: the
jobs already queued on the cluster started during the pause.

And the live view, ``gridstat`` and the dashboard say so: a paused campaign's time left is
``paused``, not the countdown rich drew from its last jobs ending.

Each task writes ``marker.TASK.…`` when it starts and then waits for the file ``release`` (or
``release.TASK``) in its directory, so which jobs run while the test looks is the test's choice.
"""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import sqlite3
import subprocess
import threading
import tomllib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import (BIN, REAL_CLUSTERS, Cigri, busy_jobs, clusters_dir, marker_exec_dir, read_terminal, runs_per_task,
                     wait_for)
from service import Site

pytestmark = pytest.mark.slow
GATE = 'while [ ! -e release ] && [ ! -e "release.$1" ]; do sleep 0.2; done\n'
CORES, TASK_CORES = 8, 4  # a test Slurm or OAR cluster, and what each task asks of it
TASK_FIELDS = {"walltime": "00:05:00", "type": "normal"}


def _real(name: str) -> Any:
    return pytest.param(name, marks=REAL_CLUSTERS)


@pytest.fixture(params=["local", _real("slurm-a-ssh"), _real("slurm-a-rest"), _real("oar-ssh"), _real("oar-rest")])
def site(request: pytest.FixtureRequest) -> Iterator[tuple[Site, str, Path]]:
    """A site whose campaigns may use the cluster named by the parameter (every job on a real
    cluster as its account), letting many of a campaign's jobs queue there and none be killed
    for waiting; and the tasks' directory, whose waiting jobs are released after the test."""
    cluster = request.param
    lines = ["[runner]", "tap_initial = 20", "flood_grace = 3600", "remote_waiting_timeout = 3600"]
    if cluster != "local":
        with (clusters_dir() / "single.toml").open("rb") as handle:
            options = tomllib.load(handle)["clusters"][cluster]
        lines += [f"[clusters.{cluster}]", *(f"{key} = {json.dumps(value)}" for key, value in options.items()),
                  "max_waiting = 10"]
        system = "slurm" if cluster.startswith("slurm") else "oar"
        wait_for(lambda: busy_jobs(system) == 0, 120, f"{system}'s last jobs to end", step=1)
    built = Site("\n".join(lines) + "\n")
    exec_dir = _exec_dir(built, cluster)
    try:
        built.start()
        yield built, cluster, exec_dir
    finally:
        (exec_dir / "release").touch()  # a job the test left waiting ends: the next test has the cluster
        built.close()


def _exec_dir(site: Site, cluster: str) -> Path:
    """Where the tasks write: a directory the cluster's jobs and the test both see."""
    if cluster != "local":
        return marker_exec_dir("pause", after=GATE)
    path = site.exec / "pause"
    path.mkdir(mode=0o777)
    path.chmod(0o1777)
    (path / "task.sh").write_text(f'#!/bin/sh\n: > "marker.$1.$$"\n{GATE}')
    (path / "task.sh").chmod(0o755)
    return path


def _queued_on(site: Site, cluster: str, exec_dir: Path) -> int:
    """The campaign's jobs queued on the cluster now (those running in ``exec_dir``), asked of
    the cluster itself: another test may have left a job there that will never start."""
    if cluster == "local":
        with sqlite3.connect(f"file:{site.home / 'spool' / 'local' / 'spool.db'}?mode=ro", uri=True) as spool:
            return int(spool.execute("SELECT count(*) FROM jobs WHERE state = 'queued' "
                                     "AND json_extract(spec, '$.directory') = ?", [str(exec_dir)]).fetchone()[0])
    host = cluster.rsplit("-", 1)[0]  # slurm-a, oar

    def front_end(*command: str) -> str:
        return subprocess.run(["ssh", "-F", str(clusters_dir() / "ssh" / "ssh_config"), host, *command],
                              capture_output=True, text=True, timeout=30, check=True).stdout
    if host.startswith("slurm"):  # -r: each task of an array; %Z: its working directory
        return front_end("squeue", "-h", "-r", "-t", "PD,CF", "-o", "%Z").split().count(str(exec_dir))
    jobs = json.loads(front_end("oarstat", "-J", "-f") or "{}")
    return sum(job["state"] in ("Waiting", "Hold", "toLaunch", "Launching", "toAckReservation")
               and str(exec_dir) in str(job.get("command")) for job in jobs.values())


def _server_db(site: Site) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{site.home / 'cigri.db'}?mode=ro", uri=True, timeout=30)


def test_pause_withdraws_the_jobs_not_started_and_resume_sends_them_again(site: tuple[Site, str, Path]) -> None:
    """A campaign fills the cluster (its first jobs start and wait for the test) and queues the
    rest. ``griddel -p``: the queued jobs leave the cluster within a cycle, their tasks are
    pending again, the started ones run on. Released, those end and nothing else starts while
    cycles go by. ``griddel -r``: the rest run; every task ran once, with one attempt and no
    preemption counted."""
    site, cluster, exec_dir = site
    user = site.users[0]
    started = 4 if cluster == "local" else CORES // TASK_CORES  # the cluster's room: the local pool has 4 slots
    tasks = 3 * started
    jdl = site.jdl(user, "paused", exec_directory=str(exec_dir), exec_file=str(exec_dir / "task.sh"),
                   params=[f"t{i:02d}" for i in range(tasks)], clusters={cluster: {"resources": f"core={TASK_CORES}"}},
                   **TASK_FIELDS)
    campaign_id = site.submit(user, jdl)
    seen: dict[str, Any] = {}

    def counts() -> dict[str, int]:
        seen.update(site.json(user, "gridstat", "-c", str(campaign_id)))
        return dict(seen["tasks"])

    full = {"pending": 0, "waiting": tasks - started, "running": started}
    wait_for(lambda: {k: counts()[k] for k in full} == full and len(runs_per_task(exec_dir)) == started, 180,
             "the cluster full and the rest queued", step=0.3,
             seen=lambda: (seen.get("tasks"), runs_per_task(exec_dir)))
    assert _queued_on(site, cluster, exec_dir) == tasks - started

    site.run(user, "griddel", "-p", str(campaign_id))
    withdrawn = {"pending": tasks - started, "waiting": 0, "running": started}
    wait_for(lambda: {k: counts()[k] for k in withdrawn} == withdrawn, 120, "the queued jobs withdrawn", step=0.3,
             seen=lambda: seen.get("tasks"))
    assert _queued_on(site, cluster, exec_dir) == 0  # cancelled on the cluster, not only in cigri's books
    assert seen["state"] == "paused" and seen["eta"] is None
    assert "remaining: paused   ETA: paused" in site.run(user, "gridstat", "-c", str(campaign_id)).stdout
    [(status, page, _)] = site.http(user, [("GET", f"/campaigns/{campaign_id}", {})], root=True)
    assert status == 200 and '<dd data-field="eta">paused</dd>' in page, page[:2000]

    (exec_dir / "release").touch()
    wait_for(lambda: counts()["terminated"] == started and seen["tasks"]["running"] == 0, 180,
             "the started jobs to end", step=0.3, seen=lambda: seen.get("tasks"))
    with _server_db(site) as db:
        now = db.execute("SELECT max(at) FROM counts").fetchone()[0]
    wait_for(lambda: _server_db(site).execute("SELECT count(DISTINCT at) FROM counts WHERE at > ?", [now])
             .fetchone()[0] >= 3, 60, "three more cycles")
    assert counts()["pending"] == tasks - started and seen["state"] == "paused"
    assert len(runs_per_task(exec_dir)) == started  # nothing started meanwhile
    assert _queued_on(site, cluster, exec_dir) == 0

    site.run(user, "griddel", "-r", str(campaign_id))
    summary = site.drain(user, campaign_id, timeout=300)
    assert summary["state"] == "terminated" and summary["tasks"]["terminated"] == tasks
    assert runs_per_task(exec_dir) == Counter({f"t{i:02d}": 1 for i in range(tasks)})
    with _server_db(site) as db:
        assert db.execute("SELECT max(attempts), max(preemptions) FROM tasks WHERE campaign_id = ?",
                          [campaign_id]).fetchone() == (1, 0)
    assert not [e for e in site.json(user, "gridevents", "-c", str(campaign_id), "-a")
                if e["code"] not in ("CAMPAIGN_FINISHED",)]


def test_a_job_that_started_before_cigri_saw_it_runs_on_through_the_pause(cigri: Cigri) -> None:
    """Paused right after a cycle sent its jobs: the pool had started four of them, which cigri
    still counted as waiting. The next cycle's poll sees them run: they run on, not killed and
    sent again; only the two still queued are withdrawn."""
    cigri.config.write_text(cigri.config.read_text() + "[runner]\ntap_initial = 20\n")
    program = cigri.script("task.sh", f': > "marker.$1.$$"\n{GATE}')
    tasks = [f"t{i}" for i in range(6)]
    campaign_id = cigri.submit(cigri.jdl("lagging", exec_file=str(program), params=tasks))
    cigri.cycle()
    wait_for(lambda: len(runs_per_task(cigri.work)) == 4, 60, "the pool to start four jobs")
    assert cigri.stat(campaign_id)["tasks"]["waiting"] == 6  # not polled since
    cigri.run("griddel", "-p", str(campaign_id))
    cigri.cycle()
    counts = cigri.stat(campaign_id)["tasks"]
    assert (counts["running"], counts["pending"], counts["waiting"]) == (4, 2, 0), counts
    (cigri.work / "release").touch()
    cigri.run("griddel", "-r", str(campaign_id))
    assert cigri.drain(campaign_id)["state"] == "terminated"
    assert runs_per_task(cigri.work) == Counter(dict.fromkeys(tasks, 1))


# --- the live view ----------------------------------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
COUNTDOWN = re.compile(r"\b\d+:\d\d:\d\d\b")  # h:mm:ss, as rich's time-remaining column drew it


def _terminal_lines(raw: bytes) -> list[str]:
    """Every line a live view drew on the terminal, without its escape sequences."""
    return [line for line in (ANSI.sub("", part) for part in re.split(r"[\r\n]", raw.decode(errors="replace")))
            if line.strip()]


def test_the_live_view_of_a_paused_campaign_says_paused_instead_of_a_countdown(cigri: Cigri) -> None:
    """``gridstat -c N --wait`` on a terminal (it runs the cycles): once the campaign is paused,
    its bar's time left says ``paused`` while its running jobs end one by one. Before, rich's
    own estimate from those endings counted down to an end that would never come."""
    cigri.config.write_text(cigri.config.read_text() + "[runner]\ntap_initial = 20\n")
    program = cigri.script("task.sh", f': > "marker.$1.$$"\n{GATE}')
    campaign_id = cigri.submit(cigri.jdl("view", exec_file=str(program), params=[f"t{i}" for i in range(6)]))
    controller, terminal = pty.openpty()
    env = {**cigri.env, "TERM": "xterm", "COLUMNS": "220", "LINES": "40"}
    view = subprocess.Popen([str(BIN / "gridstat"), "-c", str(campaign_id), "--wait"], env=env, cwd=cigri.tmp,
                            stdin=terminal, stdout=terminal, stderr=terminal, start_new_session=True)
    os.close(terminal)
    drawn = bytearray()
    reader = threading.Thread(target=read_terminal, args=(controller, drawn), daemon=True)
    reader.start()
    try:
        wait_for(lambda: len(runs_per_task(cigri.work)) == 4, 60, "four tasks started")
        cigri.run("griddel", "-p", str(campaign_id))
        wait_for(lambda: cigri.stat(campaign_id)["tasks"]["pending"] == 2, 60, "the queued tasks withdrawn")
        for i in range(4):  # each ends in a cycle of its own: a rate rich could measure
            (cigri.work / f"release.t{i}").touch()
            wait_for(lambda i=i: cigri.stat(campaign_id)["tasks"]["terminated"] == i + 1, 60, f"t{i} to end")
        wait_for(lambda: any(" 4/6 " in line for line in _terminal_lines(bytes(drawn))), 60, "the view to show it")
    finally:
        view.send_signal(signal.SIGINT)  # the view leaves, saying the campaign carries on
        view.wait(60)
        reader.join(10)
        os.close(controller)
    paused = [line for line in _terminal_lines(bytes(drawn))
              if f"campaign {campaign_id}" in line and "paused: griddel -r" in line]
    assert paused and all(line.rstrip().endswith("paused") for line in paused), paused[-5:]
    assert not [line for line in paused if COUNTDOWN.search(line)], paused[-5:]
