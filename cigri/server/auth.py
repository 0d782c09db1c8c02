"""Who is calling, decided once per request by the server alone, from what it can vouch for.

- On the Unix socket, the kernel says which uid is at the other end (``SO_PEERCRED``, read by
  :mod:`cigri.server.guard`): nobody on the server's host needs a password or a token.
- Over TCP, a token (``Authorization: Bearer``), over HTTPS or from a loopback address only.
- A trusted front (an Apache or nginx with the site's single sign-on, as CiGri v3 had) names
  the user in ``server.trusted_header``, and is believed only when the server can tell it is
  the front: a connection to the socket from one of ``server.front_users`` (the kernel's
  answer), or a TCP connection from ``server.trusted_proxies`` that also carries the secret of
  ``server.front_secret_file``. An address alone vouches for nothing (every user of the front's
  host connects from it), and no forwarded-address header is ever read. A front never names
  root.
- For the dashboard's pages only (never the API), a browser session: a cookie naming a session
  the server opened when a token was entered in its login form (:class:`BrowserSessions`).

A request that changes something and is not authenticated by a token must also show it does
not come from another site's page (:func:`check_not_cross_site`): a browser sends the front's
or the session's credentials by itself, whoever made the request.

Nothing the caller's environment, configuration files or flags say takes part: the admin list
is the server's configuration, read by the server.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import pwd
import re
import secrets
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cigri.config import Config
from cigri.errors import ConfigError, Forbidden, LimitExceeded, Unauthenticated
from cigri.grid import Grid
from cigri.api.tokens import token_user
from cigri.server.guard import PEER_UID
from cigri.users import is_admin

FRONT_SECRET_HEADER = "x-cigri-front-secret"
CLIENT_HEADER = "x-requested-with"  # cigri's clients send it; a cross-site form or simple request cannot
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
MIN_SECRET = 32  # characters of a front's secret
LOGIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")  # a user a front names: a login, never a uid or an option


@dataclass(frozen=True)
class Caller:
    """The authenticated user of one request, and how the server knows it."""

    user: str
    admin: bool
    method: str  # "socket", "token", "proxy" (a trusted front) or "session" (the dashboard's)


@dataclass(frozen=True)
class Front:
    """The trusted front of ``[server]``, as the server checks it: the uids of its accounts on
    the socket, its addresses over TCP and the secret it must send there."""

    header: str  # lower-cased
    uids: frozenset[int]
    addresses: frozenset[str]
    secret: str

    @classmethod
    def of(cls, config: Config) -> Front:
        """Read from the configuration once, at start: an unknown account or an unreadable,
        empty or short secret is a ConfigError, never a front that vouches for nothing."""
        server = config.server
        uids = set()
        for name in server.front_user_names():
            try:
                uids.add(pwd.getpwnam(name).pw_uid)
            except KeyError:
                raise ConfigError(f"server.front_users: no such Unix account {name!r}") from None
        secret = ""
        if server.front_secret_file:
            try:
                secret = Path(server.front_secret_file).read_text().strip()
            except OSError as error:
                raise ConfigError(f"server.front_secret_file: {server.front_secret_file}: {error.strerror}") from None
            if len(secret) < MIN_SECRET:
                raise ConfigError(f"server.front_secret_file: the secret must be at least {MIN_SECRET} characters "
                                  "(openssl rand -hex 32 makes one)")
        return cls(server.trusted_header.lower(), frozenset(uids), frozenset(server.front_addresses()), secret)


def user_of_uid(uid: int) -> str:
    """A uid's login name; a uid without one is still a distinct, unforgeable identity."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def header_values(scope: Mapping[str, Any], name: str) -> list[str]:
    """Every value of header ``name`` (lower-case) in the request, in order."""
    wanted = name.encode("latin-1")
    return [value.decode("latin-1") for key, value in scope["headers"] if key.lower() == wanted]


def identify(config: Config, front: Front, scope: Mapping[str, Any]) -> Caller | str:
    """The caller of a request, from what the server alone can vouch for: a Caller, or the
    token still to look up (:func:`token_caller`, which reads the database); Unauthenticated
    (401) when nothing vouches."""
    uid = scope.get("state", {}).get(PEER_UID)
    if uid is not None:
        if uid in front.uids and header_values(scope, front.header):
            return _caller(config, _named_by_front(front, scope), "proxy")
        return _caller(config, user_of_uid(uid), "socket")
    authorization = header_values(scope, "authorization")
    if authorization:
        scheme, _, secret = authorization[-1].partition(" ")
        if len(authorization) > 1 or scheme.lower() != "bearer" or not secret.strip():
            raise Unauthenticated("Authorization: expected one 'Bearer TOKEN'")
        check_token_transport(scope)
        return secret.strip()
    client = (scope.get("client") or ("", 0))[0]
    if client in front.addresses and header_values(scope, front.header):
        given = header_values(scope, FRONT_SECRET_HEADER)
        if len(given) != 1 or not hmac.compare_digest(given[0].encode(), front.secret.encode()):
            raise Unauthenticated(f"{front.header}: the front's secret is missing or wrong")
        check_token_transport(scope)
        return _caller(config, _named_by_front(front, scope), "proxy")
    raise Unauthenticated("who are you? use the server's Unix socket on its host, or a token "
                          "(CIGRI_TOKEN or ~/.config/cigri/token; cigri token create --save makes one)")


def _named_by_front(front: Front, scope: Mapping[str, Any]) -> str:
    """The user a front's request names: one login, never root."""
    names = header_values(scope, front.header)
    if len(names) != 1 or not LOGIN.fullmatch(names[0]):
        raise Unauthenticated(f"{front.header}: not one user name")
    if names[0] == "root" or _uid_of(names[0]) == 0:
        raise Unauthenticated(f"{front.header}: a front never acts as root")
    return names[0]


def _uid_of(name: str) -> int | None:
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return None


def check_token_transport(scope: Mapping[str, Any]) -> None:
    """Unauthenticated unless the request came over HTTPS or from a loopback address: a token
    (or a front's secret) never travels in clear over a network."""
    if scope.get("scheme") != "https" and not _loopback((scope.get("client") or ("", 0))[0]):
        raise Unauthenticated("a token travels only over HTTPS (or from this machine's loopback)")


def check_not_cross_site(scope: Mapping[str, Any]) -> None:
    """Forbidden for a request a browser says another site's page made: ``Sec-Fetch-Site``
    cross-site or same-site (another host of the domain), or an ``Origin`` that is not the
    ``Host`` it was sent to (a front must pass the ``Host`` on)."""
    site = header_values(scope, "sec-fetch-site")
    if site and site[-1].lower() in ("cross-site", "same-site"):
        raise Forbidden(f"a request from another site's page ({site[-1]}) is refused")
    origin = header_values(scope, "origin")
    if origin:
        host = header_values(scope, "host")
        parts = urlsplit(origin[-1])
        if origin[-1] == "null" or not host or parts.netloc.lower() != host[-1].lower() or parts.scheme not in (
                "http", "https"):
            raise Forbidden(f"a request from another origin ({origin[-1]}) is refused")


def check_csrf_proof(scope: Mapping[str, Any], caller: Caller) -> None:
    """A state-changing API request not authenticated by a token: from no other site, and with
    ``X-Requested-With`` (cigri's clients send it), which no cross-site form or simple request
    can carry, so a browser would ask first, and the server answers no CORS."""
    if scope["method"] in SAFE_METHODS or caller.method == "token":
        return
    check_not_cross_site(scope)
    if not any(value.strip() for value in header_values(scope, CLIENT_HEADER)):
        raise Forbidden("a request that changes something needs the X-Requested-With header (cigri's clients send "
                        "it) or a token")


def check_json_client(scope: Mapping[str, Any], caller: Caller) -> None:
    """CiGri's clients' proof, in place of ``X-Requested-With`` (they never sent it): a
    state-changing request not authenticated by a token, from no other site, that no page of
    another site can make without asking the server first (which answers no CORS): a ``PUT`` or
    ``DELETE``, or a ``POST`` of ``application/json``, as every CiGri client posts."""
    if scope["method"] in SAFE_METHODS or caller.method == "token":
        return
    check_not_cross_site(scope)
    content_types = header_values(scope, "content-type")
    if scope["method"] == "POST" and (len(content_types) != 1 or
                                      content_types[0].split(";")[0].strip().lower() != "application/json"):
        raise Forbidden("a POST that changes something is application/json (as CiGri's clients send it) or has a "
                        "token")


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
    the server. A user holds at most ``per_user`` sessions, their own oldest dropped first, so
    nobody's logins can end another's session; past ``limit`` in all, logins wait (429).

    Every form of a page carries a CSRF token, an HMAC of who the form is for (the session, or
    a caller the server identified otherwise) under a key drawn at start: a page of another
    site cannot read it, so it cannot post a form as the user."""

    def __init__(self, per_user: int = 16, limit: int = 100_000) -> None:
        self.per_user, self.limit = per_user, limit
        self.tokens: dict[str, tuple[str, str]] = {}  # session id -> (its user, the API token it was opened with)
        self.by_user: dict[str, OrderedDict[str, None]] = {}  # a user's session ids, oldest first
        self.key = secrets.token_bytes(32)
        self.lock = threading.Lock()

    def open(self, user: str, token: str) -> str:
        session_id = secrets.token_urlsafe(32)
        with self.lock:
            own = self.by_user.get(user, OrderedDict())
            while len(own) >= self.per_user:
                self.tokens.pop(own.popitem(last=False)[0], None)
            if len(self.tokens) >= self.limit:
                raise LimitExceeded(f"the server holds {self.limit:,} sessions, its most: log in again later",
                                    retry_after=60)
            own[session_id] = None
            self.by_user[user] = own
            self.tokens[session_id] = (user, token)
        return session_id

    def token(self, session_id: str) -> str | None:
        with self.lock:
            held = self.tokens.get(session_id)
        return held[1] if held else None

    def close(self, session_id: str) -> None:
        with self.lock:
            held = self.tokens.pop(session_id, None)
            if held is not None:
                own = self.by_user[held[0]]
                own.pop(session_id, None)
                if not own:
                    del self.by_user[held[0]]

    def csrf(self, holder: str) -> str:
        """The CSRF token of the forms shown to ``holder`` (``session:ID`` or ``METHOD:USER``)."""
        return hmac.new(self.key, holder.encode(), hashlib.sha256).hexdigest()

    def csrf_matches(self, holder: str, given: str) -> bool:
        return hmac.compare_digest(self.csrf(holder), given)
