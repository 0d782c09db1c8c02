"""What a request may take of the server: a rate, the memory its body is held in, and the disk
its parameter upload fills.

- :class:`RateLimiter`: requests per minute per user (and failed logins or token lookups per
  address, before anyone is known).
- :class:`BodyLimit`: a body is counted as it streams in, before any of it is held: past its
  cap (``limits.request_body_bytes``, or ``limits.submission_param_bytes`` for a parameter
  upload) the request fails there with 413. The bodies held in memory at once share
  ``limits.body_memory`` (a body counts its declared length, or ``limits.request_body_bytes``
  when it declares none or more: an upload streams to disk), at most a quarter of it for one
  peer: past it a request waits, then gets 503.
- :class:`UploadQuota`: a parameter upload counts against its user's room for parameters
  (``limits.param_bytes`` and ``limits.kept_param_bytes``, less what is stored) from its first
  byte, concurrent uploads together, so that a user can never fill the server's disk past them.

The per-user limits on what a user stores (pending tasks, parameter bytes, tasks kept) are the
use cases' own (:mod:`cigri.api.submission`), since direct mode obeys them too.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from cigri.errors import LimitExceeded, TooLarge, Unavailable
from cigri.server.guard import PEER_UID

Scope = dict[str, Any]
ASGIApp = Callable[..., Any]
UPLOAD_OWNER = "cigri.upload_owner"  # scope key: (quota, user, room) once an upload's user is known
MAX_BUCKETS = 100_000  # rate buckets kept; full ones are dropped first


class RateLimiter:
    """A token bucket per key: ``per_minute`` requests, refilled continuously, so a burst up
    to a minute's worth is served and a steady flood is held to the rate."""

    def __init__(self, per_minute: int, what: str = "requests a minute (limits.requests_per_minute)") -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.what = what
        self.buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, when)
        self.lock = threading.Lock()

    def take(self, key: str) -> None:
        """Count one request of ``key``; LimitExceeded (429) with the seconds to wait if over."""
        self._take(key, 1.0)

    def check(self, key: str) -> None:
        """LimitExceeded if ``key`` has nothing left, without counting anything."""
        self._take(key, 0.0)

    def _take(self, key: str, cost: float) -> None:
        now = time.monotonic()
        with self.lock:
            tokens, when = self.buckets.get(key, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - when) * self.rate)
            if tokens < 1:
                self.buckets[key] = (tokens, now)
                wait = (1 - tokens) / self.rate
                raise LimitExceeded(f"{key}: more than {self.capacity:.0f} {self.what}; retry in {wait:.1f}s",
                                    retry_after=wait)
            self.buckets[key] = (tokens - cost, now)
            if len(self.buckets) > MAX_BUCKETS:
                self._forget_full(now)

    def _forget_full(self, now: float) -> None:
        """Drop the buckets that have refilled: they hold nothing a fresh one would not."""
        for key, (tokens, when) in list(self.buckets.items()):
            if tokens + (now - when) * self.rate >= self.capacity:
                del self.buckets[key]


class MemoryBudget:
    """Bytes of request bodies held in memory at once, all requests together (``total``) and
    from one peer (a quarter of it); a request waits up to ``wait`` seconds for its share."""

    def __init__(self, total: int, wait: float) -> None:
        self.total, self.per_peer, self.wait = total, max(1, total // 4), wait
        self.held = 0
        self.by_peer: Counter[object] = Counter()
        self.changed: asyncio.Condition | None = None

    async def acquire(self, peer: object, size: int) -> None:
        if self.changed is None:  # made in the running loop
            self.changed = asyncio.Condition()
        size = min(size, self.per_peer)

        def fits() -> bool:
            return self.held + size <= self.total and self.by_peer[peer] + size <= self.per_peer

        async with self.changed:
            try:
                await asyncio.wait_for(self.changed.wait_for(fits), self.wait)
            except asyncio.TimeoutError:
                raise Unavailable("the server holds as many request bodies as it may (limits.body_memory); "
                                  "retry in a moment") from None
            self.held += size
            self.by_peer[peer] += size

    async def release(self, peer: object, size: int) -> None:
        assert self.changed is not None
        size = min(size, self.per_peer)
        async with self.changed:
            self.held -= size
            self.by_peer[peer] -= size
            if self.by_peer[peer] <= 0:
                del self.by_peer[peer]
            self.changed.notify_all()


class UploadQuota:
    """The parameter bytes each user's uploads have brought in so far, all their uploads in
    flight together; ``charge`` fails an upload that would take the user past their room."""

    def __init__(self) -> None:
        self.in_flight: Counter[str] = Counter()

    def charge(self, user: str, size: int, room: int) -> None:
        if self.in_flight[user] + size > room:
            raise LimitExceeded(f"{user}: this upload would take your parameters past your room for them "
                                f"({room:,} bytes, with your uploads in progress: limits.param_bytes and "
                                "limits.kept_param_bytes); purge ended campaigns (griddel --purge) or wait for "
                                "your other uploads")
        self.in_flight[user] += size

    def settle(self, user: str, size: int) -> None:
        self.in_flight[user] -= size
        if self.in_flight[user] <= 0:
            del self.in_flight[user]


class BodyLimit:
    """ASGI middleware bounding request bodies: ``limit_of(scope)`` bytes for each request (a
    parameter upload gets more), the memory they are held in (:class:`MemoryBudget`), and an
    upload's bytes against its user's :class:`UploadQuota` once a route names the user
    (``scope[UPLOAD_OWNER]``). A declared length over the limit is refused before any byte is
    read; a body that grows past it while streaming fails the request there (HTTP 413)."""

    def __init__(self, app: ASGIApp, limit_of: Callable[[Scope], int], memory: MemoryBudget,
                 held_at_most: int) -> None:
        self.app, self.limit_of, self.memory, self.held_at_most = app, limit_of, memory, held_at_most

    async def __call__(self, scope: Scope, receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self.limit_of(scope)
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            return await _refuse(send, _too_large(limit))
        if declared == b"0" or (declared is None and b"transfer-encoding" not in headers):
            return await self.app(scope, receive, send)  # no body
        client = scope.get("client")
        peer = client[0] if client else scope.get("state", {}).get(PEER_UID)
        held = min(self.held_at_most, int(declared) if declared is not None else limit)
        try:
            await self.memory.acquire(peer, held)
        except Unavailable as error:
            return await _refuse(send, error)
        seen = charged = 0

        async def counted() -> dict[str, Any]:
            nonlocal seen, charged
            message = await receive()
            if message["type"] == "http.request":
                size = len(message.get("body", b""))
                seen += size
                if seen > limit:
                    raise _too_large(limit)
                owner = scope.get(UPLOAD_OWNER)
                if owner is not None and size:
                    quota, user, room = owner
                    quota.charge(user, size, room)
                    charged += size
            return message

        try:
            await self.app(scope, counted, send)
        finally:
            if charged:
                quota, user, _ = scope[UPLOAD_OWNER]
                quota.settle(user, charged)
            await self.memory.release(peer, held)


def _too_large(limit: int) -> TooLarge:
    return TooLarge(f"request body: more than {limit:,} bytes (limits.request_body_bytes, or "
                    "limits.submission_param_bytes for parameters)")


async def _refuse(send: Callable[..., Any], error: TooLarge | Unavailable) -> None:
    body = json.dumps({"error": str(error), "field": None}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"connection", b"close")]
    if isinstance(error, Unavailable):
        headers.append((b"retry-after", b"5"))
    await send({"type": "http.response.start", "status": error.http_status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
