"""gridnotify: subscribe to notifications (mail or webhook) of your campaigns' events."""

from __future__ import annotations

from typing import Optional

import typer

from cigri import api
from cigri.cli import common
from cigri.errors import InputError

app = typer.Typer(add_completion=True, no_args_is_help=True,
                  help="Subscribe to notifications: campaign finished or failed, blacklists, event digests.")


@app.callback()
def options(version: bool = common.VersionOption) -> None:
    """Notifications are grouped: one message per subscription per cycle, whatever the number of events."""


@app.command()
@common.errors_to_exit
def subscribe(
    mail: Optional[str] = typer.Option(None, "--mail", help="Send mails to this one address (user@domain)."),
    webhook: Optional[str] = typer.Option(None, "--webhook", help="POST a JSON document to this http(s) URL: a public address, unless the site allows its network (notify.webhook_allow); redirects are not followed."),
    severity: str = typer.Option("medium", "-s", "--severity", help="Least severity sent: low, medium or high."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON value."),
) -> None:
    """Subscribe (again, to change the severity)."""
    if (mail is None) == (webhook is None):
        raise InputError("give exactly one of --mail ADDRESS or --webhook URL")
    kind, target = ("mail", mail) if mail is not None else ("webhook", webhook)
    assert target is not None
    subscription_id = common.client().subscribe(kind=kind, target=target, severity=severity)
    if as_json:
        return common.print_json({"id": subscription_id})
    print(f"Subscription {subscription_id}: {kind} {api.shown_target(target)}, severity {severity} and above")
    return None


@app.command()
@common.errors_to_exit
def unsubscribe(subscription: int = typer.Argument(..., help="The subscription's id (gridnotify list).")) -> None:
    """Remove a subscription; its unsent messages are dropped."""
    common.client().unsubscribe(subscription)
    print(f"Subscription {subscription}: removed")


@app.command("list")
@common.errors_to_exit
def list_subscriptions(
    all_users: bool = typer.Option(False, "-a", "--all", help="Everyone's subscriptions (admins)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON value."),
) -> None:
    """Your subscriptions, with how many messages were sent, are pending or failed for good."""
    rows = common.client().subscriptions(all_users=all_users)
    if as_json:
        return common.print_json(rows)
    common.print_table(None, ["id", "user", "kind", "target", "severity", "sent", "pending", "failed", "last error"],
                       [[r["id"], r["user"], r["kind"], r["target"], r["severity"], r["sent"], r["pending"],
                         r["failed"], r["last_error"]] for r in rows])
    return None


def main() -> None:
    common.run(app)
