"""``GET /api/v1/live``: the event feed pushed as server-sent events, for the dashboard.

Each committed event goes out once, in id order, as ``event: feed`` with the event's id as
the SSE id, so a client that reconnects with ``Last-Event-ID`` (or ``?after=``) resumes
without a gap or a repeat: the feed is gap-free (decision 162).  Between events, an
``event: tick`` every second tells the page to read what changes without an event (probe
measurements, transfer progress); its data is the server's time.  The stream ends when the
server shuts down (``app.state.closing``) or after :data:`STREAM_LIMIT_S`, and the browser
reconnects by itself.

It is not in the OpenAPI schema: a response that never ends is no operation a generated
client or a fuzzer can call.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from onecluster.errors import UnavailableError, ValidationError
from onecluster.schema import MAX_INT
from onecluster.server._control import ControlPlane
from onecluster.server._deps import Caller, Control

__all__ = ["MAX_STREAMS", "STREAM_LIMIT_S", "TICK_S", "router"]

router = APIRouter(prefix="/api/v1", tags=["live"])

#: How often the stream reads the feed and sends a tick.
TICK_S = 1.0
#: How long one stream lasts before the server ends it (the browser reconnects, resuming).
STREAM_LIMIT_S = 600.0
#: Events read per page of the feed.
_PAGE = 200
#: Streams one server holds open at once; one more is refused (503, retried by the page).
#: Each reads the database once a second, so a few hundred would be a load of their own.
MAX_STREAMS = 64


@router.get("/live", include_in_schema=False)
async def live(
    request: Request,
    control: Control,
    _caller: Caller,
    after: Annotated[int | None, Query(ge=0, le=MAX_INT)] = None,
    last_event_id: Annotated[str | None, Header(max_length=24)] = None,
) -> StreamingResponse:
    """Events after ``Last-Event-ID`` (or ``after``; else only those still to come)."""
    cursor = _cursor(last_event_id, after)
    if cursor is None:
        newest = await asyncio.to_thread(control.store.events, limit=1)
        cursor = newest[-1].id if newest else 0
    closing: asyncio.Event | None = getattr(request.app.state, "closing", None)
    open_now: int = getattr(request.app.state, "live_streams", 0)
    if open_now >= MAX_STREAMS:
        msg = f"this server already holds {open_now} live streams, its most"
        raise UnavailableError(msg, hint="close other dashboard tabs, or use another replica")
    return StreamingResponse(
        _counted(request, _stream(request, control, cursor, closing)),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def _cursor(last_event_id: str | None, after: int | None) -> int | None:
    if last_event_id is None:
        return after
    if not (last_event_id.isascii() and last_event_id.isdigit()) or int(last_event_id) > MAX_INT:
        msg = f"Last-Event-ID must be an event id (a whole number), not {last_event_id!r}"
        raise ValidationError(msg)
    return int(last_event_id)


async def _counted(request: Request, stream: AsyncIterator[str]) -> AsyncIterator[str]:
    """``stream``, counted in ``app.state.live_streams`` from its first line to its end."""
    state = request.app.state
    state.live_streams = getattr(state, "live_streams", 0) + 1
    try:
        async for line in stream:
            yield line
    finally:
        state.live_streams -= 1


async def _stream(
    request: Request, control: ControlPlane, cursor: int, closing: asyncio.Event | None
) -> AsyncIterator[str]:
    loop = asyncio.get_running_loop()
    ends_at = loop.time() + STREAM_LIMIT_S
    yield f"retry: {int(TICK_S * 2000)}\n\n"
    while loop.time() < ends_at and not await request.is_disconnected():
        while True:
            page = await asyncio.to_thread(control.store.events, after=cursor, limit=_PAGE)
            for e in page:
                body = {"id": e.id, "time": e.time, "kind": e.kind, "job_id": e.job_id}
                body["message"] = e.message
                yield f"id: {e.id}\nevent: feed\ndata: {json.dumps(body)}\n\n"
                cursor = e.id
            if len(page) < _PAGE:
                break
        yield f"event: tick\ndata: {json.dumps({'time': control.clock.now()})}\n\n"
        if closing is None:
            await asyncio.sleep(TICK_S)
            continue
        try:
            await asyncio.wait_for(closing.wait(), TICK_S)
        except TimeoutError:
            continue
        return
