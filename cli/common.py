"""What every command shares: opening the grid, the output sink, and error handling.

Output has three modes: rich tables on a terminal, exactly one JSON value with ``--json``,
plain aligned text when piped or when ``NO_COLOR`` is set. Messages go to stderr. Expected
errors become one line and their exit status; ``CIGRI_DEBUG=1`` shows the traceback.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import os
import re
import sqlite3
import sys
import sysconfig
from collections.abc import Callable, Sequence
from datetime import datetime
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from typer import completion
from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text
from typer._click.exceptions import NoArgsIsHelpError  # typer >= 0.26 vendors Click
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


def run(app: typer.Typer) -> None:
    """Run ``app`` as its console script. A usage error is one line naming the command, and
    exit 2 (typer draws a five-line box); the help shows flags without a value and arguments
    as NAME, [NAME] and [NAME]... (:func:`_conventional_help`)."""
    command = typer.main.get_command(app)
    _conventional_help(command)
    _completion_of_every_command(command)
    try:
        status = command.main(prog_name=program(), standalone_mode=False)
    except NoArgsIsHelpError as error:  # a group run bare: its help, as typer shows it
        error.show()
        status = error.exit_code
    except TyperException as error:  # Click's usage errors and file errors
        context = getattr(error, "ctx", None)
        path = context.command_path if context is not None else program()
        message = " ".join(error.format_message().split()).removesuffix(".")
        print(f"{program()}: {message[:1].lower()}{message[1:]}; see {path} --help", file=sys.stderr)
        status = error.exit_code
    except typer.Abort:  # end of input at a prompt
        print(f"{program()}: aborted", file=sys.stderr)
        status = 1
    sys.exit(status if isinstance(status, int) else 0)


def _conventional_help(command: Any) -> None:
    """Typer 0.29 shows a flag's type as if it took a value (``--wait -w <bool>``), a required
    argument as ``{name}``, and keeps the line breaks of a docstring's paragraphs: flags get no
    type, arguments the usual NAME (optional: [NAME], repeated: [NAME]...), paragraphs are
    rewrapped, for ``command`` and its sub-commands."""
    if command.help:
        command.help = re.sub(r"(?<!\n)\n(?!\n)", " ", inspect.cleandoc(command.help))
    help_option = command.get_help_option(command.context_class(command, **command.context_settings))  # made once, then reused
    for param in [*command.params, *([help_option] if help_option is not None else [])]:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
        elif param.param_type_name == "argument":
            name = param.metavar or param.name.upper()
            usage = name if param.required else f"[{name}]"
            param.metavar = name
            param.get_usage_pieces = lambda ctx, usage=usage, many=param.nargs != 1: [usage + ("..." if many else "")]
    for sub in getattr(command, "commands", {}).values():
        _conventional_help(sub)


def commands() -> list[str]:
    """The console scripts cigri installs (``gridsub`` … ``cigri``), from its own metadata."""
    return sorted(entry.name for entry in entry_points(group="console_scripts")
                  if entry.dist is not None and entry.dist.name == "cigri")


def _completion_of_every_command(command: Any) -> None:
    """``--install-completion`` and ``--show-completion``, of any command, install or show the
    completion of every cigri command, not only the one they were run from."""
    for param in command.params:
        if "--install-completion" in param.opts:
            param.callback = _install_completion
            param.help = "Install the shell completion of every cigri command for the current shell."
        elif "--show-completion" in param.opts:
            param.callback = _show_completion
            param.help = "Print the shell completion scripts of every cigri command, to install them yourself."


def _install_completion(ctx: Any, param: Any, value: Any) -> Any:
    if not value or ctx.resilient_parsing:
        return value
    for name in commands():
        shell, path = completion.install(shell=value if isinstance(value, str) else None, prog_name=name)
        print(f"{shell} completion of {name} installed in {path}")
    print("It takes effect in a new shell.")
    raise typer.Exit()


def _show_completion(ctx: Any, param: Any, value: Any) -> Any:
    if not value or ctx.resilient_parsing:
        return value
    shell = value if isinstance(value, str) else os.path.basename(os.environ.get("SHELL", "bash"))
    for name in commands():
        print(completion.get_completion_script(prog_name=name, complete_var=f"_{name.upper()}_COMPLETE",
                                               shell=shell))
    raise typer.Exit()


def man_page(page: str) -> Path:
    """Where the manual page ``page`` (``gridsub``, ``cigri-jdl``) is: in the installation's
    ``share/man`` (the wheel puts them there), else in the source tree (an editable install)."""
    roots = [*(Path(sysconfig.get_path("data", scheme)) / "share" / "man"
               for scheme in (sysconfig.get_default_scheme(), sysconfig.get_preferred_scheme("user"))),
             Path(__file__).resolve().parent.parent / "man"]
    for root in roots:
        for section in ("1", "5"):
            for path in (root / f"man{section}" / f"{page}.{section}", root / f"{page}.{section}"):
                if path.is_file():
                    return path
    raise InputError(f"{page}: no such manual page (gridsub, gridstat, griddel, gridevents, gridnotify, gridclusters, "
                     "gridtoken, cigri, cigri-jdl, cigri.toml, cigri-scenario)")


CAMPAIGN_REF = re.compile(r"(v3:)?(-?[0-9]+)")  # cigri's number, or CiGri's after cigri import-v3


def campaign_ref(text: str) -> str:
    """One campaign as the user named it, checked before anything is asked (a typer parser):
    N, or v3:N."""
    if CAMPAIGN_REF.fullmatch(text.strip()) is None:
        raise typer.BadParameter(f"{text.strip()!r} is not a campaign number (N, or v3:N for CiGri's number)")
    return text.strip()


def campaign_argument(help_text: str) -> Any:
    """The optional CAMPAIGN argument of gridstat and gridevents (the same as their -c)."""
    return typer.Argument(None, metavar="CAMPAIGN", help=help_text, parser=campaign_ref,
                          autocompletion=complete_campaign)


def campaign_option(help_text: str) -> Any:
    """Their -c N, N being cigri's number or CiGri's (v3:N)."""
    return typer.Option(None, "-c", "--campaign", metavar="N", parser=campaign_ref, autocompletion=complete_campaign,
                        help=f"{help_text}: N, or v3:N (CiGri's number, after cigri import-v3).")


def one_campaign(argument: str | None, option: str | None) -> str | None:
    """The campaign given as CAMPAIGN or as -c, not both."""
    if argument is not None and option is not None:
        raise InputError("give the campaign once: CAMPAIGN or -c CAMPAIGN")
    return argument if option is None else option


def campaign_id(grid: Client, ref: str) -> int:
    """cigri's number of a :func:`campaign_ref`: ``v3:N`` is looked up in what the import recorded."""
    match = CAMPAIGN_REF.fullmatch(ref)
    assert match is not None, ref  # checked by campaign_ref
    return grid.imported_campaign(int(match[2])) if match[1] else int(match[2])


def complete_campaign(incomplete: str) -> list[tuple[str, str]]:
    """Shell completion of a campaign number: the user's own campaigns (through the client, as
    the command itself would ask), unfinished ones first, each with its name and state; none
    when the grid does not answer, for completion never prints an error."""
    try:
        campaigns = client().campaigns(mine=True, include_finished=True)
    except Exception:  # whatever keeps the grid from answering: no completion, no message
        return []
    campaigns.sort(key=lambda c: (c["state"] in ("terminated", "failed", "cancelled"), -c["id"]))
    return [(str(c["id"]), printable(f"{c['name']} ({c['state']})")) for c in campaigns
            if str(c["id"]).startswith(incomplete)]


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
        print(f"{program()}: {line}", file=sys.stderr)


def _error_lines(error: Exception) -> list[str]:
    if isinstance(error, CigriError):
        return str(error).splitlines() or [type(error).__name__]
    if isinstance(error, sqlite3.Error):  # the environment (disk full, read-only file), not a bug
        return [f"database: {_one_line(error)}"]
    return [f"internal error: {type(error).__name__}: {_one_line(error)}; set CIGRI_DEBUG=1 for the traceback"]


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or "(no message)"


def program() -> str:
    """The command's name, as its messages start."""
    return os.path.basename(sys.argv[0]) or "cigri"


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # C0, DEL, C1 and the two Unicode line breaks


def printable(text: str) -> str:
    """``text`` with its control characters escaped (``\\x1b``, ``\\u2028``): what a program
    wrote to its stderr, or a name stored before names were checked, must never move the cursor,
    rewrite the screen or break a listing's line."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


def print_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]], *,
                header: bool = True) -> None:
    """Rows under their column names: on a terminal, a table as wide as the terminal at most,
    each row on one line (:func:`_widths`); else plain columns two spaces apart. ``header``
    False leaves the column names out (as ``squeue --noheader``)."""
    cells = [["" if v is None else printable(str(v)) for v in row] for row in rows]
    if fancy():
        table = Table(title=title, header_style="bold", show_header=header, box=box.SIMPLE_HEAD, show_edge=False,
                      pad_edge=False, collapse_padding=True)
        for column, width in zip(columns, _widths(columns, cells, stdout.width)):
            table.add_column(Text(column, no_wrap=False), no_wrap=True, overflow="ellipsis", width=width)
        for row in cells:
            table.add_row(*row)
        stdout.print(table)
        return
    widths = [max([len(c) if header else 0] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = [list(columns)] * header + cells
    for line in lines:
        print("  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip())


def _widths(columns: Sequence[str], cells: list[list[str]], width: int) -> list[int]:
    """Each column's width so that a table of ``cells`` fits in ``width`` with two spaces
    between columns: first the headers wider than their column wrap at their words, the
    widest first, then, while the table is still too wide, the widest column gives up a
    character (free text, a name or a message, goes first; ids, counts and dates only if
    little is left), none narrower than its header's longest word."""
    words = [max(cell_len(word) for word in column.split() or [""]) for column in columns]
    data = [max([words[i]] + [cell_len(row[i]) for row in cells]) for i in range(len(columns))]
    widths = [max(cell_len(column), data[i]) for i, column in enumerate(columns)]
    room = width - 2 * (len(columns) - 1)
    for i in sorted(range(len(columns)), key=lambda i: data[i] - widths[i]):
        if sum(widths) <= room:
            return widths
        widths[i] = data[i]
    for _ in range(sum(widths) - room):
        widest = max((i for i, w in enumerate(widths) if w > words[i]), key=widths.__getitem__, default=None)
        if widest is None:
            break
        widths[widest] -= 1
    return widths


def when(epoch: float | None) -> str:
    """A date as tables show it: on a terminal, compact (``11-25 14:03``; ``2025-11-25`` in
    another year), so that a row stays on one line; else whole, to the second."""
    if not epoch:
        return ""
    moment = datetime.fromtimestamp(epoch)
    if not fancy():
        return moment.strftime("%Y-%m-%d %H:%M:%S")
    return moment.strftime("%m-%d %H:%M" if moment.year == datetime.now().year else "%Y-%m-%d")


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

        print(f"{program()} (cigri) {__version__}")
        raise typer.Exit()


VersionOption = typer.Option(False, "--version", callback=version_callback, is_eager=True,
                             help="Show the version and exit.")
