"""The PostgreSQL store on a real server (Debian's postgresql, tests/postgres.py): its schema and
migrations, the write lock, the lease and its fencing epoch (also on SQLite), and the URL kept
out of messages."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from harness import Cigri
from postgres import drop_database, fresh_database, replicated, server

from cigri import config
from cigri.db import KNOWN_MIGRATIONS, leader, notifications, open_store, schema_version, store, write
from cigri.db.copy import TABLES
from cigri.doctor import Check, diagnose
from cigri.db.postgres import WRITE_LOCK, shown, translate
from cigri.errors import CigriError, ConfigError, Fenced, Unavailable


@pytest.fixture(scope="module")
def pg_server() -> Iterator[str]:
    with server() as url:
        yield url


@pytest.fixture
def pg_url(pg_server: str, request: pytest.FixtureRequest) -> Iterator[str]:
    name = "s_" + request.node.name.replace("[", "_").replace("]", "").replace("-", "_")[:50].lower()
    yield fresh_database(pg_server, name)
    drop_database(pg_server, name)


@contextlib.contextmanager
def held_write(db: store.Database, seconds: float) -> Iterator[None]:
    """Another thread holds a write transaction of ``db`` for ``seconds`` from the block's start;
    the block's end waits for it to commit."""
    holding = threading.Event()

    def hold() -> None:
        with write(db):
            holding.set()
            time.sleep(seconds)

    thread = threading.Thread(target=hold)
    thread.start()
    holding.wait(5)
    try:
        yield
    finally:
        thread.join()


@pytest.mark.parametrize(("sqlite", "psycopg"), [
    ("SELECT * FROM t WHERE a = ? AND b = ?", "SELECT * FROM t WHERE a = %s AND b = %s"),
    ("SELECT :since + k * :sub", "SELECT %(since)s + k * %(sub)s"),
    ("SELECT '50%', name FROM t WHERE name LIKE ? ESCAPE '\\'", "SELECT '50%%', name FROM t WHERE name LIKE %s ESCAPE '\\'"),
    ("SELECT x::bigint, 'a?b', \"odd?name\" FROM t -- why?\nWHERE y = ?",
     "SELECT x::bigint, 'a?b', \"odd?name\" FROM t -- why?\nWHERE y = %s"),
    ("SELECT 'it''s ?' , ?", "SELECT 'it''s ?' , %s"),
])
def test_placeholders_become_psycopgs_and_literals_stay(sqlite: str, psycopg: str) -> None:
    assert translate(sqlite) == psycopg


def test_a_fresh_store_gets_the_whole_schema_and_every_migration(pg_url: str) -> None:
    db = open_store(pg_url)
    assert schema_version(db) == KNOWN_MIGRATIONS[-1]
    tables = {name for (name,) in db.conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert {"campaigns", "tasks", "jobs", "events", "leader", "task_counts", "cigri_migrations"} <= tables
    recorded = [name for (name,) in db.conn.execute("SELECT name FROM cigri_migrations ORDER BY id")]
    assert recorded == KNOWN_MIGRATIONS
    db.close()
    again = open_store(pg_url)  # a second open applies nothing
    assert [n for (n,) in again.conn.execute("SELECT name FROM cigri_migrations ORDER BY id")] == KNOWN_MIGRATIONS
    again.close()


def test_a_store_a_newer_cigri_wrote_is_refused_in_one_line(pg_url: str) -> None:
    open_store(pg_url).close()
    db = open_store(pg_url)
    db.conn.execute("INSERT INTO cigri_migrations(name, applied_at) VALUES ('m999_future', now())")
    db.close()
    with pytest.raises(CigriError, match=r"written by a newer cigri \(schema m999_future") as refused:
        open_store(pg_url)
    assert "\n" not in str(refused.value)


def test_the_schema_tables_match_sqlites(pg_url: str, tmp_path: Path) -> None:
    """Column for column: a statement written for one store finds the same columns in the other."""
    lite = store.connect(tmp_path / "cigri.db")
    pg = open_store(pg_url)
    lite_tables = {name for (name,) in lite.conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '\\_%' "
        "ESCAPE '\\'")}
    for table in lite_tables:
        lite_columns = [row[1] for row in lite.conn.execute(f"PRAGMA table_info({table})")]
        pg_columns = [name for (name,) in pg.conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
            [table])]
        assert pg_columns == lite_columns, table
    lite_indexes = {name for (name,) in lite.conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL AND name NOT LIKE 'idx\\_%' ESCAPE '\\'")}
    pg_indexes = {name for (name,) in pg.conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = 'public'")}
    assert lite_indexes <= pg_indexes


def test_writes_queue_on_one_lock(pg_url: str) -> None:
    """A second writer waits for the first to commit, as on SQLite: one state change at a time."""
    first, second = open_store(pg_url), open_store(pg_url)
    waited = []
    with held_write(first, 0.5):
        started = time.monotonic()
        with write(second) as conn:
            waited.append(time.monotonic() - started)
            assert conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = ?",
                                [WRITE_LOCK & 0xFFFFFFFF]).fetchone()[0] == 1
    assert waited[0] >= 0.3


def test_a_write_that_fails_leaves_nothing(pg_url: str) -> None:
    db = open_store(pg_url)
    with pytest.raises(RuntimeError), write(db) as conn:
        conn.execute("INSERT INTO clusters(name, backend) VALUES ('c1', 'local')")
        raise RuntimeError("midway")
    assert db.conn.execute("SELECT count(*) FROM clusters").fetchone()[0] == 0
    assert not db.conn.in_transaction


@pytest.fixture(params=["sqlite", "postgresql"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[store.Database]:
    if request.param == "sqlite":
        db = open_store(tmp_path / "cigri.db")
    else:
        db = open_store(request.getfixturevalue("pg_url"))
    yield db
    db.close()


def test_the_lease_goes_to_one_holder_and_its_epoch_grows_at_each_takeover(any_store: store.Database) -> None:
    with write(any_store) as conn:
        assert leader.claim(conn, "a:1", 0.5) == 1
        assert leader.claim(conn, "b:2", 0.5) is None  # held
        assert leader.claim(conn, "a:1", 0.5) == 1  # kept
    time.sleep(0.7)
    with write(any_store) as conn:
        assert leader.renew(conn, 1, 0.5) is False  # expired: a's next write would be fenced
        assert leader.claim(conn, "b:2", 5) == 2
        assert leader.claim(conn, "a:1", 5) is None
        assert leader.renew(conn, 2, 5) is True
        leader.release(conn, 2)
        assert leader.claim(conn, "a:1", 5) == 3  # given up: taken at once
        assert leader.current(conn)["holder"] == "a:1"


def test_a_fenced_handle_writes_nothing(pg_url: str) -> None:
    """The leader that froze past its lease wakes up with an old epoch: its write rolls back."""
    old, new = open_store(pg_url), open_store(pg_url)
    with write(old) as conn:
        epoch = leader.claim(conn, "old:1", 0.3)
    old.fence = (epoch, 0.3)
    with write(old) as conn:  # while the lease holds, its writes go through and renew it
        conn.execute("INSERT INTO clusters(name, backend) VALUES ('kept', 'local')")
    time.sleep(0.5)
    with write(new) as conn:
        assert leader.claim(conn, "new:2", 5) == epoch + 1
    with pytest.raises(Fenced, match=f"epoch {epoch}"), write(old) as conn:
        conn.execute("INSERT INTO clusters(name, backend) VALUES ('lost', 'local')")
    assert [n for (n,) in new.conn.execute("SELECT name FROM clusters ORDER BY id")] == ["kept"]


def test_the_url_is_shown_without_its_password() -> None:
    assert shown("postgresql://cigri:s3cret@db.example.org:5433/grid") == "postgresql://cigri@db.example.org:5433/grid"
    assert "s3cret" not in shown("postgresql://db.example.org/grid?password=s3cret")


def test_an_unreachable_store_is_one_line_without_the_password() -> None:
    with pytest.raises(CigriError) as refused:
        open_store("postgresql://cigri:s3cret@127.0.0.1:1/grid?connect_timeout=2")
    assert "s3cret" not in str(refused.value) and "\n" not in str(refused.value)
    assert str(refused.value).startswith("database postgresql://cigri@127.0.0.1:1/grid:")


def test_the_configuration_takes_a_postgresql_url_only() -> None:
    loaded = config.load(environ={"CIGRI_DATABASE_URL": "postgresql://cigri@db/grid", "CIGRI_HOME": "/tmp/x"},
                         system_files=False)
    assert loaded.store_location == "postgresql://cigri@db/grid"
    with pytest.raises(ConfigError, match="database.url: expected postgresql://"):
        config.load(environ={"CIGRI_DATABASE_URL": "mysql://db/grid"}, system_files=False)
    with pytest.raises(ConfigError, match="cigri.leader_lease: must be > 0"):
        config.load(environ={"CIGRI_DATABASE_URL": "postgresql://db/grid", "CIGRI_LEADER_LEASE": "0"},
                    system_files=False)


def test_db_copy_brings_a_running_sqlite_grid_over_table_for_table(cigri: Cigri, pg_url: str) -> None:
    cigri.env.pop("CIGRI_DATABASE_URL", None)  # the grid copied is SQLite's, whatever store the suite uses
    program = cigri.script("task.sh", "sleep 30\n")
    first = cigri.submit(cigri.jdl("a", params=["x 1", "y 2", "z 3"], exec_file=str(program)))
    second = cigri.submit(cigri.jdl("b", params=["w 4"], exec_file=str(program)))
    cigri.run("griddel", str(second))
    cigri.cycle()
    copied = cigri.run("cigri", "db", "copy", "--to", pg_url).stdout
    assert "2 campaigns" in copied and "4 tasks" in copied and "3 jobs" in copied
    lite = sqlite3.connect(cigri.home / "cigri.db")
    pg = open_store(pg_url)
    for table in TABLES:
        lite_rows = sorted(map(tuple, lite.execute(f"SELECT * FROM {table}")), key=repr)
        pg_rows = sorted(map(tuple, pg.conn.execute(f"SELECT * FROM {table}")), key=repr)
        assert pg_rows == lite_rows, table
    assert any(row for row in lite.execute("SELECT * FROM jobs WHERE campaign_id = ?", [first]))
    highest = lite.execute("SELECT seq FROM sqlite_sequence WHERE name = 'tasks'").fetchone()[0]
    assert store.next_id(pg.conn, "tasks") == highest + 1  # ids go on past every one SQLite gave
    refused = cigri.run("cigri", "db", "copy", "--to", pg_url, expect=1).stderr
    assert refused.startswith("cigri: postgresql://") and "not empty" in refused and refused.count("\n") == 1


def test_db_copy_refuses_a_password_on_the_command_line(cigri: Cigri) -> None:
    cigri.env.pop("CIGRI_DATABASE_URL", None)
    refused = cigri.run("cigri", "db", "copy", "--to", "postgresql://cigri:s3cret@127.0.0.1/grid", expect=2).stderr
    assert "no password on a command line" in refused and "s3cret" not in refused


def test_a_store_follows_its_primary_to_the_promoted_replica() -> None:
    """A multi-host URL and a synchronous replica: the primary killed, the store answers in one
    line (Unavailable) until the replica is promoted, then goes on with every committed row."""
    with replicated() as (primary, standby):
        url = (f"postgresql://cigri@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/postgres"
               "?target_session_attrs=read-write&connect_timeout=3")
        db = open_store(url)
        for n in range(50):  # fifty commits, each acknowledged once the replica has it
            with write(db) as conn:
                conn.execute("INSERT INTO clusters(name, backend) VALUES (?, 'local')", [f"c{n}"])
        primary.kill()
        with pytest.raises(Unavailable) as lost:
            db.conn.execute("SELECT count(*) FROM clusters")
        assert "\n" not in str(lost.value) and str(lost.value).startswith("database postgresql://cigri@")
        with pytest.raises(Unavailable):  # the replica is read-only until promoted: no server to write to
            with write(db):
                pass
        standby.promote()
        started = time.monotonic()
        with write(db) as conn:
            conn.execute("INSERT INTO clusters(name, backend) VALUES ('after', 'local')")
        assert time.monotonic() - started < 10
        names = [n for (n,) in db.conn.execute("SELECT name FROM clusters ORDER BY id")]
        assert names == [f"c{n}" for n in range(50)] + ["after"]


def test_a_connection_lost_inside_a_write_is_never_carried_on_outside_it(pg_server: str, pg_url: str) -> None:
    db = open_store(pg_url)
    with pytest.raises(Unavailable, match="lost inside a transaction"), write(db) as conn:
        conn.execute("INSERT INTO clusters(name, backend) VALUES ('half', 'local')")
        with psycopg.connect(pg_server, autocommit=True) as admin:  # the server ends this session
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'cigri' "
                          "AND datname = ?".replace("?", "%s"), [pg_url.rsplit("/", 1)[1]])
        with contextlib.suppress(Unavailable):
            conn.execute("SELECT 1")  # finds the session gone
        conn.execute("INSERT INTO clusters(name, backend) VALUES ('after-loss', 'local')")
    assert db.conn.execute("SELECT count(*) FROM clusters").fetchone()[0] == 0  # reconnected: nothing kept


def test_doctor_checks_the_postgresql_store_and_names_who_runs_the_cycles(pg_url: str, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CIGRI_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CIGRI_DATABASE_URL", pg_url)
    monkeypatch.setenv("CIGRI_CONFIG", str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("")

    def checks() -> dict[str, Check]:
        return {check.what: check for check in diagnose({})}

    assert not checks()["database"].ok and "run cigri db init" in checks()["database"].detail
    db = open_store(pg_url)
    found = checks()
    assert found["database"].ok and "PostgreSQL, no migration pending" in found["database"].detail
    assert not found["cycles"].ok and "no server has run the cycles" in found["cycles"].detail
    with write(db) as conn:
        leader.claim(conn, "host-a:42", 30)
    assert checks()["cycles"].ok and "run by host-a:42 (epoch 1)" in checks()["cycles"].detail
    with write(db) as conn:
        leader.release(conn, 1)
    assert not checks()["cycles"].ok and "lapsed" in checks()["cycles"].detail


def test_db_init_and_path_name_the_postgresql_store_without_its_password(cigri: Cigri, pg_url: str) -> None:
    cigri.env["CIGRI_DATABASE_URL"] = pg_url
    assert cigri.run("cigri", "db", "path").stdout.strip() == pg_url
    assert cigri.run("cigri", "db", "init").stdout.strip() == f"{pg_url}: schema {KNOWN_MIGRATIONS[-1]}"
    assert cigri.run("cigri", "db", "upgrade").stdout.strip() == f"{pg_url}: schema {KNOWN_MIGRATIONS[-1]}"
    assert not (cigri.home / "cigri.db").exists()  # no SQLite file beside it


def test_a_notification_is_taken_by_one_sender_and_a_fenced_one_takes_none(any_store: store.Database) -> None:
    """Before a send the message is reserved in a write, fenced on PostgreSQL: two servers never
    both send it, and one that lost the cycles sends nothing more."""
    with write(any_store) as conn:
        subscription = conn.execute("INSERT INTO subscriptions(\"user\", kind, target, severity, created_at) "
                                    "VALUES ('u', 'webhook', 'http://x', 'low', 0) RETURNING id").fetchone()[0]
        message = conn.execute("INSERT INTO outbox(subscription_id, severity, subject, document, next_try_at, "
                               "created_at) VALUES (?, 'low', 's', '{}', 0, 0) RETURNING id", [subscription]).fetchone()[0]
        assert [m["id"] for m in notifications.due(conn, 10, 5)] == [message]
        assert notifications.reserve(conn, [message], 10, 310) == {message}
        assert notifications.reserve(conn, [message], 10, 310) == set()  # another sender has it
        assert notifications.due(conn, 10, 5) == [] and len(notifications.due(conn, 311, 5)) == 1


def test_a_postgresql_url_without_psycopg_installed_is_one_line(tmp_path: Path) -> None:
    """An install without the extra: the admin is told what to install, not a traceback."""
    script = ("import sys; sys.modules['psycopg'] = None; sys.argv = ['cigri', 'db', 'init']\n"
              "from cigri.cli.admin import main\nmain()\n")
    env = {"PATH": os.environ["PATH"], "CIGRI_HOME": str(tmp_path / "home"), "CIGRI_CONFIG": str(tmp_path / "none"),
           "CIGRI_DATABASE_URL": "postgresql://cigri@127.0.0.1:1/grid"}
    (tmp_path / "none").write_text("")
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr == ("cigri: database.url: a PostgreSQL store needs psycopg: "
                             "pip install 'cigri[postgresql]'\n")


def test_opening_an_up_to_date_store_never_waits_for_a_write(pg_url: str) -> None:
    """A server opens connections as reads arrive: one must not queue behind a cycle's write."""
    open_store(pg_url).close()  # the schema made
    with held_write(open_store(pg_url), 3):
        started = time.monotonic()
        reader = open_store(pg_url)
        opened = time.monotonic() - started
    assert opened < 1.5, f"opening waited {opened:.1f}s for the write lock"
    assert reader.conn.execute("SELECT count(*) FROM campaigns").fetchone()[0] == 0
