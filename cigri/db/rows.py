"""What the layer's functions take and give: a connection of either store, rows as dicts.

A module of its own, importing nothing of cigri, so that every module of the layer (the
lease's included, which the PostgreSQL store calls) can name them without a circle.
"""

from __future__ import annotations

from typing import Any, Protocol


class Connection(Protocol):
    """What the layer's functions need of a connection: sqlite3's, or PostgreSQL's
    (:class:`cigri.db.postgres.Connection`, which runs the same statements)."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Any: ...

    def executemany(self, sql: str, rows: Any, /) -> Any: ...

    @property
    def in_transaction(self) -> bool: ...


def dicts(cursor: Any) -> list[dict[str, Any]]:
    """The rows of ``cursor`` as dicts by column name (what ``Database.query`` gives), for a
    query run on a plain connection, inside a transaction or not."""
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row)) for row in cursor]
