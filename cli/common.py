"""What every command shares: opening the grid, the output sink, and error handling.

Output has three modes: rich tables on a terminal, exactly one JSON value with ``--json``,
plain aligned text when piped or when ``NO_COLOR`` is set. Messages go to stderr. Expected
errors become one line and their exit status; ``CIGRI_DEBUG=1`` shows the traceback.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from cigri import config as configuration
from cigri.errors import CigriError
from cigri.grid import Grid, open_grid

F = TypeVar("F", bound=Callable[..., Any])
stdout = Console(highlight=False)
stderr = Console(stderr=True, highlight=False)


def fancy() -> bool:
    """Rich rendering only on a terminal and when NO_COLOR is unset."""
    return stdout.is_terminal and not os.environ.get("NO_COLOR")


def grid(overrides: dict[str, Any] | None = None) -> Grid:
    return open_grid(configuration.load(overrides))


def errors_to_exit(fn: F) -> F:
    """Turn expected errors into one stderr line and the error's exit status."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CigriError as error:
            if os.environ.get("CIGRI_DEBUG"):
                raise
            for line in str(error).splitlines() or [type(error).__name__]:
                print(f"{_program()}: {line}", file=sys.stderr)
            raise typer.Exit(error.exit_code) from None
        except KeyboardInterrupt:
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def _program() -> str:
    return os.path.basename(sys.argv[0]) or "cigri"


def setup_logging(verbose: bool) -> None:
    level = logging.INFO if verbose or os.environ.get("CIGRI_DEBUG") else logging.WARNING
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")


def log_to_file(path: Path) -> None:
    """Long-running commands also keep an INFO log in the configured log directory;
    stderr keeps the level chosen by ``setup_logging``."""
    root = logging.getLogger()
    for handler in root.handlers:
        handler.setLevel(max(handler.level, root.level))
    file_handler = logging.FileHandler(path)
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    file_handler.setLevel(logging.INFO)
    root.addHandler(file_handler)
    root.setLevel(min(root.level, logging.INFO))


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


def print_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [["" if v is None else str(v) for v in row] for row in rows]
    if fancy():
        table = Table(title=title, header_style="bold")
        for column in columns:
            table.add_column(column)
        for row in cells:
            table.add_row(*row)
        stdout.print(table)
        return
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
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
