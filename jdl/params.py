"""Parameter lines: streamed, checked, and split with POSIX shell quoting rules.

A line's first word is the task name; the whole line, split like a shell would split it
(quotes and backslashes, but no expansion of any kind), becomes the literal arguments of
``exec_file``. Lines are never handed to a shell. Blank lines and lines starting with ``#``
are skipped. Files are read line by line, so a million-line file is never held in memory.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

from cigri.errors import InputError
from cigri.jdl.parser import ParamSource

MAX_LINE_BYTES = 65_536
_QUOTING = frozenset("'\"\\")


def split_param(line: str) -> list[str]:
    """Arguments of one parameter line (raises ValueError on unbalanced quotes)."""
    if _QUOTING.isdisjoint(line):
        return line.split()
    return shlex.split(line)


def _check(line: str, where: str) -> tuple[str, str]:
    """Return (name, line) or raise InputError naming ``where``."""
    if "\x00" in line:
        raise InputError(f"{where}: contains a NUL byte")
    try:
        words = split_param(line)
    except ValueError as error:
        raise InputError(f"{where}: {error}") from None
    if not words:
        raise InputError(f"{where}: no task name")
    return words[0], line


def iter_params(source: ParamSource, origin: str = "params") -> Iterator[tuple[str, str, str]]:
    """Yield ``(where, name, line)`` for every parameter; ``where`` names its line for errors."""
    if source.count is not None:
        for index in range(source.count):
            yield f"nb_jobs #{index}", str(index), str(index)
    elif source.inline is not None:
        for index, raw in enumerate(source.inline):
            line = raw.strip()
            if line and not line.startswith("#"):
                where = f"$.params[{index}]"
                yield (where, *_check(line, where))
    else:
        assert source.file is not None
        yield from _iter_file(source.file)


def _iter_file(path: Path) -> Iterator[tuple[str, str, str]]:
    try:
        handle = path.open("rb")
    except OSError as error:
        raise InputError(f"param_file {path}: {error.strerror}") from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            where = f"{path}:{number}"
            if len(raw) > MAX_LINE_BYTES:
                raise InputError(f"{where}: line longer than {MAX_LINE_BYTES} bytes")
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError:
                raise InputError(f"{where}: not valid UTF-8") from None
            if line and not line.startswith("#"):
                yield (where, *_check(line, where))
