"""One LLM call through the gateway: admit, route, forward, meter, settle.

Order of work, and what each refusal costs (nothing is charged for any of them):
key (401) → body (400) → model in the catalogue (404) → tier and key allow-lists (403) →
Idempotency-Key not already used (409) → quota reservation (429 with ``retry-after``, or 400
when the call alone exceeds a limit).  Then the model's deployments are tried in order; the
next one only while nothing has been sent to the client.  Usage comes from the provider's
own ``usage``; the call is settled (ledger + audit + counters, one transaction) before the
client sees the end of the answer, so a client that waits for the answer always sees its
call counted.  A refusal is audited before it is sent, too.

Ids: the call's own id (``x-onecluster-call-id``) keys its ledger and audit rows.  The request
id (``x-request-id``, on every log line of the call) is the client's ``X-Request-ID`` when it
sent a sane one, else the call's id (decision 176).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import orjson
from aiohttp import web

from onecluster.errors import ConflictError, PlatformError, UnavailableError, ValidationError
from onecluster.gateway._call_logs import log_upstream_trouble
from onecluster.gateway._config import NANO, ModelEntry
from onecluster.gateway._errors import (
    GatewayRateLimitError,
    UpstreamError,
    error_body,
    openai_type,
)
from onecluster.gateway._gateway import Caller, Gateway
from onecluster.gateway._providers import ProviderReply, scrub
from onecluster.gateway._quota import Ask, Refused, TooLarge
from onecluster.gateway._records import CallRecord, Reservation, clean_text
from onecluster.gateway._redact import redact
from onecluster.gateway._store import ReserveOp, SettleOp
from onecluster.gateway._wire import CallRequest, Endpoint, Usage, parse_event, parse_request
from onecluster.logs import REQUEST_ID_HEADER, accepted_request_id, request_id_bound

__all__ = ["handle_call"]

_log = logging.getLogger(__name__)

# An upstream's 400/413/422 is about the request itself; a 404 usually means that
# deployment is misconfigured (Azure's DeploymentNotFound), so the next one is tried.
_CLIENT_ERRORS = frozenset({400, 413, 422})
_T = TypeVar("_T")


@dataclass(slots=True)
class _Call:
    """What is known about a call so far (mutable while it runs)."""

    gw: Gateway
    started: float
    endpoint: Endpoint
    request_id: str
    #: The client's own X-Request-ID, when it sent a sane one.
    client_id: str | None = None
    caller: Caller | None = None
    request: CallRequest | None = None
    model: ModelEntry | None = None
    estimate: int = 0
    reservation: Reservation | None = None
    upstream: str = ""
    egress: str = ""
    attempts: int = 0
    upstream_wait: float = 0.0
    settled: bool = False
    texts: list[str] = field(default_factory=list)

    def record(self, status: int, outcome: str, **fields: object) -> CallRecord:
        assert self.caller is not None
        model = self.model.name if self.model else (self.request.model if self.request else "")
        elapsed = time.perf_counter() - self.started
        values: dict[str, object] = {
            "request_id": self.request_id,
            "at": self.gw.clock.now(),
            "team": self.caller.team.name,
            "key_id": self.caller.key.key_id,
            "model": model,
            "endpoint": self.endpoint.value,
            "stream": bool(self.request and self.request.stream),
            "http_status": status,
            "outcome": outcome,
            "region": self.model.region if self.model else "",
            "upstream": self.upstream,
            "egress": self.egress,
            "latency_ms": elapsed * 1000,
            "overhead_ms": (elapsed - self.upstream_wait) * 1000,
            "attempts": self.attempts,
            **fields,
        }
        # What clients wrote reaches the database only as text every database can store.
        for name in ("model", "error", "prompt", "response"):
            if isinstance(values.get(name), str):
                values[name] = clean_text(values[name])  # type: ignore[arg-type]
        return CallRecord(**values)  # type: ignore[arg-type]

    @property
    def log_id(self) -> str:
        """The request id of the call's log lines and of ``x-request-id``."""
        return self.client_id or self.request_id

    def overhead_ms(self) -> str:
        return f"{(time.perf_counter() - self.started - self.upstream_wait) * 1000:.3f}"


async def handle_call(gw: Gateway, request: web.Request, endpoint: Endpoint) -> web.StreamResponse:
    """Serve one call to ``/v1/<endpoint>``; every failure becomes an OpenAI-format error."""
    offered = accepted_request_id(request.headers.get(REQUEST_ID_HEADER))
    call = _Call(gw, time.perf_counter(), endpoint, uuid.uuid4().hex, offered)
    with request_id_bound(call.log_id):
        refused = await _guarded(call, lambda: _admit(call, request))
    if refused is not None:
        return refused
    with request_id_bound(call.log_id):  # an Idempotency-Key may have named the call anew
        answered = await _guarded(
            call,
            lambda: (
                _stream(call, request)
                if call.request is not None and call.request.stream
                else _whole(call)
            ),
        )
    assert answered is not None
    return answered


async def _guarded(
    call: _Call, step: Callable[[], Awaitable[web.StreamResponse | None]]
) -> web.StreamResponse | None:
    """``step()``'s answer; a failure becomes the refusal that answers the call instead."""
    try:
        return await step()
    except PlatformError as error:
        return await _refuse(call, error)
    except asyncio.CancelledError:
        # Shutting down mid-call: release the reservation (best effort), then go.
        if call.caller is not None and not call.settled:
            record = call.record(499, "cancelled", error="the gateway shut down mid-call")
            call.gw.batcher.record(SettleOp(record, call.reservation))
        raise
    except Exception as exc:  # noqa: BLE001  (a bug must still release the call's reservation)
        _log.exception("call %s failed inside the gateway", call.request_id)
        return await _refuse(call, PlatformError(f"the gateway failed ({type(exc).__name__})"))


async def _admit(call: _Call, request: web.Request) -> None:
    gw = call.gw
    call.caller = gw.caller(request.headers.get("Authorization"))
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        msg = "the request body is larger than the gateway accepts (32 MiB)"
        raise _TooBig(msg) from None
    call.request = parse_request(call.endpoint, raw)
    call.model = gw.model(call.request.model, call.endpoint)
    call.caller.check_model(call.model)
    idempotency = request.headers.get("Idempotency-Key")
    if idempotency:
        call.request_id = _idempotent_id(call.caller.key.key_id, idempotency)
    call.estimate = _prompt_tokens(gw, call.request, call.model)
    ask = _ask(call.request, call.model, call.estimate)
    op = ReserveOp(
        call.request_id, call.caller.scopes, ask, gw.clock.now(), idempotent=bool(idempotency)
    )
    result = await gw.batcher.submit(op)
    if isinstance(result, Reservation):
        call.reservation = result
        return
    if isinstance(result, ConflictError | UnavailableError):
        raise result
    if isinstance(result, Refused):
        msg = f"{result.scope} is at its {result.limit.value} limit of {result.value}"
        raise GatewayRateLimitError(
            msg, retry_after=result.retry_after, limit=result.limit.value, scope=result.scope
        )
    if isinstance(result, TooLarge):
        msg = f"this call needs {result.needed} against {result.scope}'s {result.limit.value}"
        msg += f" of {result.value}; no window will ever hold it"
        raise ValidationError(msg, hint="lower max_tokens or the prompt, or ask for a bigger tier")
    msg = f"unexpected admission result {result!r}"
    raise AssertionError(msg)


def _idempotent_id(key_id: str, idempotency: str) -> str:
    """The request id of a call with an Idempotency-Key: readable when the key is plain
    printable ASCII of at most 100 characters, else its SHA-256 (any bytes are safe)."""
    if len(idempotency) <= 100 and idempotency.isascii() and idempotency.isprintable():
        return f"{key_id}:{idempotency}"
    digest = hashlib.sha256(idempotency.encode("utf-8", "surrogateescape")).hexdigest()
    return f"{key_id}:sha256:{digest}"


def _prompt_tokens(gw: Gateway, req: CallRequest, model: ModelEntry) -> int:
    enc = model.tokenizer
    if req.endpoint is Endpoint.CHAT:
        extra = [
            orjson.dumps(req.body[k]).decode()
            for k in ("tools", "functions", "response_format")
            if req.body.get(k)
        ]
        return gw.estimator.chat(enc, req.body["messages"]) + gw.estimator.texts(enc, extra)
    value = req.body["prompt" if req.endpoint is Endpoint.COMPLETIONS else "input"]
    if isinstance(value, str):
        return gw.estimator.count(enc, value)
    if value and isinstance(value[0], int):
        return len(value)
    if value and isinstance(value[0], list):
        return sum(len(v) for v in value)
    return gw.estimator.texts(enc, value)


def _ask(req: CallRequest, model: ModelEntry, prompt: int) -> Ask:
    """The call's upper bound: its prompt plus every token it may generate."""
    if req.endpoint is Endpoint.EMBEDDINGS:
        completion = 0
    else:
        completion = min(req.max_tokens or model.max_output_tokens, model.max_output_tokens)
        completion *= req.choices
    return Ask(prompt + completion, model.cost(prompt, completion))


async def _refuse(call: _Call, error: PlatformError) -> web.Response:
    headers = {
        "x-request-id": call.log_id,
        "x-onecluster-call-id": call.request_id,
        "x-onecluster-overhead-ms": call.overhead_ms(),
    }
    if isinstance(error, GatewayRateLimitError):
        headers["retry-after"] = str(error.retry_after)
    call.gw.metrics.refusals.labels(error.code).inc()
    if call.caller is not None and not call.settled:
        # Recorded before the client hears of it, as an answer is: a client that saw its
        # 429 finds it in the audit, and a reservation it held is released.
        record = call.record(error.status, error.code, error=error.message[:300])
        written: object
        try:
            written = await call.gw.batcher.submit(SettleOp(record, call.reservation))
        except PlatformError as failed:
            written = failed
        if isinstance(written, PlatformError):
            _log.error("the refusal of call %s was not recorded: %s", call.request_id, written)
    return web.Response(
        status=error.status,
        body=error_body(error),
        headers=headers,
        content_type="application/json",
    )


async def _open(call: _Call, start: int = 0) -> tuple[int, ProviderReply]:
    """The first deployment from ``start`` on that answers 200, and its index.

    An upstream's 4xx about the request itself is final (:class:`_Rejected`); anything else
    (unreachable, timed out, 401/403/429/5xx) moves on to the next deployment.
    """
    assert call.model is not None and call.request is not None
    gw = call.gw
    last: UpstreamError | None = None
    deployments = call.model.deployments
    for index in range(start, len(deployments)):
        dep = deployments[index]
        provider = gw.providers.get(dep.upstream)
        call.upstream = dep.upstream
        call.egress = gw.config.upstream(dep.upstream).egress
        if provider is None:
            last = UpstreamError(f"upstream {dep.upstream} has no provider key set")
            continue
        call.attempts += 1
        body = call.request.upstream_body(dep.model or call.model.name)
        sent = time.perf_counter()
        try:
            reply = await provider.post(call.endpoint.value, body)
        except UpstreamError as exc:
            last = exc
            continue
        finally:
            call.upstream_wait += time.perf_counter() - sent
        gw.metrics.upstream.labels(dep.upstream).observe(time.perf_counter() - sent)
        if reply.status == 200:
            return index, reply
        detail = await _error_detail(reply, gw.provider_secrets())
        if reply.status in _CLIENT_ERRORS:
            raise _Rejected(reply.status, f"upstream {dep.upstream} refused the request: {detail}")
        last = UpstreamError(f"upstream {dep.upstream} answered {reply.status}: {detail}")
    if last is None:
        last = UpstreamError(f"every upstream of {call.model.name} closed before answering")
    raise last


class _TooBig(ValidationError):
    """A request body over the gateway's limit."""

    status = 413


class _Rejected(ValidationError):
    """An upstream refused the request itself (its 4xx); no other upstream would take it."""

    code = "upstream_rejected"

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status  # type: ignore[misc]


async def _error_detail(reply: ProviderReply, secrets: tuple[str, ...]) -> str:
    try:
        raw = await reply.body()
        message = orjson.loads(raw).get("error", {}).get("message", "")
    except (PlatformError, orjson.JSONDecodeError, AttributeError):
        message = ""
    finally:
        reply.close()
    return scrub(str(message), secrets) or "no message"


async def _settle(
    call: _Call, status: int, outcome: str, usage: Usage | None, answer: str
) -> CallRecord:
    assert call.model is not None and call.caller is not None and call.request is not None
    estimated = usage is None
    if usage is None:
        completion = call.gw.estimator.count(call.model.tokenizer, answer) if answer else 0
        usage = Usage(call.estimate if call.attempts else 0, completion)
    cost = call.model.cost(usage.prompt_tokens, usage.completion_tokens)
    bodies: dict[str, object] = {}
    if call.caller.team.audit_bodies:
        prompt = orjson.dumps(
            call.request.body.get("messages")
            or call.request.body.get("prompt")
            or call.request.body.get("input")
        ).decode()
        bodies = {
            "prompt": redact(prompt) if call.caller.team.redact else prompt,
            "response": redact(answer) if call.caller.team.redact else answer,
        }
    record = call.record(
        status,
        outcome,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cost=cost,
        estimated=estimated,
        **bodies,
    )
    result = await call.gw.batcher.submit(SettleOp(record, call.reservation))
    if isinstance(result, PlatformError):
        raise result
    call.settled = True
    call.reservation = None
    call.gw.metrics.count(record)
    return record


def _headers(call: _Call) -> dict[str, str]:
    return {
        "x-request-id": call.log_id,
        "x-onecluster-call-id": call.request_id,
        "x-onecluster-egress": call.egress,
        "x-onecluster-upstream": call.upstream,
    }


async def _whole(call: _Call) -> web.Response:
    try:
        body, usage, answer = await _answer(call)
    except (_Rejected, UpstreamError) as exc:
        await _settle_failed(call, exc)
        raise
    record = await _settle(call, 200, "ok", usage, answer)
    headers = _headers(call)
    headers["x-onecluster-cost"] = f"{record.cost / NANO:.9f}"
    headers["x-onecluster-overhead-ms"] = call.overhead_ms()
    return web.Response(body=body, headers=headers, content_type="application/json")


async def _answer(call: _Call) -> tuple[bytes, Usage | None, str]:
    """A whole answer; one that breaks off or is not JSON is left for the next deployment."""

    async def whole(reply: ProviderReply) -> tuple[bytes, Usage | None, str] | None:
        body = await reply.body()
        parsed = _read_whole(body)
        return None if parsed is None else (body, *parsed)

    _, got = await _first_good(call, whole, "broke off its answer or sent one not in JSON")
    return got


async def _first_good(
    call: _Call, take: Callable[[ProviderReply], Awaitable[_T | None]], failure: str
) -> tuple[ProviderReply, _T]:
    """The first deployment whose answer ``take`` accepts.  Nothing has been sent to the
    client yet, so one that fails, or whose answer ``take`` refuses, is left for the next."""
    assert call.model is not None
    start = 0
    while True:
        index, reply = await _open(call, start)
        sent = time.perf_counter()
        try:
            got = await take(reply)
        except UpstreamError:
            got = None
        finally:
            call.upstream_wait += time.perf_counter() - sent
        if got is not None:
            return reply, got
        reply.close()
        start = index + 1
        if start >= len(call.model.deployments):
            msg = f"upstream {call.upstream} {failure}"
            raise UpstreamError(msg)


async def _settle_failed(call: _Call, error: _Rejected | UpstreamError) -> None:
    """Settle a call no upstream answered, and log it (``_call_logs.py``)."""
    record = await _settle(call, error.status, _outcome(error), Usage(0, 0), "")
    log_upstream_trouble(
        record, request_id=call.log_id, error=scrub(error.message, call.gw.provider_secrets())
    )


def _outcome(error: PlatformError) -> str:
    return "rejected" if isinstance(error, _Rejected) else error.code


def _read_whole(body: bytes) -> tuple[Usage | None, str] | None:
    """The usage and the answer's text of a JSON body; ``None`` if it is not a JSON object."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(parsed, dict):
        return None
    parts: list[str] = []
    for choice in parsed.get("choices") or ():
        if isinstance(choice, dict):
            message = choice.get("message")
            text = message.get("content") if isinstance(message, dict) else choice.get("text")
            if isinstance(text, str):
                parts.append(text)
    return Usage.from_json(parsed.get("usage")), "".join(parts)


async def _next(events: AsyncIterator[bytes], call: _Call) -> bytes | None:
    sent = time.perf_counter()
    try:
        return await anext(events, None)
    finally:
        call.upstream_wait += time.perf_counter() - sent


async def _stream(call: _Call, request: web.Request) -> web.StreamResponse:
    assert call.request is not None and call.model is not None
    try:
        reply, events, first = await _open_stream(call)
    except (_Rejected, UpstreamError) as exc:
        await _settle_failed(call, exc)
        raise
    headers = _headers(call)
    headers["x-onecluster-overhead-ms"] = call.overhead_ms()
    headers["Cache-Control"] = "no-cache"
    response = web.StreamResponse(headers=headers)
    response.content_type = "text/event-stream"
    await response.prepare(request)
    usage: Usage | None = None
    outcome = ""
    skip_usage = not call.request.client_wants_usage
    raw: bytes | None = first
    cut: UpstreamError | None = None
    chunks = 0
    try:
        while raw is not None:
            event = parse_event(raw)
            if event.done:
                outcome = "ok"
                break
            if event.malformed:
                # Forwarding it would break the client's SDK mid-answer; the rest is sound.
                _log.warning("upstream %s sent a malformed event; dropped", call.upstream)
                raw = await _next(events, call)
                continue
            if event.usage is not None:
                usage = event.usage
            if event.text:
                call.texts.append(event.text)
            if not (event.usage_only and skip_usage):
                try:
                    await response.write(raw + b"\n\n")
                    chunks += 1
                except ConnectionError:
                    outcome = "client_disconnected"
                    reply.close()
                    break
            raw = await _next(events, call)
    except UpstreamError as exc:
        cut = exc
    finally:
        reply.close()  # a no-op once the body was read whole; else the provider stops
    if not outcome:
        # The stream ended without [DONE]: complete if the provider's usage arrived.
        outcome = "ok" if usage is not None else "upstream_cut"
    try:
        record = await _settle(call, 200, outcome, usage, "".join(call.texts))
    except PlatformError as failed:
        # Headers are long gone: the stream ends with the error instead of [DONE].
        _log.error("call %s could not be settled: %s", call.request_id, failed.message)
        await _try_write(response, _error_event(failed, ()))
        return response
    if outcome == "upstream_cut" or cut is not None:
        why = cut.message if cut is not None else "the stream ended without [DONE] or usage"
        error = scrub(why, call.gw.provider_secrets())
        log_upstream_trouble(record, request_id=call.log_id, error=error, chunks=chunks)
    # Only now, with the call settled, does the client see its stream end.
    if cut is not None:
        await _try_write(response, _error_event(cut, call.gw.provider_secrets()))
    elif outcome == "ok":
        await _try_write(response, b"data: [DONE]\n\n")
    if outcome != "client_disconnected":
        with contextlib.suppress(ConnectionError):
            await response.write_eof()
    return response


async def _open_stream(call: _Call) -> tuple[ProviderReply, AsyncIterator[bytes], bytes]:
    """A deployment whose stream has produced its first event; the client is answered only
    then, so a stream that fails or closes before it is left for the next deployment."""

    async def first(reply: ProviderReply) -> tuple[AsyncIterator[bytes], bytes] | None:
        events = reply.events()
        event = await anext(events, None)
        return None if event is None else (events, event)

    reply, (events, event) = await _first_good(call, first, "closed its stream before a token")
    return reply, events, event


def _error_event(error: PlatformError, secrets: tuple[str, ...]) -> bytes:
    body = {
        "error": {
            "message": scrub(error.message, secrets),
            "type": openai_type(error),
            "code": error.code,
        }
    }
    return b"data: " + orjson.dumps(body) + b"\n\n"


async def _try_write(response: web.StreamResponse, data: bytes) -> None:
    with contextlib.suppress(ConnectionError):
        await response.write(data)
