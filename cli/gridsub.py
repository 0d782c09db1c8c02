"""gridsub: submit campaigns (JSON JDL), add parameters to one, or stay attached until it ends."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import BinaryIO, Optional

import typer

from cigri import api, cigri3
from cigri.cli import common, live
from cigri.client import Client
from cigri.errors import InputError

app = typer.Typer(add_completion=True, context_settings={"help_option_names": ["-h", "--help"]},
                  help="Submit a campaign to the grid.")


@app.command()
@common.errors_to_exit
def gridsub(
    jdl: list[Path] = typer.Option([], "-f", "--file", metavar="FILE", help="JDL file (JSON); repeat for several campaigns, submitted all or none; - reads stdin."),
    inline: list[str] = typer.Option([], "-j", "--jdl", metavar="JDL", help="A JDL given inline (CiGri's -j; its long form --json is cigri's --json); repeatable, with -f too."),
    campaign: Optional[str] = typer.Option(None, "-c", "--campaign", metavar="N", help="Campaign to add parameters to (with -F or -J), or to follow (with --wait): N, or v3:N (CiGri's number, after cigri import-v3).", parser=common.campaign_ref, autocompletion=common.complete_campaign),
    param_file: list[Path] = typer.Option([], "-F", "--param-file", "--jobfile", metavar="FILE", help="Parameter file to add to campaign -c: lines, or CiGri's JSON array; repeatable."),
    param_json: list[str] = typer.Option([], "-J", "--jsonjob", metavar="ARRAY", help="Parameters to add to campaign -c, given inline as CiGri's JSON array of strings; repeatable."),
    details: bool = typer.Option(False, "-d", "--details", help="Also print the campaign as CiGri's API answered (one JSON line)."),
    wait: bool = typer.Option(False, "--wait", "-w", help="Stay attached with a live progress view until the campaigns end (Ctrl-C leaves them running); an admin's drives the cycles if no daemon runs. -c N --wait follows campaign N."),
    period: float = typer.Option(0.2, "--period", help="Seconds to pause after a cycle that sent no job, when --wait drives the cycles (> 0)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON value."),
    strict: bool = typer.Option(False, "--strict", help="Refuse CiGri 3.2's forms (a warning each by default) as invalid input."),
    version: bool = common.VersionOption,
) -> None:
    """Submit JDL campaigns; print CiGri's "Campaign successfully submitted" and CAMPAIGN_ID=N lines
    for each. Exit 2 on invalid input, with nothing written."""
    common.positive("--period", period)  # before anything is submitted
    if details and as_json:
        raise InputError("-d prints CiGri's document among the lines; --json prints one JSON value: give one")
    if campaign is not None and not (param_file or param_json) and not (jdl or inline) and wait:
        client = common.client()
        raise typer.Exit(live.reattach(client, common.campaign_id(client, campaign), period, as_json))
    if campaign is not None or param_file or param_json:
        if campaign is None or not (param_file or param_json) or jdl or inline:
            raise InputError("-c goes with -F or -J, without -f or -j (or -c N --wait follows campaign N)")
        if sum(str(path) == "-" for path in param_file) > 1:
            raise InputError("-F -: stdin can be given only once")
        added = [api.Lines(_open(path), str(path)) for path in param_file] + [_json_array(t) for t in param_json]
        client = common.client()
        campaign_id = common.campaign_id(client, campaign)
        tasks = 0
        for lines in added:  # each its own addition, as CiGri's: one refused leaves the ones before added
            result = client.extend(campaign_id, lines, strict=strict)
            _warn(result.warnings)
            tasks += result.tasks
            if not as_json:
                print(f"Jobs successfully added to campaign {campaign_id} ({result.tasks} tasks)")
                _details(client, campaign_id, details)
        if as_json:
            common.print_json({"campaign_id": campaign_id, "tasks": tasks})
        ids = [campaign_id]
    else:
        if not jdl and not inline:
            raise InputError("nothing to submit: give a JDL with -f FILE or -j JDL (see gridsub --help)")
        user = api.current_user()
        texts = _read_all(jdl, user) + [api.local_jdl(text, base_dir=Path.cwd(), user=user, source="-j")
                                        for text in inline]
        client = common.client()
        results = client.submit(texts, strict=strict)
        _warn([line for result in results for line in result.warnings])
        submitted = [{"campaign_id": result.campaign_id, "tasks": result.tasks} for result in results]
        if as_json:
            common.print_json(submitted[0] if len(submitted) == 1 else submitted)
        else:
            for entry in submitted:  # CiGri's lines, byte for byte: scripts read CAMPAIGN_ID=
                print("Campaign successfully submitted")
                _details(client, entry["campaign_id"], details)
                print(f"CAMPAIGN_ID={entry['campaign_id']}")
        sys.stdout.flush()  # a script reading CAMPAIGN_ID= through a pipe has it now, not when --wait ends
        ids = [e["campaign_id"] for e in submitted]
    if wait:
        raise typer.Exit(live.follow(client, ids, period, quiet=as_json)[0])
    live.say_if_no_cycles(client, ids[0])


def _details(client: Client, campaign_id: int, wanted: bool) -> None:
    """With -d, the campaign as CiGri's API answered the submission."""
    if wanted:
        sys.stdout.write(cigri3.dump(cigri3.campaign(client.campaign(campaign_id))))


def _json_array(text: str) -> api.Lines:
    """-J's parameters: CiGri's JSON array of strings, read as a -F file holding it is."""
    if not text.lstrip().startswith("["):
        raise InputError("-J: expected CiGri's JSON array of parameters, e.g. '[\"a 1\", \"b 2\"]'")
    return api.Lines(io.BytesIO(text.encode()), "-J")


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
