"""``/api/v1/docs``: the API's interactive documentation, every byte of it from this server.

Swagger UI comes from the ``swagger-ui-bundle`` package, served under ``/api/v1/docs/assets``,
never from a CDN: a script from elsewhere would run in the dashboard's origin, with its users'
sessions. The page is under the dashboard's Content-Security-Policy (no script, style or
frame from anywhere else, no inline script).
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

from cigri.server.pages.web import HEADERS, templates

router = APIRouter(include_in_schema=False)


@router.get("/api/v1/docs")
def docs() -> HTMLResponse:
    from cigri import __version__

    return HTMLResponse(templates.get_template("api-docs.html").render(version=__version__), headers=HEADERS)


def install(app: FastAPI) -> None:
    app.include_router(router)
    app.mount("/api/v1/docs/assets", StaticFiles(directory=swagger_ui_path), name="api-docs")
