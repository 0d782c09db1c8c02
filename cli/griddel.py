"""griddel: cancel, pause or resume campaigns, or kill one job."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Optional

import typer

from cigri.cli import common
from cigri.errors import CigriError, InputError

app = typer.Typer(add_completion=True, help="Cancel, pause or resume campaigns.")


@app.command()
@common.errors_to_exit
def griddel(
    campaigns: list[int] = typer.Argument(None, metavar="CAMPAIGN", help="Campaigns to act on.",
                                 autocompletion=common.complete_campaign),
    pause: bool = typer.Option(False, "-p", "--pause", help="Pause: no new jobs; running ones go on."),
    resume: bool = typer.Option(False, "-r", "--resume", help="Resume paused campaigns."),
    job: Optional[int] = typer.Option(None, "-j", "--job", help="Kill this job only (its task is cancelled)."),
    version: bool = common.VersionOption,
) -> None:
    """Cancel campaigns (their jobs are killed at the next cycle)."""
    if pause and resume:
        raise InputError("-p and -r exclude each other")
    if job is not None and (pause or resume):
        raise InputError("-p and -r pause and resume campaigns; a job (-j) can only be killed")
    if job is None and not campaigns:
        raise InputError("nothing to do: give campaign numbers or -j JOB")
    client = common.client()
    done = True
    if job is not None:
        done &= _act(functools.partial(client.cancel_job, job), f"Job {job}: kill requested")
    action, verb = ((client.pause, "paused") if pause else (client.resume, "resumed") if resume
                    else (client.cancel, "cancelled"))
    for campaign_id in campaigns or []:
        done &= _act(functools.partial(action, campaign_id), f"Campaign {campaign_id}: {verb}")
    if not done:
        raise typer.Exit(1)


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
