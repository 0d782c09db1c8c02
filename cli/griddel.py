"""griddel: cancel, pause, resume or purge campaigns, or kill one job."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Optional

import typer

from cigri.cli import common
from cigri.client import Client
from cigri.errors import CigriError, InputError

app = typer.Typer(add_completion=True, context_settings={"help_option_names": ["-h", "--help"]},
                  help="Cancel, pause, resume or purge campaigns.")


@app.command()
@common.errors_to_exit
def griddel(
    campaigns: list[str] = typer.Argument(None, metavar="CAMPAIGN", help="Campaigns to act on (N, or v3:N: "
                                                                         "CiGri's number, after cigri import-v3).",
                                          parser=common.campaign_ref, autocompletion=common.complete_campaign),
    campaign_ids: list[str] = typer.Option([], "-c", "--campaign_ids", "--campaign-ids", metavar="N,N,...",
                                           help="Campaigns to act on, comma-separated (CiGri's form)."),
    pause: bool = typer.Option(False, "-p", "--pause",
                               help="Pause: queued jobs withdrawn, no new ones; running ones go on."),
    resume: bool = typer.Option(False, "-r", "--resume", help="Resume paused campaigns."),
    purge: bool = typer.Option(False, "--purge", help="Delete ended campaigns with their tasks, jobs and events."),
    job: Optional[int] = typer.Option(None, "-j", "--job", help="Kill this job only (its task is cancelled)."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Accepted for CiGri's scripts: griddel always says "
                                                                 "what it did to each id."),
    version: bool = common.VersionOption,
) -> None:
    """Cancel campaigns (their jobs are killed at the next cycle)."""
    refs = [*(campaigns or []), *(_listed(text) for value in campaign_ids for text in value.split(","))]
    if pause + resume + purge > 1:
        raise InputError("-p, -r and --purge exclude each other")
    if job is not None and (pause or resume or purge):
        raise InputError("-p, -r and --purge act on campaigns; a job (-j) can only be killed")
    if job is None and not refs:
        raise InputError("nothing to do: give campaign numbers or -j JOB")
    client = common.client()
    done = True
    if job is not None:
        done &= _act(functools.partial(_kill, client, job))
    action, verb = ((client.pause, "paused") if pause else (client.resume, "resumed") if resume
                    else (client.purge, "purged") if purge else (client.cancel, "cancelled"))
    for ref in refs:
        done &= _act(functools.partial(_on_campaign, client, action, ref, verb))
    if not done:
        raise typer.Exit(1)


def _listed(text: str) -> str:
    """One campaign of ``-c 1,2,v3:3``."""
    try:
        return common.campaign_ref(text)
    except typer.BadParameter as error:
        raise InputError(f"-c: {error.message}") from None


def _kill(client: Client, job: int) -> str:
    client.cancel_job(job)
    return f"Job {job}: kill requested"


def _on_campaign(client: Client, action: Callable[[int], None], ref: str, verb: str) -> str:
    campaign_id = common.campaign_id(client, ref)
    action(campaign_id)
    return f"Campaign {campaign_id}{f' ({ref})' if ref.startswith('v3:') else ''}: {verb}"


def _act(action: Callable[[], str]) -> bool:
    """Do one id's action and print the line it returns: a refusal is reported, not raised, so
    that every other id is still acted on and the user learns the fate of each."""
    try:
        success = action()
    except CigriError as error:
        common.print_error(error)
        return False
    print(success)
    return True


def main() -> None:
    common.run(app)
