"""gridtoken: register your own token for a cluster whose jobs run with their owner's token."""

from __future__ import annotations

import getpass
import sys
from pathlib import Path
from typing import Optional

import typer

from cigri.cli import common
from cigri.errors import InputError

app = typer.Typer(add_completion=True, no_args_is_help=True,
                  help="Your tokens for the clusters that run your jobs with them (identity = \"tokens\").")


@app.callback()
def options(version: bool = common.VersionOption) -> None:
    """One token per cluster, kept by cigri where no one else can read it, never shown again."""


@app.command()
@common.errors_to_exit
def add(cluster: str = typer.Argument(..., help="The cluster (gridclusters)."),
        token_file: Optional[Path] = typer.Option(
            None, "--token-file", metavar="FILE",
            help="Read the token from FILE instead of standard input (never give it as an argument: "
                 "every user sees the arguments of running commands)."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON value.")) -> None:
    """Register your token for CLUSTER (or replace it): read from --token-file, else from
    standard input (asked for without echo on a terminal); e.g. for Slurm,
    `scontrol token lifespan=... | gridtoken add CLUSTER`."""
    result = common.client().add_cluster_token(cluster, _read_token(token_file))
    if as_json:
        return common.print_json(result)
    print(f"Token registered for {cluster}: your jobs there run as {result['login']}")
    return None


def _read_token(path: Optional[Path]) -> str:
    """The token, the ``SLURM_JWT=`` prefix of ``scontrol token``'s output removed."""
    if path is not None:
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as error:
            raise InputError(f"--token-file {path}: {getattr(error, 'strerror', None) or error}") from None
    elif sys.stdin.isatty():
        text = getpass.getpass("token: ")
    else:
        text = sys.stdin.read(1 << 20)
    return text.strip().removeprefix("SLURM_JWT=")


@app.command("list")
@common.errors_to_exit
def list_tokens(as_json: bool = typer.Option(False, "--json", help="Print one JSON value.")) -> None:
    """The clusters where you registered a token, and when (never the tokens)."""
    rows = common.client().cluster_tokens()
    if as_json:
        return common.print_json(rows)
    common.print_table(None, ["cluster", "registered"], [[r["cluster"], common.when(r["registered_at"])] for r in rows])
    return None


@app.command()
@common.errors_to_exit
def remove(cluster: str = typer.Argument(..., help="The cluster.")) -> None:
    """Forget your token for CLUSTER (refused while your jobs there need it)."""
    common.client().remove_cluster_token(cluster)
    print(f"Token for {cluster}: removed")


def main() -> None:
    common.run(app)
