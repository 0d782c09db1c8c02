"""``/api/v1/docs``: the API's interactive documentation, every byte of it from this server.

Swagger UI comes from the ``fastapi-offline`` package (its files, not its app), served under
``/api/v1/docs/assets``, never from a CDN: a script from elsewhere would run in the
dashboard's origin, with its users' sessions. The page is under the dashboard's
Content-Security-Policy (no script, style or frame from anywhere else, no inline script).
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, FastAPI
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from cigri import __version__
from cigri.server.pages.web import HEADERS, templates

router = APIRouter(include_in_schema=False)


@router.get("/api/v1/docs")
def docs() -> HTMLResponse:
    return HTMLResponse(templates.get_template("api-docs.html").render(version=__version__), headers=HEADERS)


def install(app: FastAPI) -> None:
    app.include_router(router)
    assets = Path(fastapi_offline.__file__).parent / "static"
    app.mount("/api/v1/docs/assets", StaticFiles(directory=assets), name="api-docs")
