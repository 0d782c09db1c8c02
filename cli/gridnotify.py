"""gridnotify: subscribe to notifications (mail or webhook) of your campaigns' events."""

from __future__ import annotations

from typing import Any, Optional

import typer

from cigri.cli import common
from cigri.errors import InputError, NotFound

app = typer.Typer(add_completion=True, no_args_is_help=True, invoke_without_command=True,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Subscribe to notifications: campaign finished or failed, blacklists, event digests.")


@app.callback()
@common.errors_to_exit
def options(
    ctx: typer.Context,
    list_them: bool = typer.Option(False, "-l", "--list", help="Your subscriptions, as CiGri listed them."),
    mail: Optional[str] = typer.Option(None, "-m", "--mail", metavar="ADDRESS",
                                       help="Subscribe this address (with -s), or unsubscribe it (with -u)."),
    jabber: Optional[str] = typer.Option(None, "-j", "--jabber", metavar="JID",
                                         help="Refused: cigri sends mails and webhooks, not Jabber messages."),
    unsubscribe_it: bool = typer.Option(False, "-u", "--unsubscribe", help="With -m: unsubscribe that address."),
    severity: Optional[str] = typer.Option(None, "-s", "--severity", metavar="LEVEL",
                                           help="With -m: the least severity sent, low, medium (default) or high."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Accepted for CiGri's scripts: gridnotify always "
                                                                 "says what it did."),
    version: bool = common.VersionOption,
) -> None:
    """Notifications are grouped: one message per subscription per cycle, whatever the number of events.
    CiGri's options (-l, -m ADDRESS -s LEVEL, -m ADDRESS -u) do what the sub-commands do."""
    given = list_them or mail is not None or jabber is not None or unsubscribe_it or severity is not None
    if ctx.invoked_subcommand is not None:
        if given:
            raise InputError(f"-l, -m, -j, -u and -s are CiGri's forms of the sub-commands: not with "
                             f"{ctx.invoked_subcommand}")
        return None
    if not given:  # -v alone: the help, as CiGri's gridnotify without -l, -m or -j
        print(ctx.get_help())
        return None
    if jabber is not None:
        raise InputError("-j: Jabber is not supported; subscribe a mail address (-m ADDRESS) or a webhook "
                         "(gridnotify subscribe --webhook URL) instead")
    if list_them:
        if mail is not None or unsubscribe_it or severity is not None:
            raise InputError("-l goes alone")
        return _cigri_list(common.client().subscriptions())
    if mail is None:
        raise InputError("-u and -s go with -m ADDRESS")
    if unsubscribe_it:
        if severity is not None:
            raise InputError("-u unsubscribes: without -s")
        return _unsubscribe_address(mail)
    return _subscribe("mail", mail, severity or "medium", as_json=False)


def _cigri_list(rows: list[dict[str, Any]]) -> None:
    """CiGri's ``gridnotify -l``: a title, then a line per subscription (none: nothing)."""
    if rows:
        print("You have the following notification subscriptions:")
    for row in rows:
        print(f" - {row['kind']} on {row['target']} with severity {row['severity']}"
              + ("" if row["confirmed"] else " (unconfirmed: gridnotify confirm)"))


def _unsubscribe_address(address: str) -> None:
    """CiGri's ``gridnotify -m ADDRESS -u``: the mail subscription to that address."""
    client = common.client()
    ids = [row["id"] for row in client.subscriptions() if row["kind"] == "mail" and row["target"] == address]
    if not ids:
        raise NotFound(f"mail {address}: you have no subscription to it")
    for subscription in ids:
        client.unsubscribe(subscription)
        print(f"Subscription {subscription}: removed")


@app.command()
@common.errors_to_exit
def subscribe(
    mail: Optional[str] = typer.Option(None, "--mail", help="Send mails to this one address (user@domain); one other than your own is mailed a code to confirm first (gridnotify confirm)."),
    webhook: Optional[str] = typer.Option(None, "--webhook", help="POST a JSON document to this http(s) URL: a public address, unless the site allows its network (notify.webhook_allow); redirects are not followed."),
    severity: str = typer.Option("medium", "-s", "--severity", help="Least severity sent: low, medium or high."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON value."),
) -> None:
    """Subscribe (again, to change the severity)."""
    if (mail is None) == (webhook is None):
        raise InputError("give exactly one of --mail ADDRESS or --webhook URL")
    kind, target = ("mail", mail) if mail is not None else ("webhook", webhook)
    assert target is not None
    return _subscribe(kind, target, severity, as_json)


def _subscribe(kind: str, target: str, severity: str, as_json: bool) -> None:
    subscription = common.client().subscribe(kind=kind, target=target, severity=severity)
    if as_json:
        return common.print_json(subscription)
    print(f"Subscription {subscription['id']}: {kind} {subscription['target']}, severity {severity} and above"
          + ("" if subscription["confirmed"] else
             f"; unconfirmed: nothing is sent there until you type the code mailed to it: "
             f"gridnotify confirm {subscription['id']} CODE"))
    return None


@app.command()
@common.errors_to_exit
def confirm(subscription: int = typer.Argument(..., help="The subscription's id (gridnotify list)."),
            code: str = typer.Argument(..., help="The code mailed to its address (valid 24 hours)."),
            as_json: bool = typer.Option(False, "--json", help="Print one JSON value.")) -> None:
    """Confirm a mail subscription with the code mailed to its address: until then nothing, not even events, is sent there."""
    confirmed = common.client().confirm_subscription(subscription, code)
    if as_json:
        return common.print_json(confirmed)
    print(f"Subscription {subscription}: {confirmed['kind']} {confirmed['target']} confirmed")
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
    common.print_table(None, ["id", "user", "kind", "target", "severity", "confirmed", "sent", "pending", "failed",
                              "last error"],
                       [[r["id"], r["user"], r["kind"], r["target"], r["severity"], "yes" if r["confirmed"] else "no",
                         r["sent"], r["pending"], r["failed"], r["last_error"]] for r in rows])
    return None


def main() -> None:
    common.run(app)
