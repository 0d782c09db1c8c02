"""Submission through cigri.api on a real database: all or nothing."""

from __future__ import annotations

import getpass
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_jdl import HOME, INVALID

from cigri import api, config
from cigri.api import INSERT_CHUNK
from cigri.errors import InputError, NotFound, Refused
from cigri.grid import Grid, open_grid
from cigri.jdl import params
from cigri.jdl.parser import ParamSource

USER = getpass.getuser()


@pytest.fixture
def grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Grid]:
    for name in [n for n in os.environ if n.startswith("CIGRI_")]:
        monkeypatch.delenv(name)
    monkeypatch.setattr(config, "SYSTEM_FILE", tmp_path / "absent.toml")
    monkeypatch.setattr(config, "USER_FILE", tmp_path / "absent.toml")
    conf = tmp_path / "cigri.toml"
    conf.write_text('[clusters.local]\nbackend = "local"\n'  # other: an OAR cluster, never reached
                    '[clusters.other]\nbackend = "oar"\ntransport = "ssh"\nhost = "127.0.0.1"\nuser = "nobody"\n')
    monkeypatch.setenv("CIGRI_CONFIG", str(conf))
    monkeypatch.setenv("CIGRI_HOME", str(tmp_path / "home"))
    grid = open_grid(config.load())
    yield grid
    grid.close()


def submit(grid: Grid, document: dict[str, Any] | str, base_dir: Path) -> tuple[int, int]:
    text = document if isinstance(document, str) else json.dumps(document)
    return api.submit(grid, text, base_dir=base_dir, user=USER)


def snapshot(grid: Grid) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table: what 'the database is unchanged' means."""
    tables = [r[0] for r in grid.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {t: sorted(grid.db.execute(f"SELECT * FROM [{t}]").fetchall(), key=repr) for t in tables}


def tasks(grid: Grid, campaign_id: int) -> list[tuple[str, str]]:
    return grid.db.execute("SELECT name, param FROM tasks WHERE campaign_id = ? ORDER BY id",
                           [campaign_id]).fetchall()


def properties(grid: Grid, campaign_id: int, cluster: str) -> dict[str, Any]:
    return {name: json.loads(value) for name, value in grid.db.execute(
        "SELECT p.name, p.value FROM campaign_properties p JOIN clusters c ON c.id = p.cluster_id "
        "WHERE p.campaign_id = ? AND c.name = ?", [campaign_id, cluster])}


def test_valid_submission(grid: Grid, tmp_path: Path) -> None:
    (tmp_path / "params.txt").write_text('alpha 1 "two words"\n\n# skipped\nbeta $(x) *\n')
    document = {
        "name": "render", "param_file": "params.txt", "exec_file": "~/bin/render",
        "exec_directory": "{HOME}/work/{CAMPAIGN_ID}", "walltime": "00:05:00", "max_jobs": "3",
        "prologue": ["set -e", "mkdir -p x"],
        "clusters": {"local": {"test_mode": "true"}, "other": {"walltime": "60"}},
    }
    campaign_id, count = submit(grid, document, tmp_path)
    assert count == 2
    row = grid.db.execute("SELECT name, user, state, nb_tasks, jdl FROM campaigns WHERE id = ?",
                          [campaign_id]).fetchone()
    assert row[:4] == ("render", USER, "in_treatment", 2)
    assert json.loads(row[4])["clusters"] == document["clusters"]
    assert tasks(grid, campaign_id) == [("alpha", 'alpha 1 "two words"'), ("beta", "beta $(x) *")]
    local, other = properties(grid, campaign_id, "local"), properties(grid, campaign_id, "other")
    assert local["exec_directory"] == f"{HOME}/work/{campaign_id}"
    assert local["exec_file"] == f"{HOME}/bin/render"
    assert (local["walltime"], other["walltime"]) == (300, 60)
    assert (local["test_mode"], other["test_mode"]) == (True, False)
    assert local["max_jobs"] == other["max_jobs"] == 3
    assert local["prologue"] == "set -e\nmkdir -p x"
    assert set(local) == set(other)


def test_campaign_id_differs_per_campaign(grid: Grid, tmp_path: Path) -> None:
    document = {"name": "n", "nb_jobs": 2, "exec_file": "/bin/true", "exec_directory": "/w/{CAMPAIGN_ID}",
                "clusters": {"local": {}}}
    first, _ = submit(grid, document, tmp_path)
    second, count = submit(grid, document, tmp_path)
    assert count == 2 and first != second
    assert properties(grid, second, "local")["exec_directory"] == f"/w/{second}"
    assert tasks(grid, second) == [("0", "0"), ("1", "1")]
    assert properties(grid, first, "other") == {}


def assert_refused_unchanged(grid: Grid, tmp_path: Path, document: dict[str, Any] | str, named: str) -> None:
    before = snapshot(grid)
    with pytest.raises(InputError) as error:
        submit(grid, document, tmp_path)
    assert error.value.exit_code == 2
    assert named in str(error.value)
    assert snapshot(grid) == before


@pytest.mark.parametrize(("document", "named"), [case[1:] for case in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_jdl_leaves_database_unchanged(grid: Grid, tmp_path: Path,
                                               document: dict[str, Any] | str, named: str) -> None:
    submit(grid, {"name": "earlier", "nb_jobs": 1, "exec_file": "/bin/true", "clusters": {"local": {}}}, tmp_path)
    assert_refused_unchanged(grid, tmp_path, document, named)


def param_jdl(path: Path) -> dict[str, Any]:
    return {"name": "p", "param_file": str(path), "exec_file": "/bin/true", "clusters": {"local": {}, "other": {}}}


@pytest.mark.parametrize(("content", "named"), [
    ("a 1\nb 2\nc 3\nb 4\n", ":4: duplicate task name 'b' (first at "),
    ("a 1\n\n# c\nb 2\n'a' 3\n", ":5: duplicate task name 'a'"),
    ("a 1\nb 2\nc 'unbalanced\n", ":3: No closing quotation"),
    ("a 1\nb \x00\n", ":2: contains a NUL byte"),
    ("# only a comment\n\n", "no parameters"),
])
def test_bad_param_file_leaves_database_unchanged(grid: Grid, tmp_path: Path, content: str, named: str) -> None:
    path = tmp_path / "params.txt"
    path.write_text(content)
    assert_refused_unchanged(grid, tmp_path, param_jdl(path), named)


def test_duplicate_across_insert_chunks(grid: Grid, tmp_path: Path) -> None:
    path = tmp_path / "params.txt"
    lines = [f"t{i} x" for i in range(INSERT_CHUNK + 10)] + ["t5 again"]
    path.write_text("\n".join(lines) + "\n")
    assert_refused_unchanged(grid, tmp_path, param_jdl(path), f"{path}:{len(lines)}: duplicate task name 't5'")


def test_missing_param_file_and_empty_inline_params(grid: Grid, tmp_path: Path) -> None:
    assert_refused_unchanged(grid, tmp_path, param_jdl(tmp_path / "absent.txt"), "absent.txt")
    empty = {"name": "e", "params": ["", "# none"], "exec_file": "/bin/true", "clusters": {"local": {}}}
    assert_refused_unchanged(grid, tmp_path, empty, "no parameters")


def test_extend_adds_tasks(grid: Grid, tmp_path: Path) -> None:
    campaign_id, _ = submit(grid, {"name": "x", "nb_jobs": 2, "exec_file": "/bin/true",
                                   "clusters": {"local": {}}}, tmp_path)
    more = tmp_path / "more.txt"
    more.write_text("a 'one arg'\nb\n")
    assert api.extend(grid, campaign_id, api.Lines(more.open("rb"), str(more)), user=USER).tasks == 2
    assert [name for name, _ in tasks(grid, campaign_id)] == ["0", "1", "a", "b"]
    assert grid.db.execute("SELECT nb_tasks FROM campaigns WHERE id = ?", [campaign_id]).fetchone()[0] == 4


@pytest.mark.parametrize(("content", "line"), [
    ("new 1\n1 again\n", 2),  # clashes with an existing task
    ("new 1\nother\nnew 2\n", 3),  # clashes within the file
    ("new 1\nbad 'quote\n", 2),
])
def test_extend_is_atomic(grid: Grid, tmp_path: Path, content: str, line: int) -> None:
    campaign_id, _ = submit(grid, {"name": "x", "nb_jobs": 2, "exec_file": "/bin/true",
                                   "clusters": {"local": {}}}, tmp_path)
    more = tmp_path / "more.txt"
    more.write_text(content)
    before = snapshot(grid)
    with pytest.raises(InputError, match=f"{more}:{line}:"):
        api.extend(grid, campaign_id, api.Lines(more.open("rb"), str(more)), user=USER)
    assert snapshot(grid) == before


def test_a_duplicate_name_names_its_first_occurrence(grid: Grid, tmp_path: Path) -> None:
    campaign_id, _ = submit(grid, {"name": "x", "params": ["a 1", "b 2"], "exec_file": "/bin/true",
                                   "clusters": {"local": {}}}, tmp_path)
    submit(grid, {"name": "y", "params": ["c 1"], "exec_file": "/bin/true", "clusters": {"local": {}}}, tmp_path)
    more = tmp_path / "more.txt"
    more.write_text("c 3\nd 4\n\nd 5\n")  # c belongs to another campaign only
    with pytest.raises(InputError) as within:
        api.extend(grid, campaign_id, api.Lines(more.open("rb"), str(more)), user=USER)
    assert str(within.value).startswith(f"{more}:4: duplicate task name 'd' (first at {more}:2; ")
    more.write_text("c 3\nb 4\n")
    with pytest.raises(InputError) as earlier:
        api.extend(grid, campaign_id, api.Lines(more.open("rb"), str(more)), user=USER)
    assert str(earlier.value).startswith(f"{more}:2: duplicate task name 'b' (already in campaign {campaign_id}; ")


def test_extend_refuses_other_users_and_cancelled_campaigns(grid: Grid, tmp_path: Path) -> None:
    campaign_id, _ = submit(grid, {"name": "x", "nb_jobs": 1, "exec_file": "/bin/true",
                                   "clusters": {"local": {}}}, tmp_path)
    more = tmp_path / "more.txt"
    more.write_text("a\n")
    with pytest.raises(NotFound, match=f"campaign {campaign_id}: no such campaign"):
        api.extend(grid, campaign_id, api.Lines(more.open("rb"), str(more)), user="someone-else")
    api.cancel(grid, campaign_id, user=USER)
    before = snapshot(grid)
    with pytest.raises(Refused, match="cancelled"):
        api.extend(grid, campaign_id, api.Lines(more.open("rb"), str(more)), user=USER)
    assert snapshot(grid) == before


# A file with plain blocks, blocks needing shlex, comments, blank and CRLF lines: small blocks
# make lines straddle block boundaries.
MIXED = "".join(f"t{i} --frame {i}\n" if i % 7 else f"  q{i} 'a b' \\\\x\r\n\n# c {i}\n" for i in range(300))


@pytest.mark.parametrize("block_bytes", [1, 13, 64, 4096, 1 << 20])
def test_blocks_of_any_size_give_the_same_tasks(grid: Grid, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                block_bytes: int) -> None:
    path = tmp_path / "params.txt"
    path.write_text(MIXED)
    expected = [(line.split()[0].strip("'"), line.strip()) for line in MIXED.splitlines()
                if line.strip() and not line.startswith("#")]
    monkeypatch.setattr(params, "BLOCK_BYTES", block_bytes)
    campaign_id, count = submit(grid, param_jdl(path), tmp_path)
    assert count == len(expected) == 300
    assert tasks(grid, campaign_id) == expected
    assert [(name, line) for _, name, line in params.iter_params(ParamSource(file=path))] == expected


@pytest.mark.parametrize(("tail", "reason"), [
    (b"t5 again\n", "duplicate task name 't5'"),
    (b"x 'open\ny \xff\n", "No closing quotation"),  # the first bad line is named, whatever its kind
    (b"x \xff\ny 'open\n", "not valid UTF-8"),
    (b"x " + b"y" * params.MAX_LINE_BYTES + b"\n", "line longer than"),
])
@pytest.mark.parametrize("block_bytes", [7, 1 << 20])
def test_a_bad_line_after_many_blocks_is_named(grid: Grid, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               tail: bytes, reason: str, block_bytes: int) -> None:
    path = tmp_path / "params.txt"
    path.write_bytes("".join(f"t{i} {i}\n" for i in range(300)).encode() + tail + b"t9999 after\n")
    monkeypatch.setattr(params, "BLOCK_BYTES", block_bytes)
    assert_refused_unchanged(grid, tmp_path, param_jdl(path), f"{path}:301: {reason}")


def test_foreign_keys_are_checked_again_after_a_submission(grid: Grid, tmp_path: Path) -> None:
    """Submissions skip the per-task foreign-key lookup; every other transaction keeps it."""
    submit(grid, {"name": "ok", "nb_jobs": 2, "exec_file": "/bin/true", "clusters": {"local": {}}}, tmp_path)
    assert grid.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    with pytest.raises(InputError):
        submit(grid, {"name": "bad", "params": ["a", "a"], "exec_file": "/bin/true", "clusters": {"local": {}}}, tmp_path)
    assert grid.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_one_submission_adds_at_most_max_submission_tasks(grid: Grid, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The write lock is held for a whole submission and cycles wait for it: a typo in nb_jobs
    (10^11) is refused at once, a file or an extension beyond the limit after its last
    allowed block, and nothing is written; at the limit the submission goes through."""
    monkeypatch.setenv("CIGRI_MAX_SUBMISSION_TASKS", str(INSERT_CHUNK + 5))
    limited = open_grid(config.load())
    try:
        base = {"name": "big", "exec_file": "/bin/true", "clusters": {"local": {}}}
        assert_refused_unchanged(limited, tmp_path, {**base, "nb_jobs": 10**11},
                                 f"$.nb_jobs: more than the {INSERT_CHUNK + 5:,} tasks one submission may add")
        path = tmp_path / "params.txt"
        path.write_text("".join(f"t{i}\n" for i in range(INSERT_CHUNK + 6)))
        assert_refused_unchanged(limited, tmp_path, param_jdl(path), f"{path}: more than the")
        path.write_text("".join(f"t{i}\n" for i in range(INSERT_CHUNK + 5)))
        campaign_id, count = submit(limited, param_jdl(path), tmp_path)
        assert count == INSERT_CHUNK + 5
        halves = [api.JDLText(json.dumps({**base, "nb_jobs": INSERT_CHUNK // 2 + 3}), tmp_path)] * 2
        before = snapshot(limited)  # several JDLs are one transaction: the limit bounds them together
        with pytest.raises(InputError, match=f"more than the {INSERT_CHUNK + 5:,} tasks"):
            api.submit_all(limited, halves, user=USER)
        assert snapshot(limited) == before
        more = tmp_path / "more.txt"
        more.write_text("".join(f"u{i}\n" for i in range(INSERT_CHUNK + 6)))
        before = snapshot(limited)
        with pytest.raises(InputError, match="add the rest with gridsub -c N -F FILE"):
            api.extend(limited, campaign_id, api.Lines(more.open("rb"), str(more)), user=USER)
        assert snapshot(limited) == before
    finally:
        limited.close()
