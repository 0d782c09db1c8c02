"""Parameters are read and checked before any database lock is taken.

A submission's parameter lines (a file, stdin, a pipe, an upload, or a JDL's inline
``params``) are streamed into a private SQLite file of their own, the *stage*, with every
check a line gets (encoding, length, the task name) and the limits on its size. Only then does
the submission take the grid's write lock, and copy the staged rows into ``tasks`` with one
``INSERT … SELECT``: a slow pipe, a huge upload or a bad line 900,000 lines in never holds the
lock that the cycles wait for, and a refused submission writes nothing to the grid.
"""

from __future__ import annotations

import io
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from cigri.errors import InputError, TooLarge
from cigri.jdl.params import describe, param_rows
from cigri.jdl.parser import ParamSource

INSERT_CHUNK = 10_000  # rows per executemany into the stage
STALE_SECONDS = 86_400  # a stage this old was left by a process killed mid-submission


@dataclass(frozen=True)
class StagedPart:
    """One JDL's (or one extension's) parameters in the stage: rows ``first..last`` of its
    table, ``count`` tasks and ``bytes`` bytes of parameter lines; or, for ``nb_jobs``,
    nothing staged (the rows are numbers made when inserting)."""

    source: ParamSource
    count: int
    bytes: int
    first: int = 0
    last: int = -1

    @property
    def generated(self) -> bool:
        return self.source.count is not None


class Stage:
    """A private SQLite file holding the parameters of one submission: table ``params``
    (rowid in submission order, the position that names a line in errors, name, line). All
    its parts together hold at most ``max_tasks`` tasks and ``max_bytes`` bytes."""

    def __init__(self, directory: Path, *, max_tasks: int, max_bytes: int) -> None:
        self.max_tasks, self.max_bytes = max_tasks, max_bytes
        self.tasks = self.bytes = 0
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        _sweep(directory)
        handle, name = tempfile.mkstemp(prefix="stage-", suffix=".db", dir=directory)
        os.close(handle)
        self.path = Path(name)
        self.conn = sqlite3.connect(self.path, isolation_level=None)
        self.conn.executescript("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;"
                                "CREATE TABLE params (position INTEGER NOT NULL, name TEXT NOT NULL, "
                                "param TEXT NOT NULL)")

    def add(self, source: ParamSource) -> StagedPart:
        """Stream ``source`` (its ``stream`` if it has one) into the stage, checking every line;
        InputError at the first bad line, past the stage's task limit or (TooLarge) its byte
        limit, checked while reading: a huge input is refused early, never held."""
        if source.count is not None:
            part = StagedPart(source, source.count, 0)
        else:
            part = self._stream(source)
        self.tasks += part.count
        self.bytes += part.bytes
        if self.tasks > self.max_tasks:
            raise _too_many(source, self.max_tasks)
        if self.bytes > self.max_bytes:  # inline lines: a stream was already cut at the limit while read
            raise _too_big(source, self.max_bytes)
        if not part.generated:
            self._refuse_duplicates(part)
        return part

    def _stream(self, source: ParamSource) -> StagedPart:
        if source.stream is not None:
            source = _bounded(source, self.max_bytes - self.bytes, self.max_bytes)
        first = self._next_rowid()
        count, room = 0, self.max_tasks - self.tasks
        self.conn.execute("BEGIN")
        for rows in param_rows(source, INSERT_CHUNK):
            count += len(rows)
            if count > room:
                raise _too_many(source, self.max_tasks)
            self.conn.executemany("INSERT INTO params(position, name, param) VALUES (?, ?, ?)", rows)
        self.conn.execute("COMMIT")
        return StagedPart(source, count, self._bytes(first) if count else 0, first, first + count - 1)

    def _next_rowid(self) -> int:
        return self.conn.execute("SELECT coalesce(max(rowid), 0) + 1 FROM params").fetchone()[0]

    def _bytes(self, first: int) -> int:
        return self.conn.execute("SELECT sum(length(CAST(param AS BLOB))) FROM params WHERE rowid >= ?",
                                 [first]).fetchone()[0]

    def _refuse_duplicates(self, part: StagedPart) -> None:
        """InputError naming the first line (in submission order) whose task name an earlier
        line of the same part already has. One sort, in SQLite, and only when there is one."""
        span = [part.first, part.last]
        if self.conn.execute("SELECT 1 FROM params WHERE rowid BETWEEN ? AND ? GROUP BY name HAVING count(*) > 1 "
                             "LIMIT 1", span).fetchone() is None:
            return
        position, name, first = self.conn.execute(
            "SELECT position, name, first FROM (SELECT position, name, rowid AS id, "
            "row_number() OVER (PARTITION BY name ORDER BY rowid) AS k, "
            "first_value(position) OVER (PARTITION BY name ORDER BY rowid) AS first "
            "FROM params WHERE rowid BETWEEN ? AND ?) WHERE k = 2 ORDER BY id LIMIT 1", span).fetchone()
        raise InputError(f"{describe(part.source, position)}: duplicate task name {name!r} "
                         f"(first at {describe(part.source, first)}; the first word of a line names its task)")

    def rows(self, part: StagedPart) -> Iterator[tuple[str, str]]:
        """The part's tasks (name, parameter line) in submission order; for ``nb_jobs``, the numbers."""
        if part.generated:
            return ((str(i), str(i)) for i in range(part.count))
        return iter(self.conn.execute("SELECT name, param FROM params WHERE rowid BETWEEN ? AND ? ORDER BY rowid",
                                      [part.first, part.last]))

    def position(self, row: int) -> int:
        """Where staged row ``row`` was in its input (the line or index that names it in errors)."""
        return int(self.conn.execute("SELECT position FROM params WHERE rowid = ?", [row]).fetchone()[0])

    def close(self) -> None:
        self.conn.close()
        self.path.unlink(missing_ok=True)


@contextmanager
def staging(directory: Path, *, max_tasks: int, max_bytes: int) -> Iterator[Stage]:
    """A fresh stage under ``directory``, removed afterwards whatever happens."""
    stage = Stage(directory, max_tasks=max_tasks, max_bytes=max_bytes)
    try:
        yield stage
    finally:
        stage.close()


def _where(source: ParamSource) -> str:
    return "$.nb_jobs" if source.count is not None else str(source.file) if source.file else "$.params"


def _too_many(source: ParamSource, limit: int) -> InputError:
    return InputError(f"{_where(source)}: more than the {limit:,} tasks one submission may add "
                      "(cigri.max_submission_tasks); add the rest with gridsub -c N -F FILE", field=_where(source))


def _too_big(source: ParamSource, limit: int) -> TooLarge:
    return TooLarge(f"{_where(source)}: more than the {limit:,} bytes of parameters one submission may add "
                    "(limits.submission_param_bytes)", field=_where(source))


def _sweep(directory: Path) -> None:
    """Remove the stages of submissions killed mid-way (kill -9 leaves the file behind)."""
    cutoff = time.time() - STALE_SECONDS
    for path in directory.glob("stage-*.db"):
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
        except OSError:
            pass


class _CountingReader(io.RawIOBase):
    """A stream that refuses to give more than ``limit`` bytes: the byte limit holds while
    reading, before a line is even split (a parameter file of one endless line included)."""

    def __init__(self, stream: BinaryIO, left: int, limit: int, source: ParamSource) -> None:
        self.stream, self.left, self.source, self.limit = stream, left, source, limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.stream.read(min(len(buffer), self.left + 1))
        if len(data) > self.left:
            raise _too_big(self.source, self.limit)
        self.left -= len(data)
        buffer[:len(data)] = data
        return len(data)


def _bounded(source: ParamSource, left: int, limit: int) -> ParamSource:
    """``source`` read through a stream that refuses its ``left``-th byte and beyond."""
    assert source.stream is not None
    return replace(source, stream=io.BufferedReader(_CountingReader(source.stream, left, limit, source), 1 << 20))
