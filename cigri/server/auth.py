"""Who is calling, decided once per request by the server alone.

- On the Unix socket, the kernel says which uid is at the other end (``SO_PEERCRED``, as
  slurmrestd's ``rest_auth/local``): nobody on the server's host needs a password or a token.
- Over TCP, a token (``Authorization: Bearer``), over HTTPS or from a loopback address only.
- From the addresses of ``server.trusted_proxies`` only, the user named by
  ``server.trusted_header`` (CiGri v3's Apache front).

Nothing the caller's environment, configuration files or flags say takes part: the admin list
is the server's configuration, read by the server.
"""

from __future__ import annotations

import ipaddress
import pwd
import socket
import struct
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
        if scope.get("scheme") != "https" and not _loopback(client):
            raise Unauthenticated("a token travels only over HTTPS (or from this machine's loopback)")
        return secret.strip()
    trusted = config.server.trusted_proxies.replace(",", " ").split()
    header = config.server.trusted_header.lower()
    if trusted and client in trusted and (name := headers.get(header, "").strip()):
        if not name.isprintable() or len(name) > 64 or " " in name:
            raise Unauthenticated(f"{config.server.trusted_header}: not a user name")
        return _caller(config, name, "proxy")
    raise Unauthenticated("who are you? use the server's Unix socket on its host, or a token "
                          "(CIGRI_TOKEN or ~/.config/cigri/token; cigri token create makes one)")


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
