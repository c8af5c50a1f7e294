"""Every request has an id: the caller's ``X-Request-ID`` when it is sane, else a new one.

The id is bound for the request's whole handling (:func:`onecluster.logs.request_id_bound`),
so every log line written meanwhile carries it; it replaces the request's own header (in
the ASGI scope, which the layers outside see too: the handler of unexpected errors answers
and logs with it, ``_errors.py``), so that a follower replica forwarding the request to the
leader (``_forward.py``) passes the same id on; and it comes back in the answer's
``X-Request-ID``.  One access line per request is logged: at DEBUG, or WARNING for a 5xx.
"""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from onecluster.logs import accepted_request_id, new_request_id, request_id_bound

__all__ = ["RequestIds"]

_HEADER = b"x-request-id"
_log = logging.getLogger("onecluster.server.access")


class RequestIds:
    """Pure ASGI middleware, the outermost one of the app's own."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: list[tuple[bytes, bytes]] = list(scope.get("headers", ()))
        offered = next((v for k, v in headers if k.lower() == _HEADER), None)
        request_id = (
            accepted_request_id(None if offered is None else offered.decode("latin-1"))
            or new_request_id()
        )
        raw = request_id.encode("ascii")
        scope["headers"] = [(k, v) for k, v in headers if k.lower() != _HEADER] + [(_HEADER, raw)]
        status = 0

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                kept = [(k, v) for k, v in message.get("headers", ()) if k.lower() != _HEADER]
                message = {**message, "headers": [*kept, (_HEADER, raw)]}
            await send(message)

        started = time.perf_counter()
        with request_id_bound(request_id):
            try:
                await self.app(scope, receive, send_with_id)
            finally:
                _access(scope, status or 500, time.perf_counter() - started)


def _access(scope: Scope, status: int, elapsed_s: float) -> None:
    elapsed_ms = round(elapsed_s * 1000, 3)
    _log.log(
        logging.WARNING if status >= 500 else logging.DEBUG,
        "%s %s answered %d in %.1f ms",
        scope["method"],
        scope["path"],
        status,
        elapsed_ms,
        extra={
            "method": scope["method"],
            "path": scope["path"],
            "status": status,
            "elapsed_ms": elapsed_ms,
        },
    )
