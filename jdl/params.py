"""Parameter lines: streamed, checked, and split with POSIX shell quoting rules.

A line's first word is the task name; the whole line, split like a shell would split it
(quotes and backslashes, but no expansion of any kind), becomes the literal arguments of
``exec_file``. Lines are never handed to a shell. Blank lines and lines starting with ``#``
are skipped. Files are read in blocks of lines, so a million-line file is never held in memory.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from itertools import islice
from typing import BinaryIO

from cigri.errors import InputError
from cigri.jdl.parser import ParamSource, control_character

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
    control = control_character(words[0])
    if control is not None:  # quoted, it would reach gridstat -f and gridevents raw
        raise InputError(f"{describe(source, position)}: the task name contains the control character "
                         f"U+{ord(control):04X}; a name is one line of text")
    return words[0]


def _check_inline(raw: str, source: ParamSource, index: int) -> None:
    """What reading a file checks of each line, for a string of ``params``: one line, of
    UTF-8, at most :data:`MAX_LINE_BYTES` bytes with its newline."""
    if "\n" in raw:
        raise InputError(f"{describe(source, index)}: holds a line break; give one parameter line per string")
    try:
        size = len(raw.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate, which JSON's \ud800 gives
        raise InputError(f"{describe(source, index)}: not valid UTF-8") from None
    if size >= MAX_LINE_BYTES:
        raise InputError(f"{describe(source, index)}: line longer than {MAX_LINE_BYTES} bytes")


def iter_params(source: ParamSource) -> Iterator[tuple[int, str, str]]:
    """Yield ``(position, name, line)`` per parameter; :func:`describe` names a position."""
    if source.count is not None:
        for index in range(source.count):
            yield index, str(index), str(index)
    elif source.inline is not None:
        for index, raw in enumerate(source.inline):
            _check_inline(raw, source, index)
            line = raw.strip()
            if line and line[0] != "#":
                yield index, _name(line, source, index), line
    else:
        for number, lines, _ in _file_blocks(source):
            for index, line in enumerate(map(str.strip, lines)):
                if line and line[0] != "#":
                    yield number + index, _name(line, source, number + index), line


def param_rows(source: ParamSource, chunk: int) -> Iterator[list[tuple[int, str, str]]]:
    """The parameters of :func:`iter_params` as ``(position, name, line)`` lists, for bulk
    inserts: a file's plain blocks are split by one list comprehension, with no per-line checks."""
    if source.file is None:
        params = iter_params(source)
        while rows := list(islice(params, chunk)):
            yield rows
        return
    for number, lines, plain in _file_blocks(source):
        if plain:
            yield [(number + index, line.split(None, 1)[0], line) for index, line in enumerate(map(str.strip, lines))
                   if line and line[0] != "#"]
        else:
            yield [(number + index, _name(line, source, number + index), line)
                   for index, line in enumerate(map(str.strip, lines)) if line and line[0] != "#"]


BOM = b"\xef\xbb\xbf"  # UTF-8's byte order mark
BLOCK_BYTES = 1 << 20  # a file is read in blocks of whole lines this big (plus one partial line)
# The bytes of plain lines (see _NEEDS_SHLEX) and the newline: deleting them from a block
# leaves nothing when every line in it is plain (and then ASCII, one byte per character).
_PLAIN_BYTES = bytes(c for c in range(256) if _NEEDS_SHLEX.match(chr(c)) is None) + b"\n"


def _file_blocks(source: ParamSource) -> Iterator[tuple[int, list[str], bool]]:
    """``(number of the first line, decoded lines, whether all are plain)``, a block at a time.

    A line too long or not UTF-8 is an error raised once the lines before it were yielded, so
    the first bad line of the file is the one named, whatever its kind.
    """
    assert source.file is not None
    if source.stream is not None:  # read by the caller's process (the user's own, or an upload)
        handle: BinaryIO = source.stream
    else:
        try:
            handle = source.file.open("rb")
        except OSError as error:
            raise InputError(f"param_file {source.file}: {error.strerror}") from None
    with handle:
        start = handle.read(len(BOM))
        if start == BOM:  # dropped, as UTF-8 readers do (and the JDL's)
            start = b""
        for number, block, longest in _blocks(handle, source, start):
            if not block.translate(None, _PLAIN_BYTES):
                lines = block.decode("ascii").split("\n")
                if max(map(len, lines)) <= longest:
                    yield number, lines, True
                    continue
            raw_lines = block.split(b"\n")
            if max(map(len, raw_lines)) <= longest:
                try:
                    yield number, block.decode("utf-8").split("\n"), False
                    continue
                except UnicodeDecodeError:
                    pass
            lines = []
            for index, raw in enumerate(raw_lines):
                problem = f"line longer than {MAX_LINE_BYTES} bytes" if len(raw) > longest else None
                if problem is None:
                    try:
                        lines.append(raw.decode("utf-8"))
                        continue
                    except UnicodeDecodeError:
                        problem = "not valid UTF-8"
                yield number, lines, False
                raise InputError(f"{describe(source, number + index)}: {problem}")


def _blocks(handle: BinaryIO, source: ParamSource, start: bytes) -> Iterator[tuple[int, bytes, int]]:
    """``(number of its first line, whole lines without the last newline, longest line allowed)``.

    A line may hold MAX_LINE_BYTES bytes with its newline; a partial line longer than that is
    an error at once, so a huge line is never held whole.
    """
    number, rest = 1, start
    while chunk := handle.read(BLOCK_BYTES):
        data = rest + chunk
        end = data.rfind(b"\n")
        block, rest = (data[:end], data[end + 1:]) if end >= 0 else (b"", data)
        if end >= 0:
            yield number, block, MAX_LINE_BYTES - 1
            number += block.count(b"\n") + 1
        if len(rest) > MAX_LINE_BYTES:
            raise InputError(f"{describe(source, number)}: line longer than {MAX_LINE_BYTES} bytes")
    if rest:
        yield number, rest, MAX_LINE_BYTES
