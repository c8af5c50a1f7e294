"""The NOC dashboard: ``/`` is its page, ``/ui/…`` its scripts, styles and icon.

Every asset ships in the package (``server/dashboard/``), written by hand with no build step
and no CDN, so the page works on an air-gapped host; a Content-Security-Policy of
``'self'`` makes the browser refuse anything else.  The page asks for a token, keeps it in
the tab's ``sessionStorage``, and reads the same REST API as the CLI (``docs/noc.md``).

Only the page is HTML, and only at ``/``: ``/ui/`` serves the package's scripts, styles and
images by name (nothing else, no folder listing, no path), every answer with the same
security headers, and ``no-cache`` so that a browser never mixes modules of two versions
after an upgrade (it revalidates them with their ``ETag``).
"""

from __future__ import annotations

import functools
import hashlib
import re
from importlib import resources
from typing import Annotated

from fastapi import APIRouter, FastAPI, Header, Path
from fastapi.responses import Response

from onecluster.errors import NotFoundError

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
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
_ASSET = re.compile(r"^[a-z0-9][a-z0-9-]*\.(js|css|svg)$")

_router = APIRouter(include_in_schema=False)


@functools.cache
def _read(name: str) -> tuple[bytes, str]:
    """An asset's bytes and ETag, read once: the package's files do not change under a
    running server (an upgrade restarts it)."""
    body = resources.files("onecluster.server").joinpath("dashboard", name).read_bytes()
    return body, '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def _answer(name: str, media_type: str, if_none_match: str | None) -> Response:
    body, tag = _read(name)
    headers = {**_HEADERS, "ETag": tag}
    if if_none_match is not None and tag in {t.strip() for t in if_none_match.split(",")}:
        return Response(status_code=304, headers=headers)
    return Response(body, media_type=media_type, headers=headers)


@_router.api_route("/", methods=["GET", "HEAD"])
async def page(if_none_match: Annotated[str | None, Header()] = None) -> Response:
    """The dashboard's one page (it routes by ``#fragment``)."""
    return _answer("index.html", "text/html; charset=utf-8", if_none_match)


@_router.api_route("/ui/{name}", methods=["GET", "HEAD"])
async def asset(
    name: Annotated[str, Path(max_length=64)],
    if_none_match: Annotated[str | None, Header()] = None,
) -> Response:
    """One of the page's scripts, styles or images, by its file name."""
    match = _ASSET.match(name)
    if match is None:
        raise NotFoundError(f"the dashboard has no asset {name!r}")
    try:
        return _answer(name, _TYPES["." + match.group(1)], if_none_match)
    except (FileNotFoundError, IsADirectoryError) as exc:
        raise NotFoundError(f"the dashboard has no asset {name!r}") from exc


def install_dashboard(app: FastAPI) -> None:
    """Serve the dashboard on ``app``: ``/`` and the assets under ``/ui/``."""
    app.include_router(_router)
