"""``GET /metrics``: the server's Prometheus metrics (``docs/noc.md``, "Metrics").

No token, as Prometheus scrapes: the metrics name teams, sites, circuits and counts, never a
job's command, a dataset's content or a secret.  Left out of the OpenAPI schema, which
describes the API the CLI and the SDK speak.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from onecluster.errors import UnavailableError
from onecluster.server._metrics import ServerMetrics

__all__ = ["router"]

router = APIRouter()


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    """The metrics; the state of the cluster is read from the database off the event loop."""
    found = getattr(request.app.state, "metrics", None)
    if not isinstance(found, ServerMetrics):
        msg = "the server is still starting"
        raise UnavailableError(msg, hint="retry in a moment")
    body = await asyncio.to_thread(found.exposition)
    return Response(content=body, media_type=CONTENT_TYPE_LATEST)
