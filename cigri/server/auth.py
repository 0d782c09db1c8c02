"""Who is calling, decided once per request by the server alone.

- On the Unix socket, the kernel says which uid is at the other end (``SO_PEERCRED``, as
  slurmrestd's ``rest_auth/local``): nobody on the server's host needs a password or a token.
- Over TCP, a token (``Authorization: Bearer``), over HTTPS or from a loopback address only.
- From the addresses of ``server.trusted_proxies`` only, the user named by
  ``server.trusted_header`` (CiGri v3's Apache front).
- For the dashboard's pages only (never the API, whose POSTs carry no CSRF token), a browser
  session: a cookie naming a session the server opened when a token was entered in its login
  form (:class:`BrowserSessions`).

Nothing the caller's environment, configuration files or flags say takes part: the admin list
is the server's configuration, read by the server.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import pwd
import secrets
import socket
import struct
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from cigri.config import Config
from cigri.errors import Unauthenticated
from cigri.grid import Grid
from cigri.api.tokens import token_user
from cigri.users import is_admin

PEER_UID = "cigri.peer_uid"  # the key of the peer's uid in a request's scope state


class PeerCredentialsProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol (httptools, its C parser), which also asks the kernel who is
    at the other end of a Unix socket and puts that uid in every request's scope state, where
    no request can write."""

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family == socket.AF_UNIX:
            credentials = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            _, uid, _ = struct.unpack("3i", credentials)
            self.app_state = {**self.app_state, PEER_UID: uid}


@dataclass(frozen=True)
class Caller:
    """The authenticated user of one request, and how the server knows it."""

    user: str
    admin: bool
    method: str  # "socket", "token" or "proxy"


def user_of_uid(uid: int) -> str:
    """A uid's login name; a uid without one is still a distinct, unforgeable identity."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def identify(config: Config, scope: Mapping[str, Any], headers: Mapping[str, str]) -> Caller | str:
    """The caller of a request, from what the server alone can vouch for: a Caller, or the
    token still to look up (:func:`token_caller`, which reads the database); Unauthenticated
    (401) when nothing vouches. ``headers`` are lower-cased."""
    uid = scope.get("state", {}).get(PEER_UID)
    if uid is not None:
        return _caller(config, user_of_uid(uid), "socket")
    client = (scope.get("client") or ("", 0))[0]
    authorization = headers.get("authorization", "")
    if authorization:
        scheme, _, secret = authorization.partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            raise Unauthenticated("Authorization: expected 'Bearer TOKEN'")
        check_token_transport(scope)
        return secret.strip()
    trusted = config.server.trusted_proxies.replace(",", " ").split()
    header = config.server.trusted_header.lower()
    if trusted and client in trusted and (name := headers.get(header, "").strip()):
        if not name.isprintable() or len(name) > 64 or " " in name:
            raise Unauthenticated(f"{config.server.trusted_header}: not a user name")
        return _caller(config, name, "proxy")
    raise Unauthenticated("who are you? use the server's Unix socket on its host, or a token "
                          "(CIGRI_TOKEN or ~/.config/cigri/token; cigri token create makes one)")


def check_token_transport(scope: Mapping[str, Any]) -> None:
    """Unauthenticated unless the request came over HTTPS or from a loopback address: a token
    never travels in clear over a network."""
    if scope.get("scheme") != "https" and not _loopback((scope.get("client") or ("", 0))[0]):
        raise Unauthenticated("a token travels only over HTTPS (or from this machine's loopback)")


def token_caller(grid: Grid, secret: str) -> Caller:
    """The owner of a token, as a caller; Unauthenticated if it is unknown, expired or revoked."""
    return _caller(grid.config, token_user(grid, secret), "token")


def _caller(config: Config, user: str, method: str) -> Caller:
    return Caller(user, is_admin(config, user), method)


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


class BrowserSessions:
    """The dashboard's browser sessions, in the server's memory only: a session is opened with
    an API token entered in the login form, and its random id travels in an HttpOnly,
    SameSite=Strict cookie. The token is looked up again at every page (:func:`token_caller`),
    so a session ends with its token's expiry or revocation, and with logout or a restart of
    the server. At most ``limit`` sessions are kept, the oldest dropped first.

    Every form of a page carries a CSRF token, an HMAC of who the form is for (the session, or
    a caller the server identified otherwise) under a key drawn at start: a page of another
    site cannot read it, so it cannot post a form as the user."""

    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self.tokens: dict[str, str] = {}  # session id -> the API token it was opened with
        self.key = secrets.token_bytes(32)
        self.lock = threading.Lock()

    def open(self, token: str) -> str:
        session_id = secrets.token_urlsafe(32)
        with self.lock:
            while len(self.tokens) >= self.limit:
                del self.tokens[next(iter(self.tokens))]  # dicts keep insertion order: the oldest
            self.tokens[session_id] = token
        return session_id

    def token(self, session_id: str) -> str | None:
        with self.lock:
            return self.tokens.get(session_id)

    def close(self, session_id: str) -> None:
        with self.lock:
            self.tokens.pop(session_id, None)

    def csrf(self, holder: str) -> str:
        """The CSRF token of the forms shown to ``holder`` (``session:ID`` or ``METHOD:USER``)."""
        return hmac.new(self.key, holder.encode(), hashlib.sha256).hexdigest()

    def csrf_matches(self, holder: str, given: str) -> bool:
        return hmac.compare_digest(self.csrf(holder), given)
