"""The fragments of cigri.db.dialect mean the same on SQLite and on PostgreSQL: a shell pattern
matches the same names, a real is truncated toward zero, a JSON integer is read alike. The
PostgreSQL half runs on a real server (tests/postgres.py) where one can be started."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest

from cigri.db import dialect

NAMES = ["a", "ab", "abc", "a.c", "a*c", "a?c", "A", "x]y", "x^y", "x-y", "x\\y", "a\nb", "[ab]", "povray_12", "b",
         "", "é", "x[y"]
PATTERNS = ["a*", "a?", "*c", "a[bc]*", "[^a]*", "[]]*", "x[]]y", "x[^]]y", "x[\\]y", "x[-]y", "x[a-z]y", "[a-c]",
            "a.c", "a\\*", "*", "?", "a[", "x[[]y", "x[^^]y", "x[\\^]y", "[!a]*", "*_1?", "a\nb", "(a)", "a|b", "a{1}",
            "a+", "$", "^a", "é", "[é]"]


def _globbed(conn: Any, pattern: str) -> list[str]:
    condition, argument = dialect.glob(conn, "v", pattern)
    return [name for name in NAMES
            if conn.execute(f"SELECT {condition} FROM (SELECT CAST(? AS TEXT) AS v) AS t", [argument, name])
            .fetchone()[0]]


def _values(conn: Any) -> list[Any]:
    """What each fragment gives for a few values, ``None`` included where it may occur."""
    found: list[Any] = [conn.execute(f"SELECT {dialect.truncated(conn, '?')}", [x]).fetchone()[0]
                        for x in (2.9, -2.9, 0.5, 7.0, 1e10 + 0.7)]
    found.append(tuple(conn.execute(f"SELECT {dialect.least(conn, '?', '?')}, {dialect.greatest(conn, '?', '?')}",
                                    [3.5, 2.5, 3.5, 2.5]).fetchone()))
    found += [conn.execute(f"SELECT {dialect.json_integer(conn, 'd', 'gang')} FROM (SELECT CAST(? AS TEXT) AS d) AS t",
                           [doc]).fetchone()[0] for doc in ('{"gang": 3}', '{"gang": "0004"}', '{}', '{"gang": null}')]
    found += [sorted(r[0] for r in conn.execute(f"SELECT value FROM {dialect.ids_in(conn)} AS ids", [json.dumps(ids)]))
              for ids in ([3, 1, 40_000_000_000], [])]
    return found


def test_a_shell_pattern_matches_on_postgresql_what_glob_matches_on_sqlite() -> None:
    """Python's re reads these expressions as PostgreSQL's does (brackets, escapes, ``.``
    matching a newline); the server itself is asked below."""
    conn = sqlite3.connect(":memory:")
    for pattern in PATTERNS:
        regex = dialect.glob_regex(pattern)
        assert [n for n in NAMES if re.fullmatch(regex, n, re.DOTALL)] == _globbed(conn, pattern), pattern


def test_the_fragments_on_sqlite() -> None:
    assert _values(sqlite3.connect(":memory:")) == [2, -2, 0, 7, 10_000_000_000, (2.5, 3.5), 3, 4, None, None,
                                                    [1, 3, 40_000_000_000], []]


@pytest.fixture(scope="module")
def postgresql() -> Iterator[Any]:
    from postgres import server

    from cigri.db.postgres import Connection

    with server() as url:
        conn = Connection(url)
        yield conn
        conn.close()


def test_the_fragments_on_postgresql_give_what_they_give_on_sqlite(postgresql: Any) -> None:
    assert _values(postgresql) == _values(sqlite3.connect(":memory:"))
    for pattern in PATTERNS:
        assert _globbed(postgresql, pattern) == _globbed(sqlite3.connect(":memory:"), pattern), pattern
