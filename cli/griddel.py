"""griddel: cancel, pause or resume campaigns, or kill one job."""

from __future__ import annotations

from typing import Optional

import typer

from cigri import api
from cigri.cli import common
from cigri.errors import InputError

app = typer.Typer(add_completion=True, help="Cancel, pause or resume campaigns.")


@app.command()
@common.errors_to_exit
def griddel(
    campaigns: list[int] = typer.Argument(None, metavar="[CAMPAIGN]...", help="Campaigns to act on."),
    pause: bool = typer.Option(False, "-p", "--pause", help="Pause: no new jobs; running ones go on."),
    resume: bool = typer.Option(False, "-r", "--resume", help="Resume paused campaigns."),
    job: Optional[int] = typer.Option(None, "-j", "--job", help="Kill this job only (its task is cancelled)."),
    version: bool = common.VersionOption,
) -> None:
    """Cancel campaigns (their jobs are killed at the next cycle)."""
    if pause and resume:
        raise InputError("-p and -r exclude each other")
    if job is None and not campaigns:
        raise InputError("nothing to do: give campaign numbers or -j JOB")
    grid = common.grid()
    user = api.current_user()
    if job is not None:
        api.cancel_job(grid, job, user=user)
        print(f"Job {job}: kill requested")
    action, verb = ((api.pause, "paused") if pause else (api.resume, "resumed") if resume else (api.cancel, "cancelled"))
    for campaign_id in campaigns or []:
        action(grid, campaign_id, user=user)
        print(f"Campaign {campaign_id}: {verb}")


def main() -> None:
    app()
