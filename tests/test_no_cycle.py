"""A campaign moves only while something runs the grid's cycles: the commands say so, once, when
nothing has for a while (and how to start them), and ``gridstat -c N --wait`` (or ``gridsub -c
N --wait``) re-attaches to a campaign with ``gridsub --wait``'s live view; Ctrl-C says the
campaign carries on."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from harness import BIN, Cigri, wait_for

pytestmark = pytest.mark.slow


def hints(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "nothing moves until" in line]


def test_without_cycles_the_commands_say_so_once(cigri: Cigri) -> None:
    """``gridsub -f x.json`` left the campaign at 0 % for good, silently."""
    jdl = cigri.jdl("idle", exec_file="/bin/true", nb_jobs=2)
    submitted = cigri.run("gridsub", "-f", str(jdl))
    campaign_id = int(submitted.stdout.split("=")[-1])
    [hint] = hints(submitted.stderr)
    assert hint == ("gridsub: no cycle has run yet, and no cigri daemon runs: nothing moves until one does; start "
                    f"them with `cigri daemon` (or `cigri cycle` from cron), or watch with `gridstat -c {campaign_id} "
                    "--wait`, which runs them")
    assert len(hints(cigri.run("gridstat").stderr)) == 1
    assert len(hints(cigri.run("gridstat", "-c", str(campaign_id)).stderr)) == 1
    assert hints(cigri.run("gridstat", "-c", str(campaign_id), "--json").stderr) == [
        hint.replace("gridsub", "gridstat")]  # stderr: the JSON stays alone on stdout

    cigri.cycle()  # a cycle just ran: cron's, or someone's
    assert hints(cigri.run("gridstat").stderr) == []
    lock = cigri.home / "cycle.lock"
    an_hour_ago = time.time() - 3600
    os.utime(lock, (an_hour_ago, an_hour_ago))
    [stale] = hints(cigri.run("gridstat").stderr)
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(an_hour_ago))
    assert stale.startswith(f"gridstat: no cycle has run since {when}")

    daemon = cigri.start_daemon(period=30)  # holds the daemon lock: cycles run, however rare
    wait_for(lambda: hints(cigri.run("gridstat").stderr) == [], 30, "the daemon to be seen")
    assert hints(cigri.run("gridsub", "-f", str(jdl)).stderr) == []
    daemon.terminate()
    daemon.wait(30)


def test_gridstat_wait_reattaches_to_a_campaign(cigri: Cigri) -> None:
    """The live view of ``gridsub --wait`` for a campaign submitted earlier; as the grid's owner
    it runs the cycles, as gridsub's does; its exit status says whether every task succeeded."""
    campaign_id = cigri.submit(cigri.jdl("later", exec_file="/bin/true", nb_jobs=3))
    waited = cigri.run("gridstat", "-c", str(campaign_id), "--wait", timeout=120)
    assert waited.stderr.splitlines()[-1] == f"campaign {campaign_id}: terminated, 3 succeeded, 0 failed, 0 cancelled"
    final = cigri.json("gridstat", "-c", str(campaign_id), "--wait")  # an ended one: at once, its summary
    assert final["state"] == "terminated" and final["id"] == campaign_id
    again = cigri.run("gridsub", "-c", str(campaign_id), "--wait")
    assert again.stderr.splitlines()[-1].startswith(f"campaign {campaign_id}: terminated")
    assert cigri.run("gridstat", "-c", "999", "--wait", expect=1).stderr == "gridstat: campaign 999: no such campaign\n"
    assert cigri.run("gridstat", "-c", str(campaign_id), "--wait", "-f", expect=2).stderr == \
        "gridstat: --wait excludes -f\n"


def test_ctrl_c_says_the_campaign_carries_on(cigri: Cigri) -> None:
    program = cigri.script("long.sh", ": > started\nexec sleep 60\n")
    campaign_id = cigri.submit(cigri.jdl("long", exec_file=str(program), params=["a"]))
    with open(cigri.tmp / "wait.err", "w+") as err:
        proc = subprocess.Popen([str(BIN / "gridstat"), "-c", str(campaign_id), "--wait"], env=cigri.env,
                                cwd=cigri.tmp, stdout=subprocess.DEVNULL, stderr=err, text=True)
        wait_for((cigri.work / "started").exists, 60, "the task to start")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 130
        err.seek(0)
        lines = err.read().splitlines()
    assert lines[-1] == (f"gridstat: stopped watching; campaign {campaign_id} carries on (gridstat -c {campaign_id} "
                         f"--wait watches again, griddel {campaign_id} cancels)")
    assert cigri.campaign_state(campaign_id) == "in_treatment"
    cigri.run("griddel", str(campaign_id))
