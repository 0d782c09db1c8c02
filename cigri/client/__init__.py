"""How the commands reach the grid, chosen once per command: through a ``cigri server`` when
one is configured, else directly (the embedded default: one person, their own database).

The choice, first that applies: ``CIGRI_SERVER`` (``unix:/path/cigri.sock``,
``https://host:port``, or ``http://`` on loopback), then ``[client] server`` in the
configuration, then the site's socket (``[server] socket``) if it exists; otherwise direct.
A token for TCP comes from ``CIGRI_TOKEN`` or ``~/.config/cigri/token`` (refused unless
0600). Both transports offer the same methods (:class:`Client`) with the same answers and the
same errors, so nothing else in a command knows which one it uses.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import platformdirs

from cigri.uploads import JDLText, Lines, Submitted
from cigri.config import Config
from cigri.errors import CigriError, InputError

if TYPE_CHECKING:
    from cigri.cycle import CycleReport

TOKEN_FILE = Path(platformdirs.user_config_dir("cigri")) / "token"


class Client(Protocol):
    """What a command may ask of the grid, as the acting user (decided by the server, or, in
    direct mode, the Unix user running the command)."""

    user: str
    admin: bool
    direct: bool

    def submit(self, jdls: list[JDLText], *, strict: bool = False) -> list[Submitted]: ...
    def extend(self, campaign_id: int, lines: Lines, *, strict: bool = False) -> Submitted: ...
    def campaigns(self, *, user: str | None = None, mine: bool = False, include_finished: bool = False,
                  states: tuple[str, ...] = (), name: str | None = None,
                  since: float | None = None) -> list[dict[str, Any]]: ...
    def campaign(self, campaign_id: int) -> dict[str, Any]: ...
    def campaign_share(self, campaign_id: int) -> dict[str, Any]: ...
    def tasks(self, campaign_id: int, *, states: tuple[str, ...] = (), offset: int = 0,
              limit: int | None = None) -> Iterator[dict[str, Any]]: ...
    def campaign_jdl(self, campaign_id: int) -> dict[str, Any]: ...
    def imported_campaign(self, v3_id: int) -> int: ...
    def campaign_clusters(self, campaign_id: int) -> list[dict[str, Any]]: ...
    def campaign_throughput(self, campaign_id: int, points: int) -> dict[str, Any]: ...
    def purge(self, campaign_id: int) -> None: ...
    def purge_campaigns(self, campaign_ids: list[int]) -> list[int]: ...
    def purge_ended(self, days: float) -> list[int]: ...
    def pause(self, campaign_id: int) -> None: ...
    def resume(self, campaign_id: int) -> None: ...
    def cancel(self, campaign_id: int) -> None: ...
    def job(self, job_id: int) -> dict[str, Any]: ...
    def job_output(self, job_id: int, stream: str) -> str: ...
    def cancel_job(self, job_id: int) -> None: ...
    def job_on_cluster(self, job_id: int) -> dict[str, Any]: ...
    def mark_job_event(self, job_id: int, message: str) -> int: ...
    def events(self, *, campaign_id: int | None = None, global_only: bool = False,
               include_closed: bool = False) -> list[dict[str, Any]]: ...
    def event(self, event_id: int) -> dict[str, Any]: ...
    def fix_events(self, *, event_id: int | None = None, campaign_id: int | None = None, global_only: bool = False,
                   resubmit: bool = False) -> dict[str, int]: ...
    def subscribe(self, *, kind: str, target: str, severity: str) -> dict[str, Any]: ...
    def confirm_subscription(self, subscription_id: int, code: str) -> dict[str, Any]: ...
    def unsubscribe(self, subscription_id: int) -> None: ...
    def subscriptions(self, *, all_users: bool = False) -> list[dict[str, Any]]: ...
    def clusters(self) -> list[dict[str, Any]]: ...
    def usage(self, hours: float) -> list[dict[str, Any]]: ...
    def core_hours(self, hours: float) -> list[dict[str, Any]]: ...
    def cluster_table(self) -> list[dict[str, Any]]: ...
    def add_cluster(self, name: str, backend: str, options: dict[str, Any]) -> None: ...
    def remove_cluster(self, name: str) -> None: ...
    def blacklist(self, name: str, reason: str | None) -> None: ...
    def cancel_cluster_campaigns(self, name: str) -> list[int]: ...
    def test_cluster(self, name: str, directory: str | None, timeout: float) -> dict[str, Any]: ...
    def shares(self) -> dict[str, Any]: ...
    def classes(self) -> list[dict[str, Any]]: ...
    def users(self) -> dict[str, Any]: ...
    def create_token(self, *, owner: str | None, ttl: str | None, note: str) -> dict[str, Any]: ...
    def tokens(self, *, all_users: bool = False) -> list[dict[str, Any]]: ...
    def revoke_token(self, token_id: int) -> None: ...
    def add_cluster_token(self, cluster: str, token: str) -> dict[str, Any]: ...
    def cluster_tokens(self) -> list[dict[str, Any]]: ...
    def remove_cluster_token(self, cluster: str) -> None: ...
    def cycles(self) -> dict[str, Any]:
        """Whether something runs the grid's cycles: ``ok``, and ``last_ended_at`` (epoch
        seconds or None) — :func:`cigri.api.cycles`, or through a server its ``/healthz``."""

    def drive_cycle(self) -> CycleReport | None:
        """Run one cycle for a waiting command if this client may and no daemon does; None
        when the grid's own cycles run them (a server, a daemon, cron)."""

    def close(self) -> None: ...


def server_address(config: Config) -> str | None:
    """Where the server is, if the commands are to use one (see the module's docstring)."""
    address = os.environ.get("CIGRI_SERVER") or config.client.server
    if address:
        return address
    site = Path(config.server.socket)
    try:
        return f"unix:{site}" if stat.S_ISSOCK(site.stat().st_mode) else None
    except OSError:
        return None


def read_token() -> str | None:
    """The user's token: ``CIGRI_TOKEN``, else the token file, which must be private (0600)."""
    token = os.environ.get("CIGRI_TOKEN", "").strip()
    if token:
        return token
    try:
        mode = TOKEN_FILE.stat().st_mode
    except OSError:
        return None
    if mode & 0o077:
        raise InputError(f"{TOKEN_FILE}: readable by others (mode {stat.S_IMODE(mode):04o}); "
                         f"chmod 600 {TOKEN_FILE}, or make a new token: the old one may be known")
    return TOKEN_FILE.read_text().strip() or None


def prepare_token_file() -> None:
    """Make the token file's directory (0700) if it is missing; InputError when it cannot be."""
    try:
        TOKEN_FILE.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        raise CigriError(f"{TOKEN_FILE.parent}: cannot make the directory: {error.strerror}") from None


def save_token(secret: str) -> None:
    """Write the token file, private from its first byte (0600) and replaced whole: a reader
    sees the old token or the new one, never a part, and never a file others could read."""
    prepare_token_file()
    staged = TOKEN_FILE.with_name(f".{TOKEN_FILE.name}.{os.getpid()}")
    try:
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with open(fd, "w") as out:
            out.write(secret + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(staged, TOKEN_FILE)
    except OSError as error:
        staged.unlink(missing_ok=True)
        raise CigriError(f"{TOKEN_FILE}: cannot write the token: {error.strerror}") from None


def connect(config: Config) -> Client:
    """The client the commands use for ``config``: a server's, else direct."""
    address = server_address(config)
    if address is not None:
        from cigri.client.http import HTTPClient

        return HTTPClient(address, read_token(), ca_file=config.client.ca_file or None)
    from cigri.client.direct import DirectClient

    return DirectClient.open(config)
