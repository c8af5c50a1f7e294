"""Request bodies are bounded before any route reads them.

A body over its route's limit is answered 413 (by its ``Content-Length`` before a byte is
read, or as soon as a streamed body passes the limit); a body that is not JSON is answered
415 on the methods that carry one.  Both answers use the API's error schema.  The limits sit
far above the largest valid body (the schema's own bounds are the exact rules), so they only
stop a client that sends megabytes no route could take.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from onecluster.errors import PlatformError, TooLargeError, UnsupportedMediaError
from onecluster.server._errors import error_response

__all__ = ["BODY_LIMIT", "ROUTE_LIMITS", "SYNC_BODY_LIMIT", "BodyLimits"]

#: The largest body of any route without a limit of its own: 1 MiB (a job at every bound of
#: ``JobSubmit`` is under 200 KiB, even with every character escaped).
BODY_LIMIT = 1 << 20
#: The largest agent sync: 64 MiB.  It carries one report per attempt of the site (about
#: 250 bytes each), at most 1 MiB of log text (``agent/_logship.py``), which JSON may escape
#: to 6 MiB, and the circuits' probe samples.
SYNC_BODY_LIMIT = 64 << 20
#: Routes (path patterns) with their own limit.
ROUTE_LIMITS: tuple[tuple[re.Pattern[str], int], ...] = (
    (re.compile(r"^/api/v1/agents/[^/]+/sync$"), SYNC_BODY_LIMIT),
)
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class BodyLimits:
    """Pure ASGI middleware: 413 for a body over its route's limit, 415 for one not JSON.

    A body within the limit is read whole and handed on unchanged (the routes read every
    body whole anyway).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        default: int = BODY_LIMIT,
        routes: Sequence[tuple[re.Pattern[str], int]] = ROUTE_LIMITS,
    ) -> None:
        self.app = app
        self.default = default
        self.routes = tuple(routes)

    def limit_of(self, path: str) -> int:
        """The body limit of ``path`` in bytes."""
        for pattern, limit in self.routes:
            if pattern.match(path):
                return limit
        return self.default

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        declared = headers.get("content-length")
        streamed = "chunked" in headers.get("transfer-encoding", "").lower()
        if not streamed and declared in (None, "0"):
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        limit = self.limit_of(path)
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _refuse(scope, receive, send, _too_large(path, limit))
            return
        media = headers.get("content-type")
        if scope["method"] in _BODY_METHODS and media is not None and not _is_json(media):
            await _refuse(scope, receive, send, _not_json(media))
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: nobody to answer
                return
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _refuse(scope, receive, send, _too_large(path, limit))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(b"".join(chunks), receive), send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that yields ``body`` once, then whatever the client sends next (its
    disconnect)."""
    pending = True

    async def replayed() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _refuse(scope: Scope, receive: Receive, send: Send, error: PlatformError) -> None:
    await error_response(error)(scope, receive, send)


def _is_json(media: str) -> bool:
    kind = media.split(";", 1)[0].strip().lower()
    main, _, sub = kind.partition("/")
    return main == "application" and (sub == "json" or sub.endswith("+json"))


def _too_large(path: str, limit: int) -> TooLargeError:
    msg = f"the request body is larger than the {_size(limit)} that {path} takes"
    return TooLargeError(msg, hint="send less: the limits of every field are in docs/contracts.md")


def _not_json(media: str) -> UnsupportedMediaError:
    shown = media if len(media) <= 80 else media[:80] + "…"
    msg = f"the request body is {shown!r}; the API takes JSON only"
    hint = "send the body as JSON, with Content-Type: application/json"
    return UnsupportedMediaError(msg, hint=hint)


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n} bytes"
