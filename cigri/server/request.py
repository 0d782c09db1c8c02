"""What a request goes through before its route: the grid it borrows from a pool (never
waiting in a worker thread, so a full pool cannot deadlock the threads), who the server says
the caller is (:mod:`cigri.server.auth`), its user's rate, the query parameters its route takes,
and the room its upload is counted against: the FastAPI dependencies of
:mod:`cigri.server.routes` and :mod:`cigri.server.pages`, which :mod:`cigri.server.app`
assembles."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import Depends, Query, Request
from fastapi.dependencies.models import Dependant
from starlette.concurrency import run_in_threadpool

from cigri import api
from cigri import db as database
from cigri.config import Config
from cigri.errors import InputError, Unauthenticated
from cigri.grid import Grid
from cigri.server.auth import (BrowserSessions, Caller, Front, check_csrf_proof, check_json_client, identify,
                              token_caller)
from cigri.server.guard import PEER_UID
from cigri.server.limits import UPLOAD_OWNER, RateLimiter, UploadQuota

AUTH_FAILURES_PER_MINUTE = 60  # failed token lookups (or logins) from one address
MAX_PAGE = 10_000  # items one listing answers at most; a client asks the next page


class GridPool:
    """``size`` grids (one database connection each), lent to one request at a time."""

    def __init__(self, config: Config, size: int) -> None:
        self.config, self.size = config, size
        self.free: list[Grid] = []
        self.opened = 0
        self.available: asyncio.Semaphore | None = None

    @asynccontextmanager
    async def grid(self) -> AsyncIterator[Grid]:
        if self.available is None:  # made in the running loop
            self.available = asyncio.Semaphore(self.size)
        async with self.available:
            grid = self.free.pop() if self.free else None
            if grid is None:
                grid = await run_in_threadpool(lambda: Grid(self.config, database.open_store(self.config.store_location)))
                self.opened += 1
            try:
                yield grid
            finally:
                self.free.append(grid)

    def close(self) -> None:
        for grid in self.free:
            grid.close()
        self.free.clear()


@dataclass
class ServerState:
    config: Config
    pool: GridPool
    front: Front
    rate: RateLimiter
    sessions: BrowserSessions  # the dashboard's
    failures: RateLimiter = field(default_factory=lambda: RateLimiter(
        AUTH_FAILURES_PER_MINUTE, "failed authentications a minute from one address"))
    uploads: UploadQuota = field(default_factory=UploadQuota)
    cycles: Any = None  # the cycle loop (cigri.server.run.Cycles) when the server runs one


@dataclass(frozen=True)
class Session:
    """One request's grid and authenticated caller: what every route works with."""

    grid: Grid
    caller: Caller

    @property
    def user(self) -> str:
        return self.caller.user


def page_limit() -> Any:
    return Query(MAX_PAGE, ge=1, le=MAX_PAGE, description=f"Items in this page (at most {MAX_PAGE:,}).")


def page_offset() -> Any:
    return Query(0, ge=0, description="Items skipped before this page.")


def pool(request: Request) -> GridPool:
    return request.app.state.cigri.pool  # type: ignore[no-any-return]


def peer_of(scope: Mapping[str, Any]) -> str:
    """Who is at the other end before anyone is identified: an address, or a uid on the socket."""
    client = scope.get("client")
    return client[0] if client else f"uid {scope.get('state', {}).get(PEER_UID)}"


async def identified(request: Request) -> Caller:
    """The caller of any request, counted against its user's rate. A token is the one case
    that reads the database; an address that failed too many lookups is refused before it."""
    state: ServerState = request.app.state.cigri
    caller = identify(state.config, state.front, request.scope)
    if isinstance(caller, str):
        peer = peer_of(request.scope)
        state.failures.check(peer)
        try:
            async with state.pool.grid() as grid:
                caller = await run_in_threadpool(token_caller, grid, caller)
        except Unauthenticated:
            state.failures.take(peer)
            raise
    state.rate.take(caller.user)
    return caller


async def authenticated(request: Request) -> Caller:
    """The FastAPI dependency of every API route: :func:`identified`, and for a request that
    changes something without a token, its proof that no other site's page made it."""
    caller = await identified(request)
    check_csrf_proof(request.scope, caller)
    return caller


async def upload_by(request: Request, caller: Caller) -> None:
    """Count the body of an upload route against ``caller``'s room for parameters from here
    on (the body is read after authentication: the route reads it itself), with a body's
    worth for what is not parameters (its JDLs, the form's framing)."""
    state: ServerState = request.app.state.cigri
    async with state.pool.grid() as grid:
        room = await run_in_threadpool(api.parameter_room, grid, caller.user)
    request.scope[UPLOAD_OWNER] = (state.uploads, caller.user, room + state.config.limits.request_body_bytes)


def known_query(request: Request) -> None:
    """Refuse a query parameter the route does not take, naming it: an API route ignoring one
    would do something else than asked (CiGri's clients send ``DELETE /campaigns/N?hold=1`` to
    pause, which must not cancel the campaign)."""
    unknown = sorted(set(request.query_params) - set(_declared_query(request.scope["route"].dependant)))
    if unknown:
        raise InputError(f"{request.method} {request.url.path} takes no query parameter '{unknown[0]}'",
                         field=unknown[0])


def _declared_query(dependant: Dependant) -> Iterator[str]:
    """The query parameters a route and its dependencies declare, by the name a client sends."""
    yield from (param.alias for param in dependant.query_params)
    for dependency in dependant.dependencies:
        yield from _declared_query(dependency)


async def session(request: Request, caller: Caller = Depends(authenticated)) -> AsyncIterator[Session]:
    """The FastAPI dependency of most routes: the caller, and a grid for the request's length.
    Routes that first read a long upload take their grid after it instead (:func:`pool`)."""
    async with pool(request).grid() as grid:
        yield Session(grid, caller)


async def json_client(request: Request) -> Caller:
    """The caller of a ``/cigri-api`` route (CiGri's clients): :func:`identified`, and for a
    request that changes something without a token, the proof CiGri's clients can give."""
    caller = await identified(request)
    check_json_client(request.scope, caller)
    return caller


async def json_session(request: Request, caller: Caller = Depends(json_client)) -> AsyncIterator[Session]:
    """:func:`session` for CiGri's clients."""
    async with pool(request).grid() as grid:
        yield Session(grid, caller)
