"""The ASGI application of ``cigri server``: the REST API under ``/api/v1``, ``/healthz``, and
the dashboard's pages (:mod:`cigri.server.pages`) at the root.

A request is identified once (:mod:`cigri.server.auth`), is counted against its user's rate,
gets a database connection from a pool (never waiting in a worker thread, so a full pool
cannot deadlock the threads), and reaches a route of :mod:`cigri.server.routes`, which calls
the same use case (:mod:`cigri.api`) as the command in direct mode. Its body is bounded as it
streams in (:mod:`cigri.server.limits`). Every error is one JSON object ``{"error": "...",
"field": ...}`` with the status its :class:`CigriError` names.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from cigri import __version__, api
from cigri import db as database
from cigri.config import Config
from cigri.errors import CigriError, InputError, LimitExceeded, Unauthenticated
from cigri.grid import Grid
from cigri.server.auth import BrowserSessions, Caller, Front, check_csrf_proof, identify, token_caller
from cigri.server.guard import PEER_UID
from cigri.server.limits import UPLOAD_OWNER, BodyLimit, MemoryBudget, RateLimiter, UploadQuota

log = logging.getLogger("cigri.server")
API = "/api/v1"
UPLOADS = ("/campaigns", "/tasks")  # POST paths ending so carry parameter lines
UPLOAD_TYPES = ("multipart/form-data", "text/plain", "application/octet-stream")
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
                grid = await run_in_threadpool(lambda: Grid(self.config, database.connect(self.config.database_path)))
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


def create_app(config: Config) -> FastAPI:
    """The API of the grid ``config`` describes; the caller runs the cycles beside it."""
    from cigri.server import pages
    from cigri.server.routes import docs
    from cigri.server.routes import ROOT, ROUTERS

    app = FastAPI(title="cigri", version=__version__, openapi_url=f"{API}/openapi.json", docs_url=None,
                  redoc_url=None, description="The REST API of a cigri grid: campaigns, jobs, events, clusters, "
                  "notifications, fair share and tokens, as the grid* commands use them.")
    app.state.cigri = ServerState(config, GridPool(config, config.server.threads), Front.of(config),
                                  RateLimiter(config.limits.requests_per_minute),
                                  BrowserSessions(per_user=config.server.sessions_per_user))
    for router in ROOT:
        app.include_router(router)
    for router in ROUTERS:
        app.include_router(router, prefix=API, dependencies=[Depends(known_query)])
    pages.install(app)
    docs.install(app)
    app.add_exception_handler(CigriError, _cigri_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _bad_request)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(sqlite3.Error, _database_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _internal_error)
    limits = config.limits
    upload_limit = limits.submission_param_bytes + limits.request_body_bytes

    def body_limit(scope: dict[str, Any]) -> int:
        return upload_limit if _upload(scope) else limits.request_body_bytes

    app.add_middleware(BodyLimit, limit_of=body_limit, memory=MemoryBudget(limits.body_memory, config.server.body_timeout),
                       held_at_most=limits.request_body_bytes)
    app.openapi = lambda: _contract(app)  # type: ignore[method-assign]
    return app


def _upload(scope: dict[str, Any]) -> bool:
    """A parameter upload: streamed to disk, so it may be as large as a submission's lines.
    A JSON body is held in memory, wherever it goes: it gets the small limit."""
    if scope["method"] != "POST" or not scope["path"].startswith(API) or not scope["path"].endswith(UPLOADS):
        return False
    content_type = dict(scope["headers"]).get(b"content-type", b"").split(b";")[0].strip().decode("latin-1")
    return content_type.lower() in UPLOAD_TYPES


ERROR_SCHEMA = {"type": "object", "required": ["error", "field"],
                "properties": {"error": {"type": "string", "description": "One line saying what went wrong."},
                               "field": {"anyOf": [{"type": "string"}, {"type": "null"}],
                                         "description": "The input it is about, when there is one."},
                               "problems": {"type": "array", "items": {"type": "string"},
                                            "description": "Each problem in a line, when there are several "
                                                           "(every mistake of a JDL)."}}}
ERROR_STATUSES = {"400": "Bad input (the field is named)", "401": "Not authenticated",
                  "403": "Not allowed (an admin's operation)", "404": "No such object, or not the caller's",
                  "409": "Not in a state that allows it", "413": "Too large", "429": "Over a per-user limit",
                  "503": "The server cannot serve it now"}


def _contract(app: FastAPI) -> dict[str, Any]:
    """FastAPI's OpenAPI document with cigri's errors as they are: one ``Error`` object for
    every failure status (FastAPI would document its own 422, which cigri answers as 400)."""
    if app.openapi_schema is None:
        from fastapi.openapi.utils import get_openapi

        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for name in ("HTTPValidationError", "ValidationError"):
            components.pop(name, None)
        components["Error"] = ERROR_SCHEMA
        error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
        for operations in schema["paths"].values():
            for operation in operations.values():
                operation["responses"].pop("422", None)
                operation["responses"].update({status: {"description": words, **error}
                                               for status, words in ERROR_STATUSES.items()})
        app.openapi_schema = schema
    return app.openapi_schema


def error_response(error: CigriError) -> JSONResponse:
    headers = {}
    if isinstance(error, LimitExceeded) and error.retry_after is not None:
        headers["Retry-After"] = str(max(1, round(error.retry_after)))
    if error.http_status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if error.http_status in (413, 429):  # an upload cut short: the rest of its body is not read
        headers["Connection"] = "close"
    lines = str(error).split("\n")
    body: dict[str, Any] = {"error": " ".join(lines) or type(error).__name__, "field": error.field}
    if len(lines) > 1:  # several problems at once (every mistake of a JDL): each its own line, as in direct mode
        body["problems"] = lines
    return JSONResponse(body, status_code=error.http_status, headers=headers)


async def _cigri_error(request: Request, error: CigriError) -> JSONResponse:
    if error.http_status >= 500:
        log.warning("%s %s: %s", request.method, request.url.path, error)
    return error_response(error)


async def _bad_request(request: Request, error: RequestValidationError) -> JSONResponse:
    """A parameter that is not what the route takes (``/campaigns/abc``, ``?limit=x``)."""
    first = error.errors()[0] if error.errors() else {}
    where = [str(part) for part in first.get("loc", ()) if part not in ("query", "path", "body")]
    field = ".".join(where) or None
    message = f"{field}: {first.get('msg', 'invalid')}" if field else first.get("msg", "invalid request")
    return JSONResponse({"error": message, "field": field}, status_code=400)


async def _http_error(request: Request, error: HTTPException) -> JSONResponse:
    words = {404: f"{request.url.path}: no such route", 405: f"{request.method} {request.url.path}: method not allowed"}
    return JSONResponse({"error": words.get(error.status_code, str(error.detail)), "field": None},
                        status_code=error.status_code)


async def _database_error(request: Request, error: sqlite3.Error) -> JSONResponse:
    log.warning("%s %s: database: %s", request.method, request.url.path, error)
    return JSONResponse({"error": f"database: {' '.join(str(error).split())}", "field": None}, status_code=503)


async def _internal_error(request: Request, error: Exception) -> JSONResponse:
    log.error("%s %s failed", request.method, request.url.path, exc_info=error)
    return JSONResponse({"error": "internal error (the server's log has the traceback)", "field": None},
                        status_code=500)
