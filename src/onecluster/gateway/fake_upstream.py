"""A **fake** OpenAI-compatible upstream, for tests, benchmarks and trying the gateway without
a provider account (``onecluster gateway fake-upstream``).  It is not a model.

It answers ``/v1/chat/completions``, ``/v1/completions`` and ``/v1/embeddings`` like OpenAI
does, and counts tokens its own way, on purpose unlike the gateway's estimate, so a test can
tell the bill follows the provider's ``usage``: a prompt costs one token per
whitespace-separated word plus 3, an answer is ``min(max_tokens, 8)`` chunks of one token
(``"hello "``) each.  It records every ``Authorization`` header it receives.

Faults are scripted by the upstream model name a deployment asks for:
``…-fail-500`` / ``…-fail-401`` / ``…-fail-429`` answer that status (the 401 echoes the key it
got, as real providers do), ``…-redirect`` answers 307 to another host, ``…-hang`` never
answers, ``…-cut`` breaks its stream after three chunks, ``…-nousage`` reports no usage,
``…-malformed`` sends a broken chunk.  Request fields
``fake_delay_ms`` (before answering) and ``fake_gap_ms`` (between chunks) slow it down.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import orjson
from aiohttp import web

__all__ = ["FakeUpstream", "build_fake_upstream"]


class FakeUpstream:
    """What the fake has seen: auth headers, bodies, and calls per model."""

    def __init__(self, *, keep_bodies: bool = True) -> None:
        self.auth_headers: Counter[str] = Counter()
        self.bodies: list[dict[str, Any]] = []
        self.calls: Counter[str] = Counter()
        self.keep_bodies = keep_bodies
        """Tests read ``bodies``; a long-running fake must not grow with every call."""


_FAKE: web.AppKey[FakeUpstream] = web.AppKey("fake", FakeUpstream)


def build_fake_upstream(fake: FakeUpstream | None = None) -> web.Application:
    """The fake's aiohttp application (``fake`` collects what it sees; without one, bodies
    are not kept)."""
    app = web.Application(client_max_size=32 * 1024 * 1024)
    app[_FAKE] = fake or FakeUpstream(keep_bodies=False)
    app.router.add_post("/v1/chat/completions", _chat)
    app.router.add_post("/v1/completions", _completions)
    app.router.add_post("/v1/embeddings", _embeddings)
    app.router.add_get("/_seen_auth", _seen_auth)
    return app


def _prompt_words(body: dict[str, Any]) -> int:
    if "messages" in body:
        texts = [m.get("content") for m in body["messages"] if isinstance(m, dict)]
    else:
        value = body.get("prompt", body.get("input", ""))
        texts = value if isinstance(value, list) else [value]
    return sum(len(t.split()) for t in texts if isinstance(t, str)) + 3


async def _seen(request: web.Request) -> tuple[FakeUpstream, dict[str, Any], str]:
    fake = request.app[_FAKE]
    body = orjson.loads(await request.read())
    auth = request.headers.get("Authorization") or request.headers.get("api-key") or ""
    fake.auth_headers[auth] += 1
    model = str(body.get("model", ""))
    fake.calls[model] += 1
    if fake.keep_bodies:
        fake.bodies.append(body)
    delay = body.get("fake_delay_ms")
    if isinstance(delay, int | float) and delay > 0:
        await asyncio.sleep(delay / 1000)
    return fake, body, model


def _fault(model: str, auth: str) -> web.StreamResponse | None:
    if model.endswith("-redirect"):  # a provider moving the caller elsewhere (keys and all)
        return web.Response(status=307, headers={"Location": "http://127.0.0.1:9/elsewhere"})
    for status in (500, 401, 429):
        if model.endswith(f"-fail-{status}"):
            message = f"fake failure {status}"
            if status == 401:
                message = f"Incorrect API key provided: {auth}"
            body = {"error": {"message": message, "type": "fake", "code": str(status)}}
            return web.Response(
                status=status, body=orjson.dumps(body), content_type="application/json"
            )
    return None


async def _chat(request: web.Request) -> web.StreamResponse:
    return await _generate(request, "chat.completion")


async def _completions(request: web.Request) -> web.StreamResponse:
    return await _generate(request, "text_completion")


async def _generate(request: web.Request, kind: str) -> web.StreamResponse:
    _, body, model = await _seen(request)
    if model.endswith("-hang"):
        await asyncio.sleep(3600)
    fault = _fault(model, request.headers.get("Authorization", ""))
    if fault is not None:
        return fault
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens")) or 8
    chunks = min(int(max_tokens), 8)
    usage = {
        "prompt_tokens": _prompt_words(body),
        "completion_tokens": chunks,
        "total_tokens": _prompt_words(body) + chunks,
    }
    if model.endswith("-nousage"):
        usage = None  # type: ignore[assignment]
    created = int(time.time())
    if not body.get("stream"):
        if kind == "chat.completion":
            choice = {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "hello " * chunks},
            }
        else:
            choice = {"index": 0, "finish_reason": "stop", "text": "hello " * chunks}
        reply = {
            "id": "fake-1",
            "object": kind,
            "created": created,
            "model": model,
            "choices": [choice],
        }
        if usage is not None:
            reply["usage"] = usage
        return web.Response(body=orjson.dumps(reply), content_type="application/json")
    return await _stream(
        request, body=body, model=model, kind=kind, chunks=chunks, usage=usage, created=created
    )


async def _stream(
    request: web.Request,
    *,
    body: dict[str, Any],
    model: str,
    kind: str,
    chunks: int,
    usage: dict[str, int] | None,
    created: int,
) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    gap = body.get("fake_gap_ms")
    chat = kind == "chat.completion"
    obj = "chat.completion.chunk" if chat else "text_completion"

    def event(choices: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> bytes:
        chunk = {
            "id": "fake-1",
            "object": obj,
            "created": created,
            "model": model,
            "choices": choices,
            **(extra or {}),
        }
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    def piece(text: str) -> dict[str, Any]:
        if chat:
            return {"index": 0, "delta": {"content": text}, "finish_reason": None}
        return {"index": 0, "text": text, "finish_reason": None}

    if chat:
        await response.write(
            event(
                [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]
            )
        )
    for i in range(chunks):
        if isinstance(gap, int | float) and gap > 0:
            await asyncio.sleep(gap / 1000)
        if model.endswith("-cut") and i == 3:
            assert request.transport is not None
            request.transport.close()
            return response
        if model.endswith("-malformed") and i == 2:
            await response.write(b"data: {not json\n\n")
        await response.write(event([piece("hello ")]))
    final: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
    final["delta" if chat else "text"] = {} if chat else ""
    await response.write(event([final]))
    options = body.get("stream_options") or {}
    if usage is not None and options.get("include_usage"):
        await response.write(event([], {"usage": usage}))
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def _embeddings(request: web.Request) -> web.StreamResponse:
    _, body, model = await _seen(request)
    fault = _fault(model, request.headers.get("Authorization", ""))
    if fault is not None:
        return fault
    value = body.get("input", "")
    items = (
        value if isinstance(value, list) and value and not isinstance(value[0], int) else [value]
    )
    reply = {
        "object": "list",
        "model": model,
        "data": [
            {"object": "embedding", "index": i, "embedding": [0.0, 0.5, 1.0]}
            for i in range(len(items))
        ],
        "usage": {"prompt_tokens": _prompt_words(body), "total_tokens": _prompt_words(body)},
    }
    return web.Response(body=orjson.dumps(reply), content_type="application/json")


async def _seen_auth(request: web.Request) -> web.StreamResponse:
    fake = request.app[_FAKE]
    return web.Response(body=orjson.dumps(dict(fake.auth_headers)), content_type="application/json")
