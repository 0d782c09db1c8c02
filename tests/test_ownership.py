"""Ownership and the admin role: the api takes the acting user as a parameter (so users are
simulated here without any environment trick), the CLI passes the real Unix user, and the
state-changing admin commands refuse a real non-admin process. Secrets never leak."""

from __future__ import annotations

import json
import os
import pwd
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from harness import Cigri
from test_events import analyse, campaign, end_job, make_grid

from cigri import api
from cigri.errors import Forbidden, NotFound
from cigri.grid import Grid
from cigri.states import JobState
from cigri.users import acting_user, is_admin, require_admin

@pytest.fixture
def grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Grid]:
    # alice and bob are names, not Unix accounts: their jobs on the local cluster run as the account
    # running the tests, which may run them whether it is root or not
    grid = make_grid(tmp_path, monkeypatch, f'[cigri]\nadmins = "carol, dave"\n[clusters.local.logins]\n'
                                            f'alice = "{acting_user()}"\nbob = "{acting_user()}"\n')
    yield grid
    grid.close()


def test_users_see_and_act_only_on_their_own_campaigns_jobs_and_events(grid: Grid, tmp_path: Path) -> None:
    """Another user's campaign, job, output, event or subscription is answered exactly as one
    that does not exist (NotFound, the same words): ids leak nothing."""
    campaign_id, (task_id,) = campaign(grid, tmp_path, 1, user="alice")
    job_id = end_job(grid, task_id, JobState.FAILED, 1)
    grid.db.execute("UPDATE jobs SET state = 'running' WHERE id = ?", [job_id])
    more = tmp_path / "more.txt"
    more.write_text("extra 1\n")
    hidden = {
        f"campaign {campaign_id}: no such campaign": [
            lambda user: api.cancel(grid, campaign_id, user=user),
            lambda user: api.pause(grid, campaign_id, user=user),
            lambda user: api.campaign_summary(grid, campaign_id, user=user),
            lambda user: api.campaign_detail(grid, campaign_id, user=user),
            lambda user: list(api.campaign_tasks(grid, campaign_id, user=user)),
            lambda user: api.campaign_jdl(grid, campaign_id, user=user),
            lambda user: api.campaign_jobs(grid, campaign_id, user=user),
            lambda user: api.list_events(grid, user=user, campaign_id=campaign_id),
            lambda user: api.extend(grid, campaign_id, api.Lines(more.open("rb"), "more.txt"), user=user),
        ],
        f"job {job_id}: no such job": [
            lambda user: api.job_info(grid, job_id, user=user),
            lambda user: api.cancel_job(grid, job_id, user=user),
            lambda user: api.job_output(grid, job_id, "stderr", user=user),
        ],
    }
    for message, calls in hidden.items():
        for call in calls:
            with pytest.raises(NotFound) as refused:
                call("bob")
            assert str(refused.value) == message
    for missing in ("campaign 999: no such campaign", "job 999: no such job"):  # the same words for no object
        with pytest.raises(NotFound, match=missing):
            (api.campaign_summary if missing.startswith("campaign") else api.job_info)(grid, 999, user="alice")
    grid.db.execute("UPDATE jobs SET state = 'failed' WHERE id = ?", [job_id])
    analyse(grid)
    event_id = api.list_events(grid, user="alice", campaign_id=campaign_id)[0]["id"]
    for call in (lambda: api.event(grid, event_id, user="bob"),
                 lambda: api.fix_events(grid, user="bob", event_id=event_id, resubmit=True)):
        with pytest.raises(NotFound, match=f"event {event_id}: no such event"):
            call()
    with pytest.raises(NotFound, match=f"campaign {campaign_id}: no such campaign"):
        api.fix_events(grid, user="bob", campaign_id=campaign_id)
    assert api.list_events(grid, user="bob") == []  # bob's listing simply does not show alice's events
    assert [c["id"] for c in api.list_campaigns(grid, user="alice")] == [campaign_id]  # summaries are public (CiGri)
    assert api.fix_events(grid, user="carol", event_id=event_id) == {"closed": 1, "resubmitted": 0}  # an admin
    assert api.campaign_detail(grid, campaign_id, user="carol")["user"] == "alice"
    api.pause(grid, campaign_id, user="alice")
    api.cancel(grid, campaign_id, user="root")


def test_cluster_events_are_fixed_by_admins_only(grid: Grid) -> None:
    from cigri import db as database
    from cigri.events import record

    with database.write(grid.db) as conn:
        event_id = record(conn, "CLUSTER_TIMEOUT", "capacity failed", cluster_id=1)
    assert [e["id"] for e in api.list_events(grid, user="bob")] == [event_id]  # everyone sees the clusters' state
    with pytest.raises(Forbidden, match="needs the admin role"):
        api.fix_events(grid, user="bob", event_id=event_id)
    with pytest.raises(Forbidden, match="needs the admin role"):
        api.fix_events(grid, user="bob", global_only=True)
    assert api.fix_events(grid, user="dave", global_only=True)["closed"] == 1


def test_a_removed_cluster_takes_its_samples_and_events_with_it(grid: Grid) -> None:
    """A cluster an admin added, that cycles sampled and that failed once, can be removed: its
    usage samples and its own events go with it (they refer to it); a campaign's would block it."""
    from cigri import db as database
    from cigri.cycle import run_cycle
    from cigri.events import record

    api.add_cluster(grid, "extra", "local", {"slots": 1}, user="carol")
    run_cycle(grid)
    extra = grid.cluster_ids()["extra"]
    with database.write(grid.db) as conn:
        record(conn, "CLUSTER_TIMEOUT", "capacity failed", cluster_id=extra)
    assert grid.db.execute("SELECT count(*) FROM counts WHERE cluster_id = ?", [extra]).fetchone()[0] == 1
    api.remove_cluster(grid, "extra", user="carol")
    assert "extra" not in {c["name"] for c in api.list_clusters(grid)}
    assert grid.db.execute("SELECT count(*) FROM events WHERE cluster_id = ?", [extra]).fetchone()[0] == 0


def test_the_admin_role(grid: Grid) -> None:
    owner = pwd.getpwuid(os.stat(grid.config.database_path).st_uid).pw_name
    assert is_admin(grid.config, "root") and is_admin(grid.config, "carol") and is_admin(grid.config, owner)
    assert not is_admin(grid.config, "bob") and not is_admin(grid.config, "carolyn")
    with pytest.raises(Forbidden) as refused:
        require_admin(grid.config, "bob", "cigri cycle")
    assert refused.value.exit_code == 1


def test_the_acting_user_ignores_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    real = pwd.getpwuid(os.geteuid()).pw_name
    for name in ("USER", "LOGNAME", "USERNAME", "CIGRI_USER"):
        monkeypatch.setenv(name, "mallory")
    assert acting_user() == api.current_user() == real


def test_state_changing_admin_commands_refuse_a_non_admin(grid: Grid, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real ``cigri`` command, in-process, with the acting user a non-admin (the interpreter
    lives under /root, so a real process of another user cannot run it here)."""
    from typer.testing import CliRunner

    from cigri.cli import admin

    monkeypatch.setattr(api, "current_user", lambda: "bob")
    for argv, what in ((["cycle"], "cigri cycle"), (["cluster", "blacklist", "local"], "blacklisting a cluster"),
                       (["db", "upgrade"], "cigri db upgrade"), (["cluster", "add", "x"], "adding a cluster")):
        result = CliRunner().invoke(admin.app, argv, prog_name="cigri")
        assert result.exit_code == 1, (argv, result.output)
        assert result.output.endswith(f": {what}: needs the admin role, and bob is not an admin\n")
    assert grid.db.execute("SELECT blacklisted FROM clusters").fetchall() == [(0,)]
    assert CliRunner().invoke(admin.app, ["cluster", "list", "--json"]).exit_code == 0  # reading is allowed


SECRET = "s3cr3t-Pa55-Zz9"


class AuthRefusing(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        self.send_response(401)
        self.end_headers()
        self.wfile.write(f"no (you sent {self.headers.get('Authorization')})".encode())  # a hostile echo

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.slow
def test_tokens_and_passwords_never_appear_in_logs_errors_or_json(cigri: Cigri) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), AuthRefusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        secrets = cigri.tmp / "secrets"
        secrets.mkdir(mode=0o700)
        (secrets / "oar.password").write_text(SECRET + "\n")
        (secrets / "slurm.token").write_text(SECRET + "\n")
        (secrets / "smtp.password").write_text(SECRET + "\n")
        with cigri.config.open("a") as conf:
            conf.write(f'[clusters.oar]\nbackend = "oar"\ntransport = "rest"\nuser = "cigri"\n'
                       f'base_url = "http://127.0.0.1:{server.server_address[1]}"\n'
                       f'password_file = "{secrets / "oar.password"}"\n'
                       f'[clusters.slurm]\nbackend = "slurm"\ntransport = "rest"\nuser = "cigri"\n'
                       f'base_url = "http://127.0.0.1:{server.server_address[1]}"\n'
                       f'token_file = "{secrets / "slurm.token"}"\n'
                       f'[notify]\nsmtp_host = "127.0.0.1"\nsmtp_port = 1\nsmtp_user = "cigri"\n'
                       f'smtp_password_file = "{secrets / "smtp.password"}"\nretry_delay = 0.0\n'
                       'user_address = "{user}@example.org"\n')
        cigri.run("gridnotify", "subscribe", "--mail", f"{acting_user()}@example.org", "-s", "low")  # no code
        outputs = [cigri.run("cigri", "-v", "cycle", "--json", expect=None) for _ in range(2)]
        outputs += [cigri.run(*argv, expect=None) for argv in (
            ("gridclusters", "--json"), ("cigri", "cluster", "list", "--json"), ("gridevents", "-a", "--json"),
            ("gridnotify", "list", "--json"), ("cigri", "cluster", "test", "oar"))]
        events = json.loads(outputs[4].stdout)
        assert {e["code"] for e in events} >= {"CLUSTER_AUTH_FAILURE"}
        texts = [o.stdout + o.stderr for o in outputs] + [p.read_text() for p in (cigri.home / "log").iterdir()]
        leaks = [t for t in texts if SECRET in t]
        assert leaks == []
    finally:
        server.shutdown()
        server.server_close()


def test_only_an_admins_gridsub_wait_drives_the_cycles(grid: Grid, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A cycle runs local jobs as whoever runs it and reads the clusters' key files: bob's
    ``gridsub --wait`` only watches (no job appears while nobody else cycles), and ends once an
    admin's cycles have run his campaign."""
    from typer.testing import CliRunner

    from cigri.cli import gridsub
    from cigri.cycle import run_cycle

    monkeypatch.setattr(api, "current_user", lambda: "bob")
    jdl = tmp_path / "bob.json"
    jdl.write_text(json.dumps({"name": "b", "params": ["a", "b"], "exec_file": "/bin/true",
                               "exec_directory": str(tmp_path), "clusters": {"local": {}}}))
    jobs_before_cycles: list[int] = []

    def admin_cycles() -> None:  # the daemon's, in production
        deadline = time.monotonic() + 30
        while not grid.db.execute("SELECT 1 FROM campaigns").fetchone() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1)  # twenty of bob's periods: a driving wait would have sent the jobs by now
        jobs_before_cycles.append(grid.db.execute("SELECT count(*) FROM jobs").fetchone()[0])
        while grid.db.execute("SELECT state FROM campaigns").fetchone() != ("terminated",) \
                and time.monotonic() < deadline:
            run_cycle(grid)
            time.sleep(0.05)

    cycling = threading.Thread(target=admin_cycles)
    cycling.start()
    result = [CliRunner().invoke(gridsub.app, ["-f", str(jdl), "--wait", "--period", "0.05"])]
    cycling.join()
    assert jobs_before_cycles == [0]
    assert result[0].exit_code == 0, result[0].output
    assert "the grid's admin starts them (`cigri daemon`); only an admin's --wait runs them" in result[0].output
    assert grid.db.execute("SELECT user, state FROM campaigns").fetchall() == [("bob", "terminated")]
