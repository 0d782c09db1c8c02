"""gridtoken: register your own token for a cluster whose jobs run with their owner's token."""

from __future__ import annotations

import getpass
import sys
from pathlib import Path
from typing import Optional

import typer

from cigri.cli import cigri3, common
from cigri.client import Client
from cigri.errors import InputError

app = typer.Typer(add_completion=True, no_args_is_help=True, invoke_without_command=True,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Your tokens for the clusters that run your jobs with them (identity = \"tokens\").")


@app.callback()
@common.errors_to_exit
def options(
    ctx: typer.Context,
    list_them: bool = typer.Option(False, "-l", "--list", help="Your tokens' clusters, as CiGri listed them "
                                                                "(never the tokens)."),
    cluster: Optional[str] = typer.Option(None, "-i", "--cluster-id", metavar="CLUSTER",
                                          help="The cluster, by number (gridclusters) or name: with -t or -r."),
    token: Optional[str] = typer.Option(None, "-t", "--token", metavar="TOKEN",
                                        help="Register TOKEN for -i CLUSTER; - reads it from standard input "
                                             "(an argument is seen by every user: prefer gridtoken add)."),
    remove_it: bool = typer.Option(False, "-r", "--remove", help="Forget your token for -i CLUSTER."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Accepted for CiGri's scripts: gridtoken always "
                                                                 "says what it did."),
    version: bool = common.VersionOption,
) -> None:
    """One token per cluster, kept by cigri where no one else can read it, never shown again.
    CiGri's options (-l, -i CLUSTER -t TOKEN, -i CLUSTER -r) do what the sub-commands do."""
    given = list_them or cluster is not None or token is not None or remove_it
    if ctx.invoked_subcommand is not None:
        if given:
            raise InputError(f"-l, -i, -t and -r are CiGri's forms of the sub-commands: not with "
                             f"{ctx.invoked_subcommand}")
        return None
    if not given:  # -v alone: the help, as CiGri's gridtoken
        print(ctx.get_help())
        return None
    if list_them:
        if cluster is not None or token is not None or remove_it:
            raise InputError("-l goes alone")
        return _cigri_list()
    if cluster is None or (token is None) == (not remove_it):
        raise InputError("give -i CLUSTER with -t TOKEN (register) or -r (remove), or -l")
    client = common.client()
    name = cigri3.cluster_name(client, cluster)
    if remove_it:
        return _forget(client, name)
    assert token is not None
    if token != "-":
        print("gridtoken: warning: -t TOKEN was visible to every user of this machine while gridtoken ran; "
              "use gridtoken add CLUSTER < FILE (or -t -)", file=sys.stderr)
    return _register(client, name, _read_token(None) if token == "-" else token.strip(), as_json=False)


def _cigri_list() -> None:
    """CiGri's ``gridtoken -l``: a title, then a line per cluster (none: nothing); where CiGri
    showed the token, cigri shows when it was registered."""
    client = common.client()
    rows = client.cluster_tokens()
    ids = {c["name"]: c["id"] for c in client.cluster_table()}
    if rows:
        print("You have the following tokens:")
    for row in rows:
        print(f" - Cluster #{ids.get(row['cluster'], '?')} : {row['cluster']}, registered "
              f"{common.when(row['registered_at'])}")


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
    return _register(common.client(), cluster, _read_token(token_file), as_json)


def _register(client: Client, cluster: str, token: str, as_json: bool) -> None:
    result = client.add_cluster_token(cluster, token)
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
    _forget(common.client(), cluster)


def _forget(client: Client, cluster: str) -> None:
    client.remove_cluster_token(cluster)
    print(f"Token for {cluster}: removed")


def main() -> None:
    common.run(app)
