"""Who jobs run as, in cigri's own logic: the user map and its refusals, the identity keys of the
configuration, gridtoken, and the core-hours per user. Jobs really running as their owners on
every backend: tests/conformance/test_identity.py."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cigri import api, clock, config, updator
from cigri import db as database
from cigri.backends import identity
from cigri.cli import gridclusters, gridtoken
from cigri.errors import ConfigError, Refused, SubmissionRefused
from cigri.cycle_context import CycleContext
from cigri.grid import Grid, open_grid
from cigri.users import acting_user

ME = acting_user()
SUDO = {"transport": "ssh", "host": "h", "user": "cigri", "identity": "sudo"}
TOKENS_CLUSTER = ('[clusters.dahu]\nbackend = "slurm"\ntransport = "rest"\nbase_url = "http://127.0.0.1:9"\n'
                  'user = "cigri"\ntoken_file = "/nonexistent"\nidentity = "tokens"\n')


@pytest.fixture
def environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private configuration file (returned) and home, for grids and commands alike."""
    for name in [n for n in os.environ if n.startswith("CIGRI_")]:
        monkeypatch.delenv(name)
    monkeypatch.setattr(config, "SYSTEM_FILE", tmp_path / "absent.toml")
    monkeypatch.setattr(config, "USER_FILE", tmp_path / "absent.toml")
    path = tmp_path / "cigri.toml"
    monkeypatch.setenv("CIGRI_CONFIG", str(path))
    monkeypatch.setenv("CIGRI_HOME", str(tmp_path / "home"))
    yield path


def grid_of(path: Path, text: str) -> Grid:
    path.write_text(text)
    return open_grid(config.load())


def test_the_user_map() -> None:
    options = {**SUDO, "logins": {"alice": "asmith", "eve": ""}}
    assert [identity.login(options, u) for u in ("alice", "eve", "bob")] == ["asmith", None, "bob"]
    assert identity.login({**options, "logins_only": True}, "bob") is None
    assert identity.acting_login(options, "alice") == "asmith"
    assert identity.acting_login(options, "") == "cigri"  # cigri's own jobs: the account
    assert identity.acting_login({**options, "identity": "account"}, "alice") == "cigri"
    with pytest.raises(SubmissionRefused, match="eve has no login on this cluster"):
        identity.acting_login(options, "eve")
    with pytest.raises(SubmissionRefused, match="not a plain user name"):
        identity.acting_login(options, "-rf")  # never an option of sudo, squeue or oarstat
    assert identity.remote_home(options, "alice") == "/home/asmith"
    assert identity.remote_home({**options, "home": "/users/{login}"}, "alice") == "/users/asmith"
    assert identity.remote_home({**options, "identity": "account", "home": "/users/{login}"}, "alice") == "/users/cigri"
    assert identity.remote_home(options, "eve") == "/home/cigri"  # no login: never runs there anyway


def test_who_a_cluster_refuses() -> None:
    def refusal(backend: str, options: dict[str, object], user: str, account: str = "root",
                token: bool = False) -> str | None:
        return identity.refusal(backend, options, user, account, lambda _user: token)

    assert refusal("slurm", SUDO, "alice") is None
    assert refusal("slurm", {**SUDO, "logins": {"alice": ""}}, "alice") == "alice has no login on this cluster (its logins)"
    assert "not a plain user name" in str(refusal("slurm", SUDO, "-rf"))
    assert refusal("slurm", {**SUDO, "identity": "account"}, "-rf") is None  # runs as the account
    ident = {"transport": "rest", "user": "cigri", "identity": "ident"}
    assert "OAR's REST API" in str(refusal("oar", ident, "bob-x"))  # OAR 2.5 would read "bob"
    assert refusal("oar", {**ident, "logins": {"bob-x": "bob_x"}}, "bob-x") is None
    tokens = {"transport": "rest", "user": "cigri", "identity": "tokens"}
    assert refusal("slurm", tokens, "alice") == "alice has no token for this cluster (gridtoken add)"
    assert refusal("slurm", tokens, "alice", token=True) is None
    assert refusal("local", {}, "alice", account="root") is None
    assert refusal("local", {}, "alice", account="alice") is None
    assert refusal("local", {}, "bob", account="alice") == ("cigri runs as alice, not root: it runs no one else's jobs "
                                                          "on the local cluster (bob's would run with its rights)")
    assert refusal("local", {"logins": {"bob": "alice"}}, "bob", account="alice") is None
    assert refusal("sim", {}, "anyone", account="nobody") is None


def test_a_login_the_cluster_never_runs_is_refused_at_submission() -> None:
    """Issue #33: root's campaign never ran and nothing said why. Its jobs would be refused by the
    cluster (OAR admits neither root nor oar) or by the local pool (no job as root for a spool
    another account writes): refused at submission, with the reason, instead."""
    def refusal(backend: str, options: dict[str, object], user: str, account: str = "cigri") -> str | None:
        return identity.refusal(backend, options, user, account, lambda _user: False)

    for options in ({"transport": "rest", "user": "cigri", "identity": "ident"}, SUDO):
        assert refusal("oar", options, "root") == ("OAR refuses the jobs of root (its admission rules admit neither "
                                                   "root nor oar): root's jobs need another login there (logins)")
        assert "OAR refuses the jobs of oar" in str(refusal("oar", {**options, "logins": {"ops": "oar"}}, "ops"))
        assert refusal("oar", {**options, "logins": {"root": "admin"}}, "root") is None
    assert refusal("oar", {**SUDO, "identity": "account"}, "root") is None  # runs as the cluster's user
    assert refusal("slurm", SUDO, "root") is None  # Slurm runs root's jobs
    root_pool = {"pool_account": "root"}
    assert refusal("local", root_pool, "root") == ("the local pool runs no job as root: cigri runs as cigri, whose "
                                                   "spool never has a job run with root's rights")
    assert refusal("local", root_pool, "root", account="root") is None  # root's own spool, root's own job
    assert refusal("local", root_pool, "alice") is None
    assert refusal("local", {"pool_account": "ops"}, "alice") == (
        "the local pool runs as ops, not root: it runs no one else's jobs on the local cluster (alice's would run "
        "with its rights)")


@pytest.mark.parametrize(("table", "error"), [
    ('transport = "ssh"\nhost = "h"\nuser = "u"\nidentity = "ident"',
     "clusters.c.identity: expected one of account, sudo with backend 'slurm' and transport 'ssh', got 'ident'"),
    ('transport = "rest"\nbase_url = "http://h"\nuser = "u"\ntoken_file = "t"\nidentity = "sudo"',
     "clusters.c.identity: expected one of account, impersonate, tokens"),
    ('transport = "ssh"\nhost = "h"\nuser = "u"\nlogins = {alice = "-rf"}',
     "clusters.c.logins.alice: expected a login name, or \"\" for none, got '-rf'"),
    ('transport = "ssh"\nhost = "h"\nuser = "u"\nlogins = {alice = 3}', "clusters.c.logins.alice"),
    ('transport = "ssh"\nhost = "h"\nuser = "u"\nlogins = "alice"', "clusters.c.logins: expected dict"),
])
def test_identity_keys_are_checked(environment: Path, table: str, error: str) -> None:
    environment.write_text(f'[clusters.c]\nbackend = "slurm"\n{table}\n')
    with pytest.raises(ConfigError, match=error.replace("(", r"\(").replace(")", r"\)")):
        config.load()


def test_ident_takes_no_password(environment: Path) -> None:
    environment.write_text('[clusters.c]\nbackend = "oar"\ntransport = "rest"\nbase_url = "http://h"\nuser = "u"\n'
                           'identity = "ident"\npassword_file = "p"\n')
    with pytest.raises(ConfigError, match="clusters.c.password_file: not with identity 'ident'"):
        config.load()


def _jdl(cluster: str = "local", **fields: object) -> str:
    return json.dumps({"name": "c", "exec_file": "/bin/true", "nb_jobs": 2, "clusters": {cluster: {}}, **fields})


def test_a_user_without_a_login_is_refused_at_submission_and_shares_says_why(environment: Path,
                                                                             tmp_path: Path) -> None:
    grid = grid_of(environment, f'[clusters.local]\nbackend = "local"\nlogins = {{"{ME}" = "{ME}"}}\n'
                                "logins_only = true\n")
    try:
        with pytest.raises(Refused, match="^JDL: cluster local: alice has no login on this cluster"):
            api.submit(grid, _jdl(), base_dir=tmp_path, user="alice")
        assert grid.db.execute("SELECT count(*) FROM campaigns").fetchone()[0] == 0
        campaign_id, _ = api.submit(grid, _jdl(), base_dir=tmp_path, user=ME)
    finally:
        grid.close()
    grid = grid_of(environment, '[clusters.local]\nbackend = "local"\nlogins_only = true\n')  # the map changed
    try:
        shares = api.current_shares(grid, user="root")
        assert shares["clusters_refused"] == [{"campaign": campaign_id, "cluster": "local",
                                               "why": f"{ME} has no login on this cluster (its logins)"}]
        assert shares["campaigns"] == []  # nothing may run anywhere
    finally:
        grid.close()


def test_gridtoken_add_list_remove(environment: Path) -> None:
    environment.write_text(TOKENS_CLUSTER + '[clusters.local]\nbackend = "local"\n')
    runner = CliRunner()
    added = runner.invoke(gridtoken.app, ["add", "dahu", "--json"], input="SLURM_JWT=eyJ.secret.sig\n")
    assert added.exit_code == 0, added.output
    assert json.loads(added.stdout) == {"cluster": "dahu", "login": ME}
    store = environment.parent / "home" / "tokens"
    token = store / "dahu" / ME
    assert token.read_text() == "eyJ.secret.sig\n"
    assert [stat.S_IMODE(p.stat().st_mode) for p in (store, store / "dahu", token)] == [0o700, 0o700, 0o600]
    listed = runner.invoke(gridtoken.app, ["list", "--json"])
    assert [t["cluster"] for t in json.loads(listed.stdout)] == ["dahu"] and "secret" not in listed.stdout
    assert "secret" not in runner.invoke(gridtoken.app, ["list"]).stdout
    refused = runner.invoke(gridtoken.app, ["add", "local"], input="x\n")
    assert refused.exit_code == 1 and "cluster local: its jobs do not run with their owner's token" in refused.stderr
    assert runner.invoke(gridtoken.app, ["add", "nowhere"], input="x\n").exit_code == 1
    empty = runner.invoke(gridtoken.app, ["add", "dahu"], input="\n")
    assert empty.exit_code == 2 and "token: empty" in empty.stderr
    assert token.read_text() == "eyJ.secret.sig\n"  # a refused token replaces nothing
    assert runner.invoke(gridtoken.app, ["remove", "dahu"]).exit_code == 0
    assert not token.exists()
    gone = runner.invoke(gridtoken.app, ["remove", "dahu"])
    assert gone.exit_code == 1 and f"cluster dahu: {ME} has no token there" in gone.stderr


def test_a_token_cannot_be_removed_while_jobs_need_it(environment: Path, tmp_path: Path) -> None:
    grid = grid_of(environment, TOKENS_CLUSTER)
    try:
        api.add_cluster_token(grid, "dahu", "t0ken", user="alice")
        campaign_id, _ = api.submit(grid, _jdl("dahu"), base_dir=tmp_path, user="alice")
        with database.write(grid.db) as conn:
            conn.execute("INSERT INTO jobs(campaign_id, cluster_id, state, remote_id, created_at) "
                         "VALUES (?, ?, 'running', '1_0', 0)", [campaign_id, grid.cluster_ids()["dahu"]])
        with pytest.raises(Refused, match="cluster dahu: 1 of alice's jobs are active there and need the token"):
            api.remove_cluster_token(grid, "dahu", user="alice")
        assert grid.tokens.get("dahu", "alice") == "t0ken"
    finally:
        grid.close()


DAY = 86400.0
MIDNIGHT = 1_767_225_600.0  # 2026-01-01 00:00 UTC


def test_core_hours_per_user_cluster_and_day(environment: Path, tmp_path: Path) -> None:
    grid = grid_of(environment, f'[cigri]\nadmins = "{ME}"\n[clusters.a]\nbackend = "sim"\ncores = 8\n'
                                '[clusters.b]\nbackend = "sim"\ncores = 8\n')
    try:
        alice, _ = api.submit(grid, _jdl("a", resources="core=2"), base_dir=tmp_path, user="alice")
        bob, _ = api.submit(grid, json.dumps({"name": "b", "exec_file": "/bin/true", "nb_jobs": 2,
                                              "clusters": {"a": {"resources": "nodes=1/core=4"}, "b": {}}}),
                            base_dir=tmp_path, user="bob")
        a, b = grid.cluster_ids()["a"], grid.cluster_ids()["b"]
        jobs = [(alice, a, MIDNIGHT - 3600, MIDNIGHT + 1800),  # 2 cores: 2 h on Dec 31, 1 h on Jan 1
                (alice, a, MIDNIGHT + 3600, None),  # running: 2 cores until now (+ 5 h)
                (bob, a, MIDNIGHT + 600, MIDNIGHT + 2400),  # 4 cores, 30 min
                (bob, b, MIDNIGHT - 7200, MIDNIGHT - 3600),  # 1 core, 1 h on Dec 31
                (bob, b, MIDNIGHT - 5 * DAY, MIDNIGHT - 4 * DAY),  # before the window
                (bob, b, None, None)]  # never started
        with database.write(grid.db) as conn:
            conn.executemany("INSERT INTO jobs(campaign_id, cluster_id, state, started_at, finished_at, created_at) "
                             "VALUES (?, ?, 'terminated', ?, ?, 0)", jobs)
        with clock.virtual(MIDNIGHT + 6 * 3600):
            everyone = api.core_hours(grid, 48, user=ME)
            own = api.core_hours(grid, 48, user="bob")
        assert everyone == [
            {"day": "2025-12-31", "user": "alice", "cluster": "a", "core_hours": 2.0, "jobs": 1},
            {"day": "2025-12-31", "user": "bob", "cluster": "b", "core_hours": 1.0, "jobs": 1},
            {"day": "2026-01-01", "user": "alice", "cluster": "a", "core_hours": 11.0, "jobs": 2},
            {"day": "2026-01-01", "user": "bob", "cluster": "a", "core_hours": 2.0, "jobs": 1}]
        assert own == [row for row in everyone if row["user"] == "bob"]  # not an admin: their own only
    finally:
        grid.close()


def test_gridclusters_by_user(environment: Path) -> None:
    environment.write_text('[clusters.a]\nbackend = "sim"\ncores = 8\n')
    runner = CliRunner()
    alone = runner.invoke(gridclusters.app, ["--by-user"])
    assert alone.exit_code == 2 and "--by-user: goes with --history HOURS" in alone.stderr
    bad = runner.invoke(gridclusters.app, ["--history", "nan", "--by-user"])
    assert bad.exit_code == 2 and "--history: must be > 0 and finite" in bad.stderr
    done = runner.invoke(gridclusters.app, ["--history", "24", "--by-user", "--json"])
    assert done.exit_code == 0 and json.loads(done.stdout) == []


def test_a_campaign_ends_without_the_epilogue_of_a_cluster_that_now_refuses_its_owner(environment: Path,
                                                                                     tmp_path: Path) -> None:
    """The epilogue is never queued where the owner's jobs cannot run (the user map changed, a
    token was removed), so the campaign must not wait for it there: it ends with the others'."""
    both = '[clusters.local]\nbackend = "local"\n[clusters.other]\nbackend = "local"\n'
    grid = grid_of(environment, both)
    try:
        jdl = json.dumps({"name": "e", "exec_file": "/bin/true", "nb_jobs": 1, "epilogue": ["true"],
                          "clusters": {"local": {}, "other": {}}})
        campaign_id, _ = api.submit(grid, jdl, base_dir=tmp_path, user=ME)
        local = grid.cluster_ids()["local"]
        with database.write(grid.db) as conn:
            conn.execute("UPDATE tasks SET state = 'terminated' WHERE campaign_id = ?", [campaign_id])
            conn.execute("UPDATE task_blocks SET next_fresh = last_id + 1 WHERE campaign_id = ?", [campaign_id])
            conn.execute("INSERT INTO jobs(campaign_id, cluster_id, kind, state, created_at) "
                         "VALUES (?, ?, 'epilogue', 'terminated', 0)", [campaign_id, local])
        assert updator.finish_campaigns(CycleContext(grid)) == []  # other's epilogue is still to run
    finally:
        grid.close()
    grid = grid_of(environment, both + "logins_only = true\n")  # other no longer runs ME's jobs
    try:
        assert updator.finish_campaigns(CycleContext(grid)) == [campaign_id]
    finally:
        grid.close()
