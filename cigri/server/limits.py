"""What one user may ask of the server: requests per minute, and the size of a request body.

The per-user limits on what a user may store (pending tasks, parameter bytes) are the use
cases' own (:mod:`cigri.api.submission`), since direct mode obeys them too.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from cigri.errors import LimitExceeded, TooLarge

Scope = dict[str, Any]
ASGIApp = Callable[..., Any]


class RateLimiter:
    """A token bucket per user: ``per_minute`` requests, refilled continuously, so a burst up
    to a minute's worth is served and a steady flood is held to the rate."""

    def __init__(self, per_minute: int) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.buckets: dict[str, tuple[float, float]] = {}  # user -> (tokens, when)
        self.lock = threading.Lock()

    def take(self, user: str) -> None:
        """Count one request of ``user``; LimitExceeded (429) with the seconds to wait if over."""
        now = time.monotonic()
        with self.lock:
            tokens, when = self.buckets.get(user, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - when) * self.rate)
            if tokens < 1:
                self.buckets[user] = (tokens, now)
                wait = (1 - tokens) / self.rate
                raise LimitExceeded(f"{user}: more than {self.capacity:.0f} requests a minute (limits.requests_per_minute); "
                                    f"retry in {wait:.1f}s", retry_after=wait)
            self.buckets[user] = (tokens - 1, now)


class BodyLimit:
    """ASGI middleware bounding request bodies: ``limit_of(scope)`` bytes for each request (a
    parameter upload gets more). A declared length over it is refused before any byte is read;
    a body that grows past it while streaming fails the request there (HTTP 413)."""

    def __init__(self, app: ASGIApp, limit_of: Callable[[Scope], int]) -> None:
        self.app, self.limit_of = app, limit_of

    async def __call__(self, scope: Scope, receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self.limit_of(scope)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            return await _refuse(send, _too_large(limit))
        seen = 0

        async def counted() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _too_large(limit)
            return message

        await self.app(scope, counted, send)


def _too_large(limit: int) -> TooLarge:
    return TooLarge(f"request body: more than {limit:,} bytes (limits.request_body_bytes, or "
                    "limits.submission_param_bytes for parameters)")


async def _refuse(send: Callable[..., Any], error: TooLarge) -> None:
    body = json.dumps({"error": str(error), "field": None}).encode()
    await send({"type": "http.response.start", "status": error.http_status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
