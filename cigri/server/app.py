"""The ASGI application of ``cigri server``: the REST API under ``/api/v1``, CiGri 3.2's under
``/cigri-api`` (:mod:`cigri.server.routes.cigri3`), ``/healthz``, and the dashboard's pages
(:mod:`cigri.server.pages`) at the root.

A request goes through :mod:`cigri.server.request` (its grid from a pool, who the caller is,
its user's rate) and reaches a route of :mod:`cigri.server.routes`, which calls
the same use case (:mod:`cigri.api`) as the command in direct mode. Its body is bounded as it
streams in (:mod:`cigri.server.limits`). Every error is one JSON object ``{"error": "...",
"field": ...}`` with the status its :class:`CigriError` names; under ``/cigri-api``, CiGri's
``{"status": N, "title": ..., "message": ...}`` with CiGri's status (:func:`_cigri3_error`).
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from cigri import __version__, cigri3
from cigri.config import Config
from cigri.errors import CigriError, LimitExceeded
from cigri.server.auth import BrowserSessions, Front
from cigri.server.limits import BodyLimit, MemoryBudget, RateLimiter
from cigri.server import pages
from cigri.server.request import GridPool, ServerState, known_query
from cigri.server.routes import ROOT, ROUTERS, docs
from cigri.server.routes import cigri3 as cigri3_routes

log = logging.getLogger("cigri.server")
API = "/api/v1"
UPLOADS = ("/campaigns", "/tasks")  # POST paths ending so carry parameter lines
UPLOAD_TYPES = ("multipart/form-data", "text/plain", "application/octet-stream")


def create_app(config: Config) -> FastAPI:
    """The API of the grid ``config`` describes; the caller runs the cycles beside it."""
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
    app.include_router(cigri3_routes.router, prefix=cigri3_routes.PREFIX, dependencies=[Depends(known_query)])
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
    if _cigri3(request):
        retry_after = error.retry_after if isinstance(error, LimitExceeded) else None
        return _cigri3_error(error.http_status, " ".join(str(error).split("\n")), retry_after)
    return error_response(error)


CIGRI3_STATUS = {401: 403, 409: 400}  # CiGri answered "not authenticated" 403, and a refusal 400
CIGRI3_TITLES = {400: "Bad request", 403: "Forbidden", 404: "Not found", 500: "Internal server error",
                 503: "Service unavailable"}


def _cigri3(request: Request) -> bool:
    return request.url.path == cigri3_routes.PREFIX or request.url.path.startswith(cigri3_routes.PREFIX + "/")


def _cigri3_error(status: int, message: str, retry_after: float | None = None) -> JSONResponse:
    """An error as CiGri's API answered it to its clients."""
    status = CIGRI3_STATUS.get(status, status)
    headers = None if retry_after is None else {"Retry-After": str(max(1, round(retry_after)))}
    return JSONResponse(cigri3.answer(status, CIGRI3_TITLES.get(status, "Error"), message), status_code=status,
                        headers=headers)


async def _bad_request(request: Request, error: RequestValidationError) -> JSONResponse:
    """A parameter that is not what the route takes (``/campaigns/abc``, ``?limit=x``)."""
    first = error.errors()[0] if error.errors() else {}
    where = [str(part) for part in first.get("loc", ()) if part not in ("query", "path", "body")]
    field = ".".join(where) or None
    message = f"{field}: {first.get('msg', 'invalid')}" if field else first.get("msg", "invalid request")
    if _cigri3(request):
        return _cigri3_error(400, message)
    return JSONResponse({"error": message, "field": field}, status_code=400)


async def _http_error(request: Request, error: HTTPException) -> JSONResponse:
    if _cigri3(request) and error.status_code in (404, 405):  # Sinatra's not_found, for a method too
        return _cigri3_error(404, f"{request.method} {request.url} not found on this server")
    words = {404: f"{request.url.path}: no such route", 405: f"{request.method} {request.url.path}: method not allowed"}
    return JSONResponse({"error": words.get(error.status_code, str(error.detail)), "field": None},
                        status_code=error.status_code)


async def _database_error(request: Request, error: sqlite3.Error) -> JSONResponse:
    log.warning("%s %s: database: %s", request.method, request.url.path, error)
    return _failure(request, 503, f"database: {' '.join(str(error).split())}")


async def _internal_error(request: Request, error: Exception) -> JSONResponse:
    log.error("%s %s failed", request.method, request.url.path, exc_info=error)
    return _failure(request, 500, "internal error (the server's log has the traceback)")


def _failure(request: Request, status: int, message: str) -> JSONResponse:
    """The server's own failure, in the shape the route's clients read: CiGri's under ``/cigri-api``."""
    if _cigri3(request):
        return _cigri3_error(status, message)
    return JSONResponse({"error": message, "field": None}, status_code=status)
