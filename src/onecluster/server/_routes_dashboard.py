"""The NOC dashboard: ``/`` is its page, ``/ui/…`` its scripts and styles.

Every asset ships in the package (``server/dashboard/``), written by hand with no build step
and no CDN, so the page works on an air-gapped host; a Content-Security-Policy of
``'self'`` makes the browser refuse anything else.  The page asks for a token, keeps it in
the tab's ``sessionStorage``, and reads the same REST API as the CLI (``docs/noc.md``).
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, FastAPI
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["install_dashboard"]

#: Nothing but this server: scripts, styles, images, fetches and frames.
_POLICY = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
_HEADERS = {
    "Content-Security-Policy": _POLICY,
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
}

_router = APIRouter(include_in_schema=False)


@_router.get("/")
async def page() -> HTMLResponse:
    """The dashboard's one page (it routes by ``#fragment``)."""
    html = resources.files("onecluster.server").joinpath("dashboard", "index.html")
    return HTMLResponse(html.read_text("utf-8"), headers=_HEADERS)


def install_dashboard(app: FastAPI) -> None:
    """Serve the dashboard on ``app``: ``/`` and the assets under ``/ui/``."""
    app.include_router(_router)
    app.mount(
        "/ui",
        StaticFiles(packages=[("onecluster.server", "dashboard")]),
        name="dashboard",
    )
