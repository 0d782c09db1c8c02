"""The documented site (docs/server.md, "Setting it up"): ``cigri server`` under its service
account, the local cluster's pool as root beside it (``cigri pool``, conf/cigri-pool.service).
Two real users' campaigns on ``local`` run, each job as its owner; root's is refused at
submission with the reason; ``cigri doctor`` passes on the layout and names each broken part;
a root ``cigri server`` or ``cigri cycle`` over the account's grid is refused in one line."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from harness import wait_for
from service import Site
from unix_users import SERVICE, run_as

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    site = Site(account=SERVICE, root_pool=True)
    try:
        site.start()
        yield site
    finally:
        site.close()


def _doctor(site: Site) -> tuple[int, dict[str, dict[str, Any]]]:
    """``cigri doctor --json`` as the service account, as docs/server.md says to run it."""
    result = run_as(SERVICE, [str(site.bin / "cigri"), "doctor", "--json"], env=site.server_env())
    return result.returncode, {check["what"]: check for check in json.loads(result.stdout)}


def test_each_users_job_on_local_runs_as_its_owner(site: Site) -> None:
    script = site.script("whoami.sh", 'id -u > "$1.uid"\nid -un\n')
    campaigns = {user: site.submit(user, site.jdl(user, f"local-{user}", exec_file=str(script),
                                                  params=[f"{user}-a", f"{user}-b"]))
                 for user in site.users}
    for user, campaign_id in campaigns.items():
        assert site.drain(user, campaign_id)["state"] == "terminated", site.log()
        uid = pwd.getpwnam(user).pw_uid
        for name in ("a", "b"):
            written = site.exec / f"{user}-{name}.uid"
            assert written.read_text().strip() == str(uid) and written.stat().st_uid == uid
        for task in site.json(user, "gridstat", "-c", str(campaign_id), "-f"):  # through the server, which
            job = task["jobs"][-1]["id"]                                          # reads the owner's outputs
            assert site.run(user, "gridstat", "-j", str(job), "-O").stdout == f"{user}\n"
        spool = site.home / "spool" / "local" / "jobs"
        for job in spool.iterdir():
            if (job / "stdout").read_bytes() == f"{user}\n".encode():
                assert (job / "stdout").stat().st_uid == uid and job.stat().st_uid == uid
    assert pwd.getpwuid((site.home / "spool" / "local" / "spool.db").stat().st_uid).pw_name == SERVICE


def test_roots_campaign_on_local_is_refused_with_the_reason(site: Site) -> None:
    """A root pool runs no job as root for the account writing its spool: said at submission,
    never a campaign that stays pending."""
    jdl = site.jdl("root", "mine", exec_file="/bin/true", nb_jobs=1)
    refused = site.run("root", "gridsub", "-f", str(jdl), expect=1)
    assert refused.stderr == (f"gridsub: {jdl}: cluster local: the local pool runs no job as root: cigri runs "
                              f"as {SERVICE}, whose spool never has a job run with root's rights\n")


def test_doctor_passes_on_the_layout_and_names_what_is_broken(site: Site) -> None:
    status, checks = _doctor(site)
    assert status == 0 and [what for what, check in checks.items() if not check["ok"]] == [], checks
    assert checks["cluster local"]["detail"] == f"its pool runs as root, over {SERVICE}'s spool"
    assert checks["ownership"]["detail"] == f"the grid's files are {SERVICE}'s"

    spool = site.home / "spool" / "local"
    spool.chmod(0o770)  # the group could queue jobs for any user
    try:
        status, checks = _doctor(site)
        assert status == 1 and checks["cluster local"]["detail"].startswith(
            f"its pool runs as root: {spool}: {SERVICE}'s alone, not writable by group or others")
    finally:
        spool.chmod(0o700)

    log = site.home / "log" / "cigri.log"
    os.chown(log, 0, 0)  # as a cycle run by root would leave it
    try:
        status, checks = _doctor(site)
        assert status == 1 and checks["ownership"]["detail"] == (
            f"{log} is root's, not {SERVICE}'s (the database's owner): chown {SERVICE} {log}")
    finally:
        service = pwd.getpwnam(SERVICE)
        os.chown(log, service.pw_uid, service.pw_gid)



def test_doctor_fails_the_layout_of_the_issue() -> None:
    """The server under its account, which also runs the pool: every user's campaign on local was
    refused while ``cigri doctor`` said all was well."""
    site = Site(account=SERVICE)
    try:
        site.start()
        status, checks = _doctor(site)
        assert status == 1 and checks["cluster local"]["detail"] == (
            f"its pool runs as {SERVICE}, which runs only {SERVICE}'s jobs: the users' campaigns naming it are "
            "refused; run it as root (pool_account = \"root\", conf/cigri-pool.service) or remove it")
    finally:
        site.close()


def test_the_pool_down_is_a_failed_check_and_a_cluster_event(site: Site) -> None:
    site.stop_pool()
    try:
        status, checks = _doctor(site)
        assert status == 1 and checks["cluster local"]["detail"] == (
            "its pool does not run: start it as root (cigri pool local; conf/cigri-pool.service)")
        wait_for(lambda: any(e["code"] == "CLUSTER_UNREACHABLE" and e["cluster"] == "local"
                             and "its pool does not run" in e["message"]
                             for e in site.json(SERVICE, "gridevents", "-a")), 60, "the cluster's event", step=0.3)
    finally:
        site.start_pool()


def test_a_root_pool_refuses_a_spool_others_may_write(site: Site) -> None:
    spool = site.home / "spool" / "local"
    spool.chmod(0o733)
    try:
        refused = subprocess.run([str(site.bin / "cigri"), "pool", "local"], env=site.server_env(),
                                 capture_output=True, text=True, timeout=60)
    finally:
        spool.chmod(0o700)
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr.startswith(f"cigri: cigri pool: {spool}: {SERVICE}'s alone, not writable by group or others")


@pytest.mark.parametrize("command", ["server", "cycle"])
def test_root_driving_the_accounts_grid_is_refused(site: Site, command: str) -> None:
    """Root over a state directory the service account owns left it root's files; it is refused,
    naming the account to run it as."""
    refused = subprocess.run([str(site.bin / "cigri"), command], env=site.server_env(), capture_output=True,
                             text=True, timeout=60)
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == (f"cigri: cigri {command}: the grid at {site.home} is {SERVICE}'s: run it as {SERVICE} "
                              f"(sudo -u {SERVICE} cigri {command}), not as root\n")
