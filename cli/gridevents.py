"""gridevents: what went wrong (failed tasks with their stderr tail, cluster problems)."""

from __future__ import annotations

from typing import Optional

import typer

from cigri import api
from cigri.cli import common

app = typer.Typer(add_completion=True, help="List events.")


@app.command()
@common.errors_to_exit
def gridevents(
    campaign: Optional[int] = typer.Option(None, "-c", "--campaign", help="Only this campaign's events."),
    all_events: bool = typer.Option(False, "-a", "--all", help="Closed events too."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON value."),
    version: bool = common.VersionOption,
) -> None:
    """List open events, newest last."""
    events = api.events(common.grid(), campaign_id=campaign, include_closed=all_events)
    if as_json:
        return common.print_json(events)
    common.print_table(None, ["id", "date", "state", "code", "campaign", "cluster", "job", "message", "stderr tail"],
                       [[e["id"], common.when(e["created_at"]), e["state"], e["code"], e["campaign_id"], e["cluster"],
                         e["job_id"], e["message"], (e["stderr_tail"] or "").strip()] for e in events])


def main() -> None:
    app()
