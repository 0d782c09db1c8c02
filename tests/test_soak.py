"""Soak: a 1,000-task campaign drained while ``cigri daemon`` is SIGKILLed 60 times (with
``CIGRI_TEST_FULL=1``, as in CI; 250 tasks and 15 kills otherwise).

Each task leaves one marker file per run (``runs/NAME.PID``), so a task run twice shows up as
two markers even if cigri's own records say once. The kill moments are random (the seed is
printed and named in every assertion), most of them inside a cycle, some while the daemon
is still starting.
"""

from __future__ import annotations

import collections
import random
import signal
import time

import pytest
from harness import Cigri, size, wait_for

# CI (CIGRI_TEST_FULL=1) drains 1,000 tasks through 60 kills; a developer's run a quarter of
# that, at the same tasks per kill, so that the campaign still outlives five kills in six.
TASKS = size(250, 1000)
KILLS = size(15, 60)


@pytest.mark.slow
def test_a_campaign_survives_repeated_daemon_kills(cigri: Cigri) -> None:
    started = time.monotonic()
    runs = cigri.work / "runs"
    runs.mkdir()
    program = cigri.script("mark.sh", ': > "runs/$1.$$"\nsleep 0.2\n')
    names = [f"s{i}" for i in range(TASKS)]
    campaign_id = cigri.submit(cigri.jdl("soak", exec_file=str(program), params=names))
    seed = random.randrange(1 << 32)
    rng = random.Random(seed)
    lock = cigri.home / "cycle.lock"
    kills = 0
    while kills < KILLS:
        daemon = cigri.start_daemon(period=0.01)
        if rng.random() < 0.8:  # mostly mid-cycle: once this daemon holds the cycle lock
            pid = str(daemon.pid)
            wait_for(lambda pid=pid: lock.exists() and lock.read_text().strip() == pid, 15, "the daemon's first cycle")
        time.sleep(rng.uniform(0.0, 0.4))
        daemon.send_signal(signal.SIGKILL)
        daemon.wait(10)
        kills += 1
        if cigri.campaign_state(campaign_id) == "terminated":
            break
    summary = cigri.drain(campaign_id, timeout=120)
    seconds = time.monotonic() - started

    per_task = collections.Counter(path.name.rsplit(".", 1)[0] for path in runs.iterdir())
    lost = [name for name in names if per_task[name] == 0]
    twice = [name for name, count in per_task.items() if count > 1]
    jobs = sum(len(task["jobs"]) for task in cigri.tasks(campaign_id))
    print(f"\nsoak: {TASKS} tasks, {kills} SIGKILLs of the daemon, {len(lost)} lost, {len(twice)} run twice, "
          f"{jobs} jobs, {seconds:.1f}s (seed {seed})")
    assert kills >= KILLS * 5 // 6, f"seed {seed}: the campaign ended after {kills} kills; make the tasks slower"
    assert summary["state"] == "terminated", f"seed {seed}: {summary}"
    assert summary["tasks"]["terminated"] == TASKS, f"seed {seed}: {summary}"
    assert lost == [], f"seed {seed}: never ran: {lost[:10]}"
    assert twice == [], f"seed {seed}: ran twice: {twice[:10]}"
    assert jobs == TASKS, f"seed {seed}: {jobs} jobs for {TASKS} tasks"
