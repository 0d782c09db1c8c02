"""What every command shares: opening the grid, the output sink, and error handling.

Output has three modes: rich tables on a terminal, exactly one JSON value with ``--json``,
plain aligned text when piped or when ``NO_COLOR`` is set. Messages go to stderr. Expected
errors become one line and their exit status; ``CIGRI_DEBUG=1`` shows the traceback.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import sqlite3
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table
from typer.exceptions import TyperException

if TYPE_CHECKING:
    from cigri.grid import Grid

from cigri import config as configuration
from cigri import logs
from cigri.client import Client, connect
from cigri.errors import CigriError, InputError

F = TypeVar("F", bound=Callable[..., Any])
stdout = Console(highlight=False)
stderr = Console(stderr=True, highlight=False)


def fancy() -> bool:
    """Rich rendering only on a terminal and when NO_COLOR is unset."""
    return stdout.is_terminal and not os.environ.get("NO_COLOR")


def grid(overrides: dict[str, Any] | None = None) -> Grid:
    """The grid itself, for the commands that are the grid's own operations (cycles, the
    daemon, the server, the database): never through a server."""
    from cigri.grid import open_grid  # here: a client never opens the grid (its imports are heavy)

    config = configuration.load(overrides)
    logs.use_log_format(config.settings.log_format)
    return open_grid(config)


def client(overrides: dict[str, Any] | None = None) -> Client:
    """How this command reaches the grid: its server when one is configured, else directly
    (:mod:`cigri.client`); chosen here, once."""
    config = configuration.load(overrides)
    logs.use_log_format(config.settings.log_format)
    return connect(config)


def errors_to_exit(fn: F) -> F:
    """Turn every error into its lines on stderr and an exit status, never a traceback:
    expected errors (:class:`CigriError`) keep their own status, anything else is one
    "internal error" line and exit 1. ``CIGRI_DEBUG=1`` lets the traceback through. A closed
    stdout (``| head``) ends the command quietly with status 141, as SIGPIPE ends Unix tools."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            try:
                return fn(*args, **kwargs)
            finally:
                sys.stdout.flush()  # a reader that left (``| head``) shows here, not at exit
        except BrokenPipeError:
            _drop_stdout()
            raise typer.Exit(EXIT_BROKEN_PIPE) from None
        except (typer.Exit, typer.Abort, TyperException):  # the CLI's own control flow
            raise
        except KeyboardInterrupt:
            raise typer.Exit(130) from None
        except Exception as error:
            if os.environ.get("CIGRI_DEBUG"):
                raise
            print_error(error)
            raise typer.Exit(error.exit_code if isinstance(error, CigriError) else 1) from None

    return wrapper  # type: ignore[return-value]


EXIT_BROKEN_PIPE = 128 + 13  # as a Unix tool killed by SIGPIPE


def _drop_stdout() -> None:
    """The reader of stdout is gone: what is left unwritten goes nowhere, so the final flush at
    exit cannot fail again (the recipe of Python's ``signal`` documentation)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def positive(option: str, value: float) -> float:
    """A duration from the command line: > 0 and finite (nan fails every comparison)."""
    if not 0 < value < math.inf:
        raise InputError(f"{option}: must be > 0 and finite")
    return value


def print_error(error: Exception) -> None:
    """The error's lines on stderr, each naming the program."""
    for line in _error_lines(error):
        print(f"{_program()}: {line}", file=sys.stderr)


def _error_lines(error: Exception) -> list[str]:
    if isinstance(error, CigriError):
        return str(error).splitlines() or [type(error).__name__]
    if isinstance(error, sqlite3.Error):  # the environment (disk full, read-only file), not a bug
        return [f"database: {_one_line(error)}"]
    return [f"internal error: {type(error).__name__}: {_one_line(error)}; set CIGRI_DEBUG=1 for the traceback"]


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or "(no message)"


def _program() -> str:
    return os.path.basename(sys.argv[0]) or "cigri"


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # C0, DEL, C1 and the two Unicode line breaks


def printable(text: str) -> str:
    """``text`` with its control characters escaped (``\\x1b``, ``\\u2028``): what a program
    wrote to its stderr, or a name stored before names were checked, must never move the cursor,
    rewrite the screen or break a listing's line."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


def print_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]], header: bool = True) -> None:
    cells = [["" if v is None else printable(str(v)) for v in row] for row in rows]
    if fancy():
        table = Table(title=title, header_style="bold", show_header=header)
        for column in columns:
            table.add_column(column)
        for row in cells:
            table.add_row(*row)
        stdout.print(table)
        return
    widths = [max([len(c) if header else 0] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    if header:
        print("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())


def when(epoch: float | None) -> str:
    return datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M:%S") if epoch else ""


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 60:
        return f"{seconds:.1f}s"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def version_callback(value: bool) -> None:
    if value:
        from cigri import __version__

        print(f"{_program()} (cigri) {__version__}")
        raise typer.Exit()


VersionOption = typer.Option(False, "--version", callback=version_callback, is_eager=True,
                             help="Show the version and exit.")
