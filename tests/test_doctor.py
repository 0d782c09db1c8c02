"""``cigri doctor`` through the real command: a healthy installation, then one broken thing at a time."""

from __future__ import annotations

import json
import socket
import sqlite3
from pathlib import Path

from harness import Cigri


def _doctor(cigri: Cigri, expect: int) -> dict[str, dict[str, object]]:
    result = cigri.run("cigri", "doctor", "--json", expect=expect)
    return {check["what"]: check for check in json.loads(result.stdout)}


def _failed(checks: dict[str, dict[str, object]]) -> list[str]:
    return sorted(what for what, check in checks.items() if not check["ok"])


def test_a_healthy_installation_passes(cigri: Cigri) -> None:
    cigri.run("cigri", "db", "init")
    checks = _doctor(cigri, 0)
    assert _failed(checks) == []
    assert {"configuration", "database", "permissions: database", "permissions: spool", "cluster local"} <= set(checks)
    plain = cigri.run("cigri", "doctor").stdout
    assert "database" in plain and "FAILED" not in plain


def test_each_problem_is_named_and_exits_1(cigri: Cigri, tmp_path: Path) -> None:
    cigri.run("cigri", "db", "init")
    (cigri.home / "cigri.db").chmod(0o644)
    token = tmp_path / "token"
    token.write_text("secret")
    token.chmod(0o640)
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with cigri.config.open("a") as conf:
        conf.write(f'[clusters.gone]\nbackend = "slurm"\ntransport = "rest"\nbase_url = "http://127.0.0.1:{port}"\n'
                   f'user = "u"\ntoken_file = "{token}"\ntimeout = 2\n')
    checks = _doctor(cigri, 1)
    assert _failed(checks) == ["cluster gone", "permissions: clusters.gone.token_file", "permissions: database"]
    assert checks["permissions: database"]["detail"].endswith(f"is 0644; run chmod 0600 {cigri.home / 'cigri.db'}")
    assert "secret" not in json.dumps(checks)


def test_a_corrupt_database_and_a_bad_configuration(cigri: Cigri) -> None:
    cigri.submit(cigri.jdl("some", exec_file="/bin/true", nb_jobs=300))
    database = cigri.home / "cigri.db"
    conn = sqlite3.connect(database)
    root, size = conn.execute("SELECT rootpage, (SELECT page_size FROM pragma_page_size) FROM sqlite_master "
                              "WHERE name = 'tasks'").fetchone()
    conn.close()
    data = bytearray(database.read_bytes())
    data[(root - 1) * size + 8:root * size] = bytes(size - 8)  # zero the table's root page past its header
    database.write_bytes(bytes(data))
    checks = _doctor(cigri, 1)
    assert _failed(checks) == ["database"], checks
    assert "malformed" in str(checks["database"]["detail"]) or "integrity" in str(checks["database"]["detail"])

    cigri.config.write_text("[cigri]\ncycle_period = -1\n")
    checks = _doctor(cigri, 1)
    assert list(checks) == ["configuration"]
    assert checks["configuration"]["detail"] == "cigri.cycle_period: must be > 0 and finite"


def test_a_database_written_by_a_newer_cigri_is_refused_not_written(cigri: Cigri) -> None:
    """After a rolled-back upgrade, this cigri must not write a schema it does not know."""
    cigri.submit(cigri.jdl("some", exec_file="/bin/true", nb_jobs=3))
    database = cigri.home / "cigri.db"
    with sqlite3.connect(database) as conn:
        conn.execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
                     "VALUES ('cigri', 'm999_future', '2027-01-01')")
    before = _dump(database)
    for command in (("cigri", "cycle"), ("cigri", "db", "upgrade"), ("gridstat",)):
        error = cigri.run(*command, expect=1).stderr.strip()
        assert "written by a newer cigri (schema m999_future" in error and len(error.splitlines()) == 1, error
    assert _dump(database) == before
    checks = _doctor(cigri, 1)
    assert _failed(checks) == ["database"]
    assert checks["database"]["detail"] == f"{database}: written by a newer cigri (schema m999_future)"


def _dump(database: Path) -> list[str]:
    conn = sqlite3.connect(database)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def test_a_tcp_port_off_loopback_without_tls_is_named(cigri: Cigri) -> None:
    """Tokens are refused over plain HTTP off loopback: such a listen is a configuration to fix."""
    cigri.run("cigri", "db", "init")
    cigri.config.write_text(cigri.config.read_text() + '[server]\nlisten = "192.0.2.1:8443"\n')
    result = cigri.run("cigri", "doctor", "--json", expect=1)
    checks = {c["what"]: c for c in json.loads(result.stdout)}
    assert checks["server: listen"] == {"what": "server: listen", "ok": False, "detail": (
        "192.0.2.1:8443 without server.tls_cert: tokens are refused there (they would travel in clear)")}


def test_the_users_cluster_tokens_are_checked_private(cigri: Cigri) -> None:
    """gridtoken's store holds users' own tokens: a file others can read is named, with its chmod."""
    cigri.run("cigri", "db", "init")
    store = cigri.home / "tokens" / "dahu"
    store.mkdir(parents=True, mode=0o700)
    (cigri.home / "tokens").chmod(0o700)
    token = store / "alice"
    token.write_text("eyJ.secret\n")
    token.chmod(0o644)
    checks = {c["what"]: c for c in json.loads(cigri.run("cigri", "doctor", "--json", expect=1).stdout)}
    assert checks["permissions: token store: dahu/alice"] == {
        "what": "permissions: token store: dahu/alice", "ok": False, "detail": f"{token} is 0644; run chmod 0600 {token}"}
    assert checks["permissions: token store"]["ok"] and checks["permissions: token store: dahu"]["ok"]
