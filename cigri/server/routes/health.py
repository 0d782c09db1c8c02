"""``/healthz`` for monitoring (no authentication), and ``/whoami``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from cigri import __version__
from starlette.concurrency import run_in_threadpool

from cigri.db import clusters as stored_clusters
from cigri.server.request import Session, peer_of, session

router = APIRouter(tags=["health"])  # at the root, outside /api/v1
identity = APIRouter(tags=["health"])


@router.get("/healthz", summary="Whether the server and its cycles are alive")
async def healthz(request: Request) -> JSONResponse:
    """200 while the database answers and cycles run (the last one ended less than three cycle
    periods ago, or one is under way), else 503: what a monitoring probe asks. No
    authentication, and nothing about any user's work; counted against the rate of the
    address (or uid) asking, as it takes a database connection."""
    state = request.app.state.cigri
    state.rate.take(f"healthz from {peer_of(request.scope)}")
    try:
        async with state.pool.grid() as grid:
            await run_in_threadpool(lambda: stored_clusters.count(grid.db.conn))
        database = "ok"
    except Exception as error:  # whatever keeps the database from answering is the answer
        database = f"{type(error).__name__}: {' '.join(str(error).split())}"
    cycles = state.cycles.status() if state.cycles is not None else {"running": False, "ok": True}
    ok = database == "ok" and cycles["ok"]
    return JSONResponse({"ok": ok, "version": __version__, "database": database, "cycles": cycles},
                        status_code=200 if ok else 503)


@identity.get("/whoami", summary="Who the server says the caller is")
def whoami(session: Session = Depends(session)) -> dict[str, Any]:
    return {"user": session.user, "admin": session.caller.admin, "method": session.caller.method,
            "version": __version__}
