"""The two ways a message leaves: mail (smtplib) and webhook (an HTTP POST of JSON, httpx)."""

from __future__ import annotations

import json
import smtplib
import ssl
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx

from cigri.config import NotifySettings
from cigri.errors import ConfigError
from cigri.notify import targets


def render_text(document: dict[str, Any]) -> str:
    """The mail body: one paragraph per event, with its count, examples and stderr tail."""
    lines = []
    for event in document["events"]:
        where = "".join([f" campaign #{event['campaign_id']}" if event["campaign_id"] else "",
                         f" cluster {event['cluster']}" if event["cluster"] else ""])
        lines.append(f"[{event['severity']}] {event['code']} (event #{event['id']},{where}): {event['message']}")
        lines.append(f"  {event['new']} new occurrence(s), {event['count']} in all")
        if event["examples"]:
            lines.append("  examples: " + ", ".join(f"task {x['task_id']} job {x['job_id']}" for x in event["examples"]))
        if event["stderr_tail"]:
            lines += ["  stderr:"] + [f"    {line}" for line in event["stderr_tail"].splitlines()]
        lines.append("")
    lines.append("See them with: gridevents -e ID; close them with: gridevents -e ID --fix")
    return "\n".join(lines) + "\n"


def send_mail(settings: NotifySettings, to: str, document: dict[str, Any], created_at: float) -> None:
    message = EmailMessage()
    message["Subject"] = f"{settings.subject_tag} ({document['severity']}): {document['subject']}"
    domain = settings.mail_from.rpartition("@")[2] or "localhost"
    message["Message-ID"] = f"<cigri-notification-{document['id']}-{int(created_at)}@{domain}>"  # same on a resend
    message.set_content(render_text(document))
    _send(settings, to, message)


def send_code(settings: NotifySettings, to: str, *, user: str, subscription_id: int, code: str) -> None:
    """The mail asking whoever reads ``to`` to confirm ``user``'s subscription: it names the user
    and says that ignoring it stops everything."""
    message = EmailMessage()
    message["Subject"] = f"{settings.subject_tag} confirm the notifications of {user}"
    message.set_content(
        f"cigri user {user} asked to be sent the notifications of their campaigns (with their errors'\n"
        f"output) at this address. If that is you, confirm within 24 hours with:\n\n"
        f"    gridnotify confirm {subscription_id} {code}\n\n"
        "If it is not, ignore this mail: nothing more is sent here unless the code is typed.\n")
    _send(settings, to, message)


def _send(settings: NotifySettings, to: str, message: EmailMessage) -> None:
    if not settings.smtp_host:
        raise ConfigError("notify.smtp_host is not set: mail notifications cannot be sent")
    message["From"] = settings.mail_from
    message["To"] = to
    with smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=settings.timeout) as smtp:
        if settings.smtp_starttls:
            smtp.starttls(context=ssl.create_default_context())
        if settings.smtp_user:
            smtp.login(settings.smtp_user, _secret(settings.smtp_password_file))
        smtp.send_message(message)


def send_webhook(settings: NotifySettings, target: str, document: dict[str, Any]) -> None:
    """POST the document to one of the addresses the target's host resolves to now, each one
    checked (:mod:`cigri.notify.targets`): the connection goes to that address, never to the name
    resolved again, with the host name kept for ``Host`` and TLS (SNI and the certificate's
    check against the system's CAs). No redirect is followed (a 3xx fails), and no proxy of the
    environment is used: a proxy would resolve the name itself."""
    url = httpx.URL(target)
    addresses = targets.check(targets.resolve(url), settings.webhook_allow)
    body = json.dumps(document).encode()
    headers = {"Host": url.netloc.decode("ascii"), "Content-Type": "application/json"}
    failure: httpx.TransportError | None = None
    with httpx.Client(timeout=settings.timeout, follow_redirects=False, trust_env=False,
                      verify=ssl.create_default_context()) as client:  # the system's CAs, as for mail
        for address in addresses:
            try:
                response = client.post(url.copy_with(host=str(address)), content=body, headers=headers,
                                       extensions={"sni_hostname": url.raw_host.decode("ascii")})
            except httpx.ConnectError as error:  # the next address may answer
                failure = error
                continue
            response.raise_for_status()
            return
    assert failure is not None  # getaddrinfo gives at least one address or raises
    raise failure


def _secret(path: str) -> str:
    if not path:
        raise ConfigError("notify.smtp_password_file: required with notify.smtp_user")
    try:
        return Path(path).expanduser().read_text().strip()
    except OSError as error:
        raise ConfigError(f"notify.smtp_password_file: {error.strerror}") from None
