"""Many gridsub / griddel / gridstat / cigri cycle processes at once, while the daemon cycles
(``cigri cycle`` is refused beside it, in one line).

No command may fail with "database is locked" (writers queue on the busy timeout behind
``BEGIN IMMEDIATE``), and nothing may be lost: every task of a campaign that was not cancelled
runs exactly once (marker files), every campaign submitted is there with all its tasks.
"""

from __future__ import annotations

import collections
import json
import re
import subprocess
import threading
import time
from typing import Any

import pytest
from harness import BIN, Cigri, size

CLIENTS = 5
ROUNDS = size(1, 2)  # a second round of every client in CI (CIGRI_TEST_FULL=1)
TASKS = 12


def _client(cigri: Cigri, number: int, results: list[tuple[list[str], int, str, str]],
            campaigns: dict[int, str]) -> None:
    """One user's session: submit, look, pause and resume, add parameters, sometimes cancel."""

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([str(BIN / argv[0]), *argv[1:]], env=cigri.env, cwd=cigri.tmp, text=True,
                              capture_output=True, timeout=120, check=False)
        results.append((list(argv), proc.returncode, proc.stdout, proc.stderr))
        return proc

    for round_ in range(ROUNDS):
        name = f"c{number}r{round_}"
        jdl = cigri.jdl(name, exec_file=str(cigri.tmp / "mark.sh"),
                        params=[f"{name}t{i}" for i in range(TASKS)])
        out = run("gridsub", "-f", str(jdl), "--json").stdout
        if not out:
            continue
        campaign_id = json.loads(out)["campaign_id"]
        campaigns[campaign_id] = "terminated"
        run("gridstat", "-a", "--json")
        run("griddel", "-p", str(campaign_id))
        more = cigri.tmp / f"{name}.more"
        more.write_text(f"{name}x1\n{name}x2\n")
        run("gridsub", "-c", str(campaign_id), "-F", str(more), "--json")
        run("griddel", "-r", str(campaign_id))
        run("gridstat", "-c", str(campaign_id), "--json")
        run("cigri", "cycle")
        if (number + round_) % 3 == 0 and run("griddel", str(campaign_id)).returncode == 0:
            campaigns[campaign_id] = "cancelled"


@pytest.mark.slow
def test_parallel_commands_and_cycles_lock_nothing_and_lose_nothing(cigri: Cigri) -> None:
    cigri.script("mark.sh", ': > "runs/$1.$$"\n')
    (cigri.work / "runs").mkdir()
    cigri.run("cigri", "db", "init")
    daemon = cigri.start_daemon(period=0.01)
    results: list[tuple[list[str], int, str, str]] = []
    campaigns: dict[int, str] = {}
    started = time.monotonic()
    threads = [threading.Thread(target=_client, args=(cigri, n, results, campaigns)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert daemon.poll() is None, cigri.daemon_log(daemon)

    locked = [r for r in results if "locked" in r[3] or "Traceback" in r[3]]
    assert locked == [], locked
    for argv, status, _, stderr in results:
        if argv[:2] == ["cigri", "cycle"]:  # beside the daemon, which drives the cycles
            assert status == 1 and stderr.startswith("cigri: a cigri daemon or server runs the cycles"), (argv, stderr)
        elif argv[0] == "griddel" and status == 1:  # the campaign ended (or was not paused) meanwhile
            assert re.fullmatch(r"griddel: campaign \d+ is (already terminated|terminated, not \w+|"
                                r"in_treatment, not paused)\n", stderr), (argv, stderr)
        else:
            assert status == 0, (argv, status, stderr)
    assert len(campaigns) == CLIENTS * ROUNDS

    deadline = time.monotonic() + 300  # generous: CI machines are shared
    while any(cigri.campaign_state(c) not in ("terminated", "cancelled") for c in campaigns):
        assert time.monotonic() < deadline, [cigri.stat(c) for c in campaigns]
        time.sleep(0.1)
    runs = collections.Counter(p.name.rsplit(".", 1)[0] for p in (cigri.work / "runs").iterdir())
    for campaign_id, expected in campaigns.items():
        summary: dict[str, Any] = cigri.stat(campaign_id)
        assert summary["state"] == expected and summary["tasks"]["total"] == TASKS + 2, summary
        names = [t["name"] for t in cigri.tasks(campaign_id)]
        assert all(runs[n] <= 1 for n in names), f"campaign {campaign_id}: a task ran twice"
        if expected == "terminated":
            assert summary["tasks"]["terminated"] == TASKS + 2, summary
            assert all(runs[n] == 1 for n in names), f"campaign {campaign_id}: a task never ran"
    print(f"\nconcurrency: {len(results)} commands from {CLIENTS} clients beside the daemon, "
          f"{len(campaigns)} campaigns, 0 locked, {time.monotonic() - started:.1f}s")
