"""gridsub: submit campaigns (JSON JDL), add parameters to one, or stay attached until it ends."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import BinaryIO, Optional

import typer

from cigri import api
from cigri.cli import common, live
from cigri.errors import InputError

app = typer.Typer(add_completion=True, help="Submit a campaign to the grid.")


@app.command()
@common.errors_to_exit
def gridsub(
    jdl: list[Path] = typer.Option([], "-f", "--file", metavar="FILE", help="JDL file (JSON); repeat for several campaigns, submitted all or none; - reads stdin."),
    campaign: Optional[int] = typer.Option(None, "-c", "--campaign", metavar="N", help="Campaign to add parameters to (with -F), or to follow (with --wait).", autocompletion=common.complete_campaign),
    param_file: Optional[Path] = typer.Option(None, "-F", "--param-file", metavar="FILE", help="Parameter file to add to campaign -c."),
    wait: bool = typer.Option(False, "--wait", "-w", help="Stay attached with a live progress view until the campaigns end (Ctrl-C leaves them running); an admin's drives the cycles if no daemon runs. -c N --wait follows campaign N."),
    period: float = typer.Option(0.2, "--period", help="Seconds to pause after a cycle that sent no job, when --wait drives the cycles (> 0)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON value."),
    strict: bool = typer.Option(False, "--strict", help="Refuse CiGri 3.2's forms (a warning each by default) as invalid input."),
    version: bool = common.VersionOption,
) -> None:
    """Submit JDL campaigns; print their numbers. Exit 2 on invalid input, with nothing written."""
    common.positive("--period", period)  # before anything is submitted
    client = common.client()
    if campaign is not None and param_file is None and not jdl and wait:
        raise typer.Exit(live.reattach(client, campaign, period, as_json))
    if campaign is not None or param_file is not None:
        if campaign is None or param_file is None or jdl:
            raise InputError("-c and -F go together, without -f (or -c N --wait follows campaign N)")
        added = client.extend(campaign, api.Lines(_open(param_file), str(param_file)), strict=strict)
        _warn(added.warnings)
        common.print_json({"campaign_id": campaign, "tasks": added.tasks}) if as_json else \
            print(f"Campaign {campaign}: {added.tasks} task(s) added")
        ids = [campaign]
    else:
        if not jdl:
            raise InputError("nothing to submit: give a JDL with -f FILE (see gridsub --help)")
        results = client.submit(_read_all(jdl, api.current_user()), strict=strict)
        _warn([line for result in results for line in result.warnings])
        submitted = [{"campaign_id": result.campaign_id, "tasks": result.tasks} for result in results]
        if as_json:
            common.print_json(submitted[0] if len(submitted) == 1 else submitted)
        else:
            for entry in submitted:
                print(f"Campaign number: {entry['campaign_id']}")
        ids = [e["campaign_id"] for e in submitted]
    if wait:
        raise typer.Exit(live.follow(client, ids, period, quiet=as_json)[0])
    live.say_if_no_cycles(client, ids[0])


def _warn(lines: list[str] | tuple[str, ...]) -> None:
    """CiGri's forms a file used, one line each on stderr, so that its owner can update it."""
    for line in lines:
        print(f"gridsub: warning: {line}", file=sys.stderr)


def _read_all(paths: list[Path], user: str) -> list[api.JDLText]:
    """Every JDL read, and its parameter file opened, before any is submitted; ``-`` is stdin,
    which can be read only once."""
    if sum(str(path) == "-" for path in paths) > 1:
        raise InputError("-f -: stdin can be given only once")
    return [api.local_jdl(sys.stdin.read(), base_dir=Path.cwd(), user=user, source="-") if str(path) == "-"
            else api.local_jdl(_read(path), base_dir=path.resolve().parent, user=user, source=str(path))
            for path in paths]


def _open(path: Path) -> BinaryIO:
    """A parameter file, opened by the user's own process; ``-`` is stdin."""
    if str(path) == "-":
        return sys.stdin.buffer
    try:
        return path.open("rb")
    except OSError as error:
        raise InputError(f"{path}: {error.strerror}") from None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as error:
        raise InputError(f"{path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not valid UTF-8") from None


def main() -> None:
    common.run(app)
