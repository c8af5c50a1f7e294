"""The gateway's HTTP surface (aiohttp): OpenAI's ``/v1`` endpoints, ``/metrics``,
``/healthz``; every error in OpenAI's format; every answer with an ``x-request-id``."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import orjson
from aiohttp import web

from onecluster.errors import NotFoundError, PlatformError
from onecluster.gateway._calls import handle_call
from onecluster.gateway._errors import error_body
from onecluster.gateway._gateway import Gateway
from onecluster.gateway._wire import Endpoint
from onecluster.logs import (
    REQUEST_ID_HEADER,
    accepted_request_id,
    current_request_id,
    new_request_id,
    request_id_bound,
)

__all__ = ["build_app"]

MAX_BODY = 32 * 1024 * 1024
_GATEWAY: web.AppKey[Gateway] = web.AppKey("gateway", Gateway)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def build_app(gateway: Gateway) -> web.Application:
    """The aiohttp application serving ``gateway``; it starts and closes it with itself."""
    app = web.Application(client_max_size=MAX_BODY, middlewares=[_request_ids])
    app[_GATEWAY] = gateway
    for endpoint in Endpoint:
        app.router.add_post(f"/v1/{endpoint.value}", _call_handler(gateway, endpoint))
    app.router.add_get("/v1/models", _models_handler(gateway))
    app.router.add_get("/metrics", _metrics_handler(gateway))
    app.router.add_get("/healthz", _health)
    app.router.add_route("*", "/{tail:.*}", _not_found)
    app.on_startup.append(_start)
    app.on_cleanup.append(_close)
    return app


@web.middleware
async def _request_ids(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Bind the request id (the client's sane ``X-Request-ID``, else a new one) while the
    request is handled, and answer with it.  A call binds its own (``_calls.py``)."""
    offered = accepted_request_id(request.headers.get(REQUEST_ID_HEADER))
    with request_id_bound(offered or new_request_id()):
        response = await handler(request)
        if not response.prepared and "x-request-id" not in response.headers:
            response.headers["x-request-id"] = current_request_id() or ""
    return response


async def _start(app: web.Application) -> None:
    await app[_GATEWAY].start()


async def _close(app: web.Application) -> None:
    await app[_GATEWAY].close()


def _call_handler(gateway: Gateway, endpoint: Endpoint) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await handle_call(gateway, request, endpoint)

    return handler


def _error(error: PlatformError) -> web.Response:
    return web.Response(
        status=error.status, body=error_body(error), content_type="application/json"
    )


def _models_handler(gateway: Gateway) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            caller = gateway.caller(request.headers.get("Authorization"))
        except PlatformError as error:
            return _error(error)
        allowed = caller.key.limits.models
        data = [
            {"id": m.name, "object": "model", "created": 0, "owned_by": f"region:{m.region}"}
            for m in gateway.config.models
            if caller.tier.allows(m.name) and (allowed is None or m.name in allowed)
        ]
        return web.Response(
            body=orjson.dumps({"object": "list", "data": data}), content_type="application/json"
        )

    return handler


def _metrics_handler(gateway: Gateway) -> Handler:
    async def handler(_: web.Request) -> web.StreamResponse:
        return web.Response(
            body=gateway.metrics.exposition(),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    return handler


async def _health(_: web.Request) -> web.StreamResponse:
    return web.Response(
        body=orjson.dumps({"ok": True, "at": time.time()}), content_type="application/json"
    )


async def _not_found(request: web.Request) -> web.StreamResponse:
    msg = f"{request.method} {request.path} is not an endpoint of this gateway"
    return _error(
        NotFoundError(
            msg,
            hint="it serves /v1/chat/completions, /v1/completions, /v1/embeddings and /v1/models",
        )
    )
