"""The server's connections, bounded: how many, from whom, for how long, and how big a head.

Every listener (the Unix socket, the TCP port) admits at most ``server.max_connections`` at
once, and at most ``server.max_connections_per_peer`` from one peer (one uid on the socket, one
address over TCP; a trusted front is exempt from the second). A connection must send its
request's line and headers within ``server.header_timeout`` seconds, in at most
``server.max_header_bytes``; a body may not stall longer than ``server.body_timeout``; an idle
connection between requests is closed after ``server.idle_timeout``; a client may queue at most
:data:`MAX_PIPELINE` requests behind the one being answered. A connection over the caps is
closed at once, before a byte of it is read. The listeners' caps together stay within the
descriptors the process may open (:func:`fit_descriptors`), so a flood of one listener can
never take the descriptors another needs: a local user's command on the socket is served while
the TCP port is flooded.

On the socket, the kernel also says who is at the other end (``SO_PEERCRED``, as slurmrestd's
``rest_auth/local``): the uid goes into every request's scope state, where no request can
write. Over TCP with TLS, the handshake is part of the header timeout and happens inside the
caps (uvicorn's own TLS would hold a descriptor for a minute's handshake, uncounted).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
import ssl
import struct
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from cigri.config import Config

log = logging.getLogger("cigri.server.guard")
PEER_UID = "cigri.peer_uid"  # the key of the peer's uid in a request's scope state
MAX_PIPELINE = 16  # requests a client may queue behind the one being answered
RESERVED_DESCRIPTORS = 256  # the database's, the cycles', the log's, a cluster's SSH: never the clients'


@dataclass
class Admission:
    """The connections of one listener: at most ``total`` at once, and ``per_peer`` from one
    peer, except the ``exempt`` ones (a trusted front carries every user's requests)."""

    total: int
    per_peer: int
    exempt: frozenset[object] = frozenset()
    open: Counter[object] = field(default_factory=Counter)
    held: int = 0
    refused: int = 0

    def admit(self, peer: object) -> str | None:
        """None when ``peer`` may open one more connection (counted); else which cap it hit."""
        if self.held >= self.total:
            full = f"{self.total} connections open (server.max_connections)"
        elif peer not in self.exempt and self.open[peer] >= self.per_peer:
            full = f"{self.per_peer} of its connections open (server.max_connections_per_peer)"
        else:
            self.open[peer] += 1
            self.held += 1
            return None
        self.refused += 1
        return full

    def release(self, peer: object) -> None:
        self.held -= 1
        self.open[peer] -= 1
        if self.open[peer] <= 0:
            del self.open[peer]


@dataclass(frozen=True)
class Limits:
    """A listener's time and size bounds (``[server]``), and its TLS context if it has one."""

    header_timeout: float
    body_timeout: float
    max_header_bytes: int
    tls: ssl.SSLContext | None = None


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol (httptools, its C parser) inside the listener's bounds.
    :func:`protocol` makes one per listener, with its :class:`Admission` and :class:`Limits`."""

    admission: Admission
    limits: Limits

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.peer: object = None  # admitted: the uid or address counted, released once
        self.started = False  # uvicorn's own connection_made ran (after the TLS handshake)
        self.deadline: asyncio.TimerHandle | None = None
        self.head_bytes = 0
        self.head_too_large = False
        self.early = b""  # what TLS decrypted before the handshake's end reached us
        self.overflowed = False  # past MAX_PIPELINE: the rest of what comes is not read

    # --- admission, TLS and release --------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        uid = _peer_uid(sock) if sock is not None and sock.family == socket.AF_UNIX else None
        peer: object = uid if uid is not None else (transport.get_extra_info("peername") or ("?",))[0]
        full = self.admission.admit(peer)
        if full is not None:
            log.warning("connection from %s refused: %s", _peer_name(peer), full)
            transport.abort()
            return
        self.peer = peer
        if uid is not None:
            self.app_state = {**self.app_state, PEER_UID: uid}
        self._arm(self.limits.header_timeout)
        if self.limits.tls is None:
            self._start(transport)
        else:
            self.loop.create_task(self._handshake(transport))

    async def _handshake(self, raw: asyncio.Transport) -> None:
        """TLS within the header timeout; a failed or abandoned handshake frees its place."""
        try:
            tls = await self.loop.start_tls(raw, self, self.limits.tls,  # type: ignore[arg-type]
                                            server_side=True, ssl_handshake_timeout=self.limits.header_timeout)
        except (OSError, ssl.SSLError, asyncio.TimeoutError, ConnectionError):
            tls = None
        if tls is None or tls.is_closing():
            raw.abort()
            self._release()
            return
        self._start(tls)

    def _start(self, transport: asyncio.BaseTransport) -> None:
        self.started = True
        super().connection_made(transport)  # type: ignore[arg-type]
        if self.early:
            early, self.early = self.early, b""
            self.data_received(early)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._release()
        if self.started:
            super().connection_lost(exc)

    def _release(self) -> None:
        if self.peer is not None:
            self.admission.release(self.peer)
            self.peer = None

    # --- time: the head within header_timeout, no body stall past body_timeout ------------------

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self.deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def _expired(self) -> None:
        """The client took too long. A body we stopped reading ourselves (the application is
        busy with what came) is not the client's stall."""
        self.deadline = None
        if self.started and self.flow is not None and self.flow.read_paused:
            self._arm(self.limits.body_timeout)
            return
        transport = self.transport if self.started else None
        if transport is not None and not transport.is_closing():
            transport.close()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.head_bytes, self.head_too_large = 0, False
        self._arm(self.limits.header_timeout)

    # --- size: the head within max_header_bytes, a bounded pipeline ---------------------------

    def on_url(self, url: bytes) -> None:
        if self._within_head(len(url)):
            super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._within_head(len(name) + len(value) + 4):
            super().on_header(name, value)

    def _within_head(self, size: int) -> bool:
        self.head_bytes += size
        if self.head_bytes > self.limits.max_header_bytes:
            self.head_too_large = True
        return not self.head_too_large

    def on_headers_complete(self) -> None:
        if self.head_too_large:
            self._refuse(b"431 Request Header Fields Too Large",
                         f"request line and headers: more than {self.limits.max_header_bytes:,} bytes "
                         "(server.max_header_bytes)")
            return
        if self.overflowed or len(self.pipeline) >= MAX_PIPELINE:
            self._overflow()
            return
        self._arm(self.limits.body_timeout)
        super().on_headers_complete()

    def _overflow(self) -> None:
        """Too many requests queued: the ones queued are answered, in order, then the
        connection is closed; nothing after them is read into a request."""
        if not self.overflowed:
            self.overflowed = True
            last = self.pipeline[0][0] if self.pipeline else self.cycle
            if last is not None:
                last.keep_alive = False
            self.flow.pause_reading()
            self._disarm()

    def on_body(self, body: bytes) -> None:
        if self.overflowed or self.cycle is None or self.transport.is_closing():
            return
        self._arm(self.limits.body_timeout)
        super().on_body(body)

    def on_message_complete(self) -> None:
        if self.overflowed or self.cycle is None or self.transport.is_closing():
            return
        self._disarm()
        super().on_message_complete()

    def eof_received(self) -> bool | None:  # type: ignore[override]
        """The client will send nothing more (a half-close): a request it already sent is
        still answered, then the connection closed; with none under way it is closed now."""
        if self.started and self.cycle is not None and not self.cycle.response_complete:
            (self.pipeline[0][0] if self.pipeline else self.cycle).keep_alive = False
            return True
        return None

    def data_received(self, data: bytes) -> None:
        if not self.started:  # TLS hands over the first bytes before start_tls returns
            self.early += data
            if len(self.early) > self.limits.max_header_bytes:
                self.early = b""
                self._release()
            return
        if not self.overflowed and not self.transport.is_closing():
            super().data_received(data)

    def _refuse(self, status: bytes, why: str) -> None:
        """Answer ``status`` with the error document, then close: nothing of the request runs."""
        body = ('{"error": "%s", "field": null}' % why).encode()
        self.transport.write(b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\ncontent-length: "
                             + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body)
        self.transport.close()
        self._disarm()


def _peer_uid(sock: socket.socket) -> int:
    credentials = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", credentials)[1])


def _peer_name(peer: object) -> str:
    return f"uid {peer}" if isinstance(peer, int) else str(peer)


def protocol(admission: Admission, limits: Limits) -> type[GuardedProtocol]:
    """The protocol class of one listener: its own admission counts and bounds."""
    return type("GuardedProtocol", (GuardedProtocol,), {"admission": admission, "limits": limits})


def tls_context(config: Config) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(config.server.tls_cert, config.server.tls_key)
    return context


def fit_descriptors(config: Config, listeners: int) -> int:
    """The connections each listener may hold: ``server.max_connections``, or less when the
    process may not open that many descriptors (``ulimit -n``, systemd's ``LimitNOFILE``). The
    soft limit is raised to the hard one first."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    room = max(16, (soft - RESERVED_DESCRIPTORS) // listeners)
    if room < config.server.max_connections:
        log.warning("server.max_connections: %s a listener, not %s: this process may open %s descriptors "
                    "(raise LimitNOFILE)", room, config.server.max_connections, soft)
        return room
    return config.server.max_connections
