"""A full disk and a read-only database: one clear line, nothing half-written, nothing corrupted.

``CIGRI_HOME`` is a small tmpfs mounted for the test (the tests run as root in CI, like the
real clusters), filled by a submission too big for it, then remounted read-only.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import Cigri, require_root


@pytest.fixture
def small_home(cigri: Cigri) -> Iterator[Cigri]:
    """The installation with its home on a 1 MiB tmpfs, unmounted after the test."""
    require_root("the test mounts a tmpfs")
    cigri.home.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(cigri.home)], check=True)
    try:
        yield cigri
    finally:
        cigri.cleanup()
        subprocess.run(["umount", "-l", str(cigri.home)], check=True)


def _campaigns(cigri: Cigri) -> list[tuple[int, int]]:
    """(campaign id, its tasks) after checking the database's integrity."""
    conn = sqlite3.connect(f"file:{cigri.home / 'cigri.db'}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return conn.execute("SELECT c.id, (SELECT count(*) FROM tasks t WHERE t.campaign_id = c.id) "
                            "FROM campaigns c ORDER BY c.id").fetchall()
    finally:
        conn.close()


def _one_line(result: subprocess.CompletedProcess[str], command: str) -> str:
    assert "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(f"{command}: ")
    return line


def test_a_full_disk_refuses_the_submission_and_keeps_the_rest(small_home: Cigri, tmp_path: Path) -> None:
    cigri = small_home
    first = cigri.submit(cigri.jdl("small", exec_file="/bin/true", nb_jobs=10))
    params = tmp_path / "big.txt"  # outside the tmpfs: ~3 MiB of tasks for a 1 MiB disk
    params.write_text("".join(f"task{i} {'x' * 40} {i}\n" for i in range(50_000)))
    result = cigri.run("gridsub", "-f", str(cigri.jdl("big", exec_file="/bin/true", param_file=str(params))),
                       expect=1)
    assert "database or disk is full" in _one_line(result, "gridsub")
    assert _campaigns(cigri) == [(first, 10)]
    assert cigri.stat(first)["tasks"]["total"] == 10
    # still usable: a small campaign fits in what is left once the failed transaction is gone
    second = cigri.submit(cigri.jdl("after", exec_file="/bin/true", nb_jobs=5))
    assert _campaigns(cigri) == [(first, 10), (second, 5)]


def test_a_read_only_database_is_one_line_and_stays_intact(small_home: Cigri) -> None:
    cigri = small_home
    first = cigri.submit(cigri.jdl("before", exec_file="/bin/true", nb_jobs=7))
    subprocess.run(["mount", "-o", "remount,ro", str(cigri.home)], check=True)
    try:
        for command, args in (("gridsub", ["-f", str(cigri.jdl("refused", exec_file="/bin/true", nb_jobs=3))]),
                              ("cigri", ["cycle"]), ("griddel", [str(first)])):
            result = cigri.run(command, *args, expect=None)
            assert result.returncode == 1, (command, result.stderr)
            line = _one_line(result, command)
            assert "read-only" in line or "readonly" in line or "unable to open" in line, line
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(cigri.home)], check=True)
    assert _campaigns(cigri) == [(first, 7)]
    assert cigri.stat(first)["state"] == "in_treatment"
