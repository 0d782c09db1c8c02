"""griddel: cancel, pause, resume or purge campaigns, or kill one job."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Optional

import typer

from cigri.cli import common
from cigri.errors import CigriError, InputError

app = typer.Typer(add_completion=True, context_settings={"help_option_names": ["-h", "--help"]},
                  help="Cancel, pause, resume or purge campaigns.")


@app.command()
@common.errors_to_exit
def griddel(
    campaigns: list[int] = typer.Argument(None, metavar="CAMPAIGN", help="Campaigns to act on.",
                                          autocompletion=common.complete_campaign),
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
    ids = [*(campaigns or []), *(_id(text) for value in campaign_ids for text in value.split(","))]
    if pause + resume + purge > 1:
        raise InputError("-p, -r and --purge exclude each other")
    if job is not None and (pause or resume or purge):
        raise InputError("-p, -r and --purge act on campaigns; a job (-j) can only be killed")
    if job is None and not ids:
        raise InputError("nothing to do: give campaign numbers or -j JOB")
    client = common.client()
    done = True
    if job is not None:
        done &= _act(functools.partial(client.cancel_job, job), f"Job {job}: kill requested")
    action, verb = ((client.pause, "paused") if pause else (client.resume, "resumed") if resume
                    else (client.purge, "purged") if purge else (client.cancel, "cancelled"))
    for campaign_id in ids:
        done &= _act(functools.partial(action, campaign_id), f"Campaign {campaign_id}: {verb}")
    if not done:
        raise typer.Exit(1)


def _id(text: str) -> int:
    """One id of ``-c 1,2,3``."""
    try:
        return int(text.strip())
    except ValueError:
        raise InputError(f"-c: {text!r} is not a campaign number") from None


def _act(action: Callable[[], None], success: str) -> bool:
    """Do one id's action and say how it went: a refusal is reported, not raised, so that every
    other id is still acted on and the user learns the fate of each."""
    try:
        action()
    except CigriError as error:
        common.print_error(error)
        return False
    print(success)
    return True


def main() -> None:
    common.run(app)
