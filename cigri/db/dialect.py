"""The few SQL fragments that differ between SQLite and PostgreSQL, picked by the connection.

Every statement of the data layer is one text that both stores run; where no single text
works on both, the statement asks this module for the fragment, by what it means. A fragment
takes the same parameters on both stores, so a statement's arguments never depend on its store.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

NO_LIMIT = 2**63 - 1  # a LIMIT that keeps every row: PostgreSQL refuses SQLite's LIMIT -1


def _sqlite(conn: Any) -> bool:
    return isinstance(conn, sqlite3.Connection)


def clock(conn: Any) -> str:
    """The store's clock in seconds since the epoch: several hosts compare one clock, never their own."""
    return ("((julianday('now') - 2440587.5) * 86400.0)" if _sqlite(conn)
            else "extract(epoch FROM clock_timestamp())::float8")


def ids_in(conn: Any) -> str:
    """A subquery of the ids in one parameter, the JSON text of a list: one statement for any number of ids."""
    return ("(SELECT value FROM json_each(?))" if _sqlite(conn)
            else "(SELECT value::bigint FROM jsonb_array_elements_text(?::jsonb))")


def json_integer(conn: Any, column: str, key: str) -> str:
    """The integer at ``key`` of the JSON object in ``column`` (NULL if absent): each store has its own JSON path."""
    return (f"CAST(json_extract({column}, '$.{key}') AS INTEGER)" if _sqlite(conn)
            else f"CAST({column}::jsonb ->> '{key}' AS BIGINT)")


def least(conn: Any, first: str, second: str) -> str:
    """The smaller of two values neither of which is NULL, or both: PostgreSQL's scalar min is LEAST."""
    return f"min({first}, {second})" if _sqlite(conn) else f"LEAST({first}, {second})"


def greatest(conn: Any, first: str, second: str) -> str:
    """The larger of two values neither of which is NULL, or both: PostgreSQL's scalar max is GREATEST."""
    return f"max({first}, {second})" if _sqlite(conn) else f"GREATEST({first}, {second})"


def truncated(conn: Any, real: str) -> str:
    """The integer part of a real, toward zero: PostgreSQL's CAST to an integer rounds, SQLite's truncates."""
    return f"CAST({real} AS INTEGER)" if _sqlite(conn) else f"CAST(trunc({real}) AS BIGINT)"


def indexed_by(conn: Any, index: str) -> str:
    """SQLite's hint naming the index to read a table by (its planner may miss a partial one); none on PostgreSQL."""
    return f"INDEXED BY {index}" if _sqlite(conn) else ""


def ordered_join(conn: Any) -> str:
    """A join whose left table SQLite must read first (its CROSS JOIN); PostgreSQL's CROSS JOIN takes no ON."""
    return "CROSS JOIN" if _sqlite(conn) else "JOIN"


def glob(conn: Any, column: str, pattern: str) -> tuple[str, str]:
    """A condition that ``column`` matches the shell pattern (``*``, ``?``, ``[...]``, case-sensitive),
    with its one argument: SQLite's GLOB, a regular expression on PostgreSQL, which has no GLOB."""
    return (f"{column} GLOB ?", pattern) if _sqlite(conn) else (f"{column} ~ ?", glob_regex(pattern))


def glob_regex(pattern: str) -> str:
    """The PostgreSQL regular expression matching what SQLite's GLOB ``pattern`` matches."""
    out, i = ["^"], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[":
            end = i + 1 + (pattern[i + 1:i + 2] == "^")
            end = pattern.find("]", end + 1)  # a ']' first in the set is one of its characters
            if end < 0:
                return "a^"  # GLOB matches nothing when a set is not closed
            negated = pattern[i + 1] == "^"
            members = pattern[i + 1 + negated:end]
            out.append("[" + "^" * negated + re.sub(r"([\\\[^])", r"\\\1", members) + "]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out) + "$"
