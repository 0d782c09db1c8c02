"""``kill -9`` of ``cigri server`` while a campaign submitted through its API drains: no task
is lost or run twice, and while it is down every client command says so in one line.

Full size (CIGRI_TEST_FULL=1, as CI runs it): 1,000 tasks and 20 kills; by default 300 and 6.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from harness import wait_for
from service import Site

pytestmark = pytest.mark.slow

FULL = os.environ.get("CIGRI_TEST_FULL") == "1"
TASKS, KILLS = (1000, 20) if FULL else (300, 6)


def test_kill_9_of_the_server_loses_and_duplicates_nothing() -> None:
    site = Site()
    try:
        site.start()
        u1, _ = site.users
        program = site.script("mark.sh", ': > "marker.$1.$$.$(date +%s%N)"\nsleep 0.05\n')
        params = site.user_file(u1, "params.txt", "".join(f"t{i:04d}\n" for i in range(TASKS)))
        campaign_id = site.submit(u1, site.jdl(u1, "survivor", exec_file=str(program), param_file=str(params)))
        down_lines: list[str] = []
        rng = random.Random(7)
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.5, 2.0))
            site.kill(signal.SIGKILL)
            for command in (("gridstat", "-c", str(campaign_id)), ("griddel", "-p", str(campaign_id)),
                            ("gridsub", "-c", str(campaign_id), "-F", str(params))):
                refused = site.run(u1, *command, expect=1)
                down_lines.append(refused.stderr)
            site.start()
        summary = site.drain(u1, campaign_id, timeout=600)
        assert summary["state"] == "terminated", summary
        assert summary["tasks"]["terminated"] == TASKS
        runs = Counter(path.name.split(".")[1] for path in site.exec.glob("marker.*"))
        assert len(runs) == TASKS, f"{TASKS - len(runs)} task(s) never ran"
        assert [task for task, count in runs.items() if count > 1] == []
        for line in down_lines:
            assert line.count("\n") == 1 and "not answering" in line, line
    finally:
        site.close()


def test_a_killed_cycle_process_neither_stops_the_cycles_nor_hangs_the_servers_stop() -> None:
    """``kill -9`` of the cycle process, most likely while it waits between two cycles: the
    server starts another, and a SIGTERM still stops it at once (it waited for ever on the
    stop it shared with the dead process)."""
    site = Site()
    try:
        site.start()
        assert site.server is not None

        def cycle_process() -> int | None:
            for thread in Path(f"/proc/{site.server.pid}/task").iterdir():  # its supervising thread starts it
                for child in (thread / "children").read_text().split():
                    if b"multiprocessing.spawn" in Path(f"/proc/{child}/cmdline").read_bytes():
                        return int(child)
            return None

        wait_for(lambda: cycle_process() is not None, 60, "the cycle process")
        first = cycle_process()
        assert first is not None
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: cycle_process() not in (None, first), 60, "another cycle process")
        time.sleep(1)  # a few cycles: it waits between two most of the time
        second = cycle_process()
        assert second is not None
        os.kill(second, signal.SIGKILL)
        time.sleep(0.5)
        site.kill(signal.SIGTERM)  # waits up to 60 s: TimeoutExpired if the stop hangs
        assert site.server.returncode == 0
    finally:
        site.close()
