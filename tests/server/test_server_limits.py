"""The body-limit middleware on its own, driven through ASGI with scripted messages."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

from onecluster.server._limits import BodyLimits


class App:
    """An ASGI app that records the body it read and answers 200."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        self.bodies.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def _run(
    chunks: list[bytes],
    *,
    path: str = "/api/v1/jobs",
    method: str = "POST",
    headers: dict[str, str] | None = None,
    disconnect: bool = False,
) -> tuple[App, list[Message], int]:
    """Send ``chunks`` through the middleware (limit 100 bytes, 1,000 on the sync path);
    the app, the messages sent back and how many messages were received."""
    app = App()
    middleware = BodyLimits(
        app, default=100, routes=((re.compile(r"^/api/v1/agents/[^/]+/sync$"), 1000),)
    )
    incoming: list[Message] = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
        for i, c in enumerate(chunks)
    ]
    if disconnect:
        incoming[-1] = {"type": "http.disconnect"}
    received = 0

    async def receive() -> Message:
        nonlocal received
        received += 1
        if incoming:
            return incoming.pop(0)
        return {"type": "http.disconnect"}

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    head = headers if headers is not None else {"transfer-encoding": "chunked"}
    scope: dict[str, Any] = {
        "type": "http",
        "method": method,
        "path": path,
        "headers": [(k.encode(), v.encode()) for k, v in head.items()],
    }
    asyncio.run(middleware(scope, receive, send))
    return app, sent, received


def _status(sent: list[Message]) -> int:
    return int(sent[0]["status"])


def _error(sent: list[Message]) -> dict[str, str]:
    error: dict[str, str] = json.loads(sent[1]["body"])["error"]
    return error


def test_a_body_within_the_limit_reaches_the_route_whole() -> None:
    app, sent, _ = _run([b'{"a": ', b"1", b"}"])
    assert app.bodies == [b'{"a": 1}']
    assert _status(sent) == 200


def test_a_streamed_body_is_cut_off_as_soon_as_it_passes_the_limit() -> None:
    app, sent, received = _run([b"x" * 60, b"x" * 60, b"x" * 60, b"x" * 60])
    assert app.bodies == []  # the route never ran
    assert _status(sent) == 413 and _error(sent)["code"] == "too_large"
    assert received == 2  # nothing read past the chunk that crossed the limit


def test_a_declared_length_over_the_limit_is_refused_before_reading() -> None:
    app, sent, received = _run([b"x" * 200], headers={"content-length": "200"})
    assert (app.bodies, _status(sent), received) == ([], 413, 0)
    assert "100 bytes" in _error(sent)["message"]


def test_the_sync_route_has_its_own_limit() -> None:
    app, sent, _ = _run([b"x" * 500], path="/api/v1/agents/tokyo/sync")
    assert app.bodies == [b"x" * 500]
    _, sent, _ = _run([b"x" * 1001], path="/api/v1/agents/tokyo/sync")
    assert _status(sent) == 413


@pytest.mark.parametrize(
    ("media", "status"),
    [
        ("text/plain", 415),
        ("application/x-www-form-urlencoded", 415),
        ("multipart/form-data; boundary=x", 415),
        ("application/json", 200),
        ("application/json; charset=utf-8", 200),
        ("Application/JSON", 200),
        ("application/merge-patch+json", 200),
        ("text/json", 415),
    ],
)
def test_only_json_bodies_are_taken(media: str, status: int) -> None:
    _, sent, _ = _run([b"{}"], headers={"content-length": "2", "content-type": media})
    assert _status(sent) == status
    if status == 415:
        assert _error(sent)["code"] == "unsupported_media"


def test_a_request_without_a_body_passes_untouched() -> None:
    app, sent, _ = _run([b""], method="GET", headers={})
    assert (app.bodies, _status(sent)) == ([b""], 200)
    _, sent, _ = _run(
        [b"{}"], method="GET", headers={"content-length": "2", "content-type": "text/plain"}
    )
    assert _status(sent) == 200  # a GET's body is nobody's: only its size is bounded


def test_a_client_that_leaves_mid_body_gets_no_answer_and_the_route_never_runs() -> None:
    app, sent, _ = _run([b"x" * 10, b"x" * 10], disconnect=True)
    assert (app.bodies, sent) == ([], [])
