"""Timing of every API request, by route template — never by raw path, so that ids and
probes of unknown paths do not each make a time series."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from onecluster.server._metrics import ServerMetrics

__all__ = ["RequestTimer", "route_template"]

#: The route label of a request no route matched (a 404 for an unknown path, say).
UNMATCHED = "unmatched"


def route_template(scope: Scope) -> str:
    """The template of the route that answered (``/api/v1/jobs/{job_id}``), or
    :data:`UNMATCHED`.  The router puts the route in the scope as it dispatches."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED


class RequestTimer:
    """ASGI middleware: observes each HTTP request's duration, from its start to the last
    byte of its answer, into :attr:`ServerMetrics.requests`.  A request whose answer never
    started (the client went away, an error escaped) counts as a 5xx.  A stream of events
    (``text/event-stream``, the dashboard's ``/api/v1/live``) is not timed: it lasts as long
    as its reader stays, which says nothing of how fast the server answers."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app = app
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        status = 500
        streams = False

        async def timed_send(message: Message) -> None:
            nonlocal status, streams
            if message["type"] == "http.response.start":
                status = int(message["status"])
                streams = any(
                    name == b"content-type" and value.startswith(b"text/event-stream")
                    for name, value in message.get("headers", [])
                )
            await send(message)

        try:
            await self.app(scope, receive, timed_send)
        finally:
            if not streams:
                self._metrics.requests.labels(
                    scope.get("method", ""), route_template(scope), f"{status // 100}xx"
                ).observe(time.perf_counter() - began)
