"""The new questions the commands ask, through a site's ``cigri server``, as real Unix users:
whether the server's cycles run (its ``/healthz``), why a campaign gets what it gets (its
owner's, not another user's), and the filters of ``gridstat`` (by name, submission time, and a
campaign's failed tasks)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import wait_for
from service import Site, started

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with started() as site:
        yield site


def _cycles_child(site: Site) -> int:
    """The pid of the server's cycle process (multiprocessing's spawned child)."""
    assert site.server is not None
    for _ in range(2):  # the server runs as root: start_as may put a wrapper in between
        for pid in _descendants(site.server.pid):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"multiprocessing" in cmdline and b"spawn_main" in cmdline and b"resource_tracker" not in cmdline:
                return pid
        time.sleep(1)
    raise AssertionError("no cycle process under the server")


def _descendants(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        for child in map(int, children):
            found += [child, *_descendants(child)]
    return found


def test_the_hint_comes_from_the_servers_healthz(site: Site) -> None:
    """Through a server, whether cycles run is the server's to say: while its cycle process is
    stopped (and so none ends), the commands say so, once, and point to its admin."""
    u1, _ = site.users
    campaign_id = site.submit(u1, site.jdl(u1, "hinted", exec_file="/bin/true", nb_jobs=1))
    site.drain(u1, campaign_id)
    assert "nothing moves" not in site.run(u1, "gridstat", "-a").stderr
    child = _cycles_child(site)

    def stale() -> bool:
        """Stopped between two cycles, none ends: /healthz says so after three periods. Stopped
        inside one, it stays "running": let it go on a moment and stop it again."""
        [(status, body, _)] = site.http(u1, [("GET", "/healthz", {})], root=True)
        if body["cycles"]["running"]:
            os.kill(child, signal.SIGCONT)
            time.sleep(0.05)
            os.kill(child, signal.SIGSTOP)
        return status == 503 and not body["cycles"]["running"]

    os.kill(child, signal.SIGSTOP)
    try:
        wait_for(stale, 120, "/healthz to say the cycles stopped", step=0.5)
        waiting = site.submit(u1, site.jdl(u1, "stuck", exec_file="/bin/true", nb_jobs=1))
        result = site.run(u1, "gridstat", "-c", str(waiting))
        [line] = [line for line in result.stderr.splitlines() if "nothing moves" in line]
        assert line.startswith("gridstat: the server runs no cycle (none has ended since ")
        assert line.endswith("): nothing moves until it does; tell the grid's admin (the server's /healthz says why)")
    finally:
        os.kill(child, signal.SIGCONT)
    site.drain(u1, waiting)


def test_why_is_for_the_campaigns_owner(site: Site) -> None:
    u1, u2 = site.users
    program = site.script("nap.sh", "sleep 30\n")
    campaign_id = site.submit(u1, site.jdl(u1, "mine", exec_file=str(program), params=[f"t{i}" for i in range(6)],
                                           clusters={"local": {"max_jobs": 1}}))
    why = site.json(u1, "gridstat", "-c", str(campaign_id), "--why")
    assert why["id"] == campaign_id and why["user"] == u1 and why["scheduled"]
    assert why["target"] == {"local": 1} and why["reason"].startswith("capped by max_jobs")
    refused = site.run(u2, "gridstat", "-c", str(campaign_id), "--why", expect=1)
    assert refused.stderr == f"gridstat: campaign {campaign_id}: no such campaign\n"
    [(status, body, _)] = site.http(u2, [("GET", f"/campaigns/{campaign_id}/share", {})])
    assert status == 404
    assert site.run(u1, "cigri", "shares", expect=1).stderr.startswith("cigri: cigri shares: needs the admin role")
    site.run(u1, "griddel", str(campaign_id))


def test_gridstat_filters_through_the_server(site: Site) -> None:
    u1, _ = site.users
    program = site.script("half.sh", '[ "$1" != bad ] || exit 5\n')
    campaign_id = site.submit(u1, site.jdl(u1, "filtered-x", exec_file=str(program), params=["ok", "bad"]))
    site.drain(u1, campaign_id)
    names = [c["name"] for c in site.json(u1, "gridstat", "-u", u1, "--name", "filtered-*", "--state", "F")]
    assert names == ["filtered-x"]
    assert site.json(u1, "gridstat", "-u", u1, "--name", "filtered-*", "--since", "2099-01-01") == []
    [failed] = site.json(u1, "gridstat", "-c", str(campaign_id), "--state", "failed")
    assert failed["name"] == "bad" and failed["jobs"][-1]["exit_code"] == 5


def test_cigri_cycle_is_refused_beside_the_server(site: Site) -> None:
    """docs/server.md: the server drives the grid's cycles and nothing else may. ``cigri cycle``
    run by the grid's own account beside it says so in one line, exits 1 and runs no cycle."""
    cycle_lock = site.home / "cycle.lock"
    wait_for(cycle_lock.exists, 60, "the server's first cycle")
    result = subprocess.run([str(site.bin / "cigri"), "cycle"], env={**os.environ, **site.server_env()},
                            capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (1, "")  # a cycle run prints its report
    assert result.stderr == (f"cigri: a cigri daemon or server runs the cycles of {site.home}: "
                             "not running one beside it\n")


def test_a_param_file_the_client_cannot_open_is_said_with_the_jdls_other_mistakes(site: Site) -> None:
    u1, _ = site.users
    jdl = site.user_file(u1, "three.json", '{"name": "x", "exec_file": "/bin/true", "param_file": "absent.txt", '
                                           '"walltime": "1h", "clusters": {"mars": {}}}')
    refused = site.run(u1, "gridsub", "-f", str(jdl), expect=2)
    assert refused.stderr.splitlines() == [
        f"gridsub: {jdl}: $.walltime: '1h' is not valid: HH:MM:SS, MM:SS, or seconds (integer or decimal string)",
        f"gridsub: {jdl}: $.clusters.mars: unknown cluster (known: local)",
        f"gridsub: {jdl}: param_file {jdl.parent / 'absent.txt'}: No such file or directory"]
