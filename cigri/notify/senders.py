"""The two ways a message leaves: mail (smtplib) and webhook (an HTTP POST of JSON, httpx)."""

from __future__ import annotations

import smtplib
import ssl
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx

from cigri.config import NotifySettings
from cigri.errors import ConfigError


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
    if not settings.smtp_host:
        raise ConfigError("notify.smtp_host is not set: mail notifications cannot be sent")
    message = EmailMessage()
    message["From"] = settings.mail_from
    message["To"] = to
    message["Subject"] = f"{settings.subject_tag} ({document['severity']}): {document['subject']}"
    domain = settings.mail_from.rpartition("@")[2] or "localhost"
    message["Message-ID"] = f"<cigri-notification-{document['id']}-{int(created_at)}@{domain}>"  # same on a resend
    message.set_content(render_text(document))
    with smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=settings.timeout) as smtp:
        if settings.smtp_starttls:
            smtp.starttls(context=ssl.create_default_context())
        if settings.smtp_user:
            smtp.login(settings.smtp_user, _secret(settings.smtp_password_file))
        smtp.send_message(message)


def send_webhook(settings: NotifySettings, url: str, document: dict[str, Any]) -> None:
    response = httpx.post(url, json=document, timeout=settings.timeout, follow_redirects=False)
    response.raise_for_status()


def _secret(path: str) -> str:
    if not path:
        raise ConfigError("notify.smtp_password_file: required with notify.smtp_user")
    try:
        return Path(path).expanduser().read_text().strip()
    except OSError as error:
        raise ConfigError(f"notify.smtp_password_file: {error.strerror}") from None
