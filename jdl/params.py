"""Parameter lines: streamed, checked, and split with POSIX shell quoting rules.

A line's first word is the task name; the whole line, split like a shell would split it
(quotes and backslashes, but no expansion of any kind), becomes the literal arguments of
``exec_file``. Lines are never handed to a shell. Blank lines and lines starting with ``#``
are skipped. Files are read line by line, so a million-line file is never held in memory.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator

from cigri.errors import InputError
from cigri.jdl.parser import ParamSource

MAX_LINE_BYTES = 65_536
_QUOTING = frozenset("'\"\\")
_BLANKS = re.compile(r"[ \t\r\n]+")  # what shlex splits on; str.split() would also split on NBSP etc.


def split_param(line: str) -> list[str]:
    """Arguments of one parameter line (raises ValueError on unbalanced quotes)."""
    if _QUOTING.isdisjoint(line):
        return [word for word in _BLANKS.split(line) if word]
    return shlex.split(line)


# Lines made only of printable ASCII without quotes or backslashes, and of spaces and tabs,
# split like str.split(): the fast path that keeps a million-line ingest cheap.
_NEEDS_SHLEX = re.compile(r"[^\x21\x23-\x26\x28-\x5b\x5d-\x7e \t]")


def describe(source: ParamSource, position: int) -> str:
    """Name a parameter's place for an error message: JSON path, or file and line."""
    if source.count is not None:
        return f"nb_jobs #{position}"
    if source.inline is not None:
        return f"$.params[{position}]"
    return f"{source.file}:{position}"


def _name(line: str, source: ParamSource, position: int) -> str:
    """The task name (first word) of a stripped, non-empty line, or InputError naming its place."""
    if _NEEDS_SHLEX.search(line) is None:
        return line.split(None, 1)[0]
    if "\x00" in line:
        raise InputError(f"{describe(source, position)}: contains a NUL byte")
    try:
        words = split_param(line)
    except ValueError as error:
        raise InputError(f"{describe(source, position)}: {error}") from None
    if not words or not words[0]:
        raise InputError(f"{describe(source, position)}: no task name")
    return words[0]


def iter_params(source: ParamSource) -> Iterator[tuple[int, str, str]]:
    """Yield ``(position, name, line)`` per parameter; :func:`describe` names a position."""
    if source.count is not None:
        for index in range(source.count):
            yield index, str(index), str(index)
    elif source.inline is not None:
        for index, raw in enumerate(source.inline):
            line = raw.strip()
            if line and line[0] != "#":
                yield index, _name(line, source, index), line
    else:
        yield from _iter_file(source)


def _iter_file(source: ParamSource) -> Iterator[tuple[int, str, str]]:
    assert source.file is not None
    try:
        handle = source.file.open("rb")
    except OSError as error:
        raise InputError(f"param_file {source.file}: {error.strerror}") from None
    with handle:
        number = 0
        while raw := handle.readline(MAX_LINE_BYTES + 1):  # bounded: a huge line is never read whole
            number += 1
            if len(raw) > MAX_LINE_BYTES:
                raise InputError(f"{describe(source, number)}: line longer than {MAX_LINE_BYTES} bytes")
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError:
                raise InputError(f"{describe(source, number)}: not valid UTF-8") from None
            if line and line[0] != "#":
                yield number, _name(line, source, number), line
