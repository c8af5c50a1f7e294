"""OpenAI's wire format: the requests the gateway accepts, the body it sends upstream, and the
``usage`` it reads back (from a JSON body or from a stream's server-sent events).

Bodies are passed through as the client wrote them; the gateway changes only ``model`` (to
the upstream's name for it) and, on streams, ``stream_options.include_usage`` (forced on,
because the provider's own usage is the bill).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson

from onecluster.errors import ValidationError

__all__ = ["CallRequest", "Endpoint", "StreamEvent", "Usage", "parse_event", "parse_request"]


class Endpoint(StrEnum):
    """The OpenAI endpoints the gateway serves, by their path under ``/v1``."""

    CHAT = "chat/completions"
    COMPLETIONS = "completions"
    EMBEDDINGS = "embeddings"

    @property
    def kind(self) -> str:
        """The catalogue ``kind`` a model must have to serve this endpoint."""
        return {"chat/completions": "chat", "completions": "completion"}.get(self, "embedding")


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens a provider reported for one call."""

    prompt_tokens: int
    completion_tokens: int

    @classmethod
    def from_json(cls, raw: object) -> Usage | None:
        """``usage`` of a body or chunk; ``None`` when absent or malformed."""
        if not isinstance(raw, dict):
            return None
        prompt = raw.get("prompt_tokens")
        completion = raw.get("completion_tokens", 0)
        if not isinstance(prompt, int) or not isinstance(completion, int):
            return None
        return cls(prompt, completion or 0)


@dataclass(frozen=True, slots=True)
class CallRequest:
    """A validated client request."""

    endpoint: Endpoint
    model: str
    body: dict[str, Any]
    stream: bool
    client_wants_usage: bool
    max_tokens: int | None
    choices: int
    """Answers the call may generate: ``max(n, best_of)``, times the prompts of a batch."""

    def upstream_body(self, model: str) -> bytes:
        """The body for an upstream that calls the model ``model``."""
        body = dict(self.body)
        body["model"] = model
        if self.stream:
            options = dict(body.get("stream_options") or {})
            options["include_usage"] = True
            body["stream_options"] = options
        return orjson.dumps(body)


def _bad(message: str) -> ValidationError:
    return ValidationError(message, hint="see https://platform.openai.com/docs/api-reference")


def parse_request(endpoint: Endpoint, raw: bytes) -> CallRequest:
    """Validate ``raw`` for ``endpoint``; :class:`ValidationError` (400) if malformed."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        msg = "the request body is not valid JSON"
        raise _bad(msg) from None
    if not isinstance(body, dict):
        msg = "the request body must be a JSON object"
        raise _bad(msg)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        msg = "'model' is required and must be a string"
        raise _bad(msg)
    if endpoint is Endpoint.CHAT:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            msg = "'messages' must be a non-empty array of messages"
            raise _bad(msg)
        if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
            msg = "every message must be an object with a 'role'"
            raise _bad(msg)
    elif endpoint is Endpoint.COMPLETIONS:
        if not _is_text_input(body.get("prompt")):
            msg = "'prompt' must be a string or an array of strings"
            raise _bad(msg)
    elif not _is_text_input(body.get("input")) and not _is_token_input(body.get("input")):
        msg = "'input' must be a string, an array of strings or an array of token ids"
        raise _bad(msg)
    stream = body.get("stream", False)
    if not isinstance(stream, bool) or (stream and endpoint is Endpoint.EMBEDDINGS):
        msg = "'stream' must be true or false (and embeddings do not stream)"
        raise _bad(msg)
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        msg = "'stream_options' must be an object"
        raise _bad(msg)
    wants_usage = bool(options and options.get("include_usage"))
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
    ):
        msg = "'max_tokens' must be a positive integer"
        raise _bad(msg)
    choices = 1
    for field in ("n", "best_of"):
        value = body.get(field, 1)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 128:
            msg = f"'{field}' must be an integer from 1 to 128"
            raise _bad(msg)
        choices = max(choices, value)
    prompts = body.get("prompt")
    if endpoint is Endpoint.COMPLETIONS and isinstance(prompts, list):
        choices *= len(prompts)  # a batch of prompts: each gets its own answers
    return CallRequest(endpoint, model, body, stream, wants_usage, max_tokens, choices)


def _is_text_input(value: object) -> bool:
    if isinstance(value, str):
        return True
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


def _is_token_input(value: object) -> bool:
    if not isinstance(value, list) or not value:
        return False
    if all(isinstance(v, int) for v in value):
        return True
    return all(isinstance(v, list) and all(isinstance(t, int) for t in v) for v in value)


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One server-sent event of an upstream stream, as far as the gateway needs to know it.

    ``done`` is the ``[DONE]`` sentinel; ``usage_only`` a chunk with no choices that carries
    only ``usage`` (sent because the gateway forced ``include_usage``); ``text`` the content
    it adds to the answer.
    """

    raw: bytes
    done: bool = False
    usage: Usage | None = None
    usage_only: bool = False
    text: str = ""
    malformed: bool = False


def parse_event(raw: bytes) -> StreamEvent:
    """Read the ``data:`` of one event (its lines, the blank line excluded)."""
    data = b"".join(
        line[5:].lstrip() for line in raw.split(b"\n") if line.startswith(b"data:")
    ).strip()
    if not data:
        return StreamEvent(raw)
    if data == b"[DONE]":
        return StreamEvent(raw, done=True)
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        return StreamEvent(raw, malformed=True)
    if not isinstance(chunk, dict):
        return StreamEvent(raw, malformed=True)
    choices = chunk.get("choices")
    usage = Usage.from_json(chunk.get("usage"))
    text_parts: list[str] = []
    if isinstance(choices, list):
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta")
            piece = delta.get("content") if isinstance(delta, dict) else choice.get("text")
            if isinstance(piece, str):
                text_parts.append(piece)
    return StreamEvent(
        raw,
        usage=usage,
        usage_only=usage is not None and not choices,
        text="".join(text_parts),
    )
