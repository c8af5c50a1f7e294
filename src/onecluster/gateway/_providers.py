"""LLM providers behind one narrow Protocol, and the OpenAI-compatible adapter.

An adapter owns one upstream (a provider account): its base URL, its key (held here and
nowhere else: never logged, never in a response), and the connection pool of the egress node
it is reached through.  It translates transport failures into the gateway's errors at this
boundary: a refused or reset connection is :class:`UpstreamError`, silence past the
upstream's timeout is :class:`UpstreamTimeoutError`.

The HTTP client is aiohttp, not httpx: in ``benchmarks/bench_gateway.py`` a pass-through on
httpx's async client costs 0.87 ms of CPU per call against aiohttp's 0.34 ms (decision 33),
and the gateway's budget is 0.5 ms added in all.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Protocol

import aiohttp
from aiohttp.http_exceptions import HttpProcessingError

from onecluster.gateway._config import EgressNode, Upstream
from onecluster.gateway._errors import UpstreamError, UpstreamTimeoutError

__all__ = ["EgressPool", "OpenAICompatible", "Provider", "ProviderReply", "scrub"]

_KEYLIKE = re.compile(r"\b(sk|key|api|ocg)[-_][A-Za-z0-9*._-]{6,}", re.IGNORECASE)


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every secret (and anything shaped like a key) replaced; at most 300 chars.

    Providers echo fragments of a rejected key ("Incorrect API key provided: sk-ab***yz"),
    so upstream messages never reach a client, a log or the audit unscrubbed.
    """
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted key]")
    return _KEYLIKE.sub("[redacted key]", text)[:300]


class ProviderReply(Protocol):
    """An upstream's answer: status first, then the body whole or as events."""

    status: int

    async def body(self) -> bytes:
        """The whole body."""
        ...

    def events(self) -> AsyncIterator[bytes]:
        """The body's server-sent events, one at a time (without the blank line)."""
        ...

    def close(self) -> None:
        """Drop the connection (the provider stops generating)."""
        ...


class Provider(Protocol):
    """One upstream that speaks OpenAI's wire format (or is translated to it)."""

    name: str
    egress: str

    async def post(self, path: str, body: bytes) -> ProviderReply:
        """Send ``body`` to ``path`` (e.g. ``chat/completions``); the reply's status is read."""
        ...

    def secrets(self) -> tuple[str, ...]:
        """What must never leave the gateway (for :func:`scrub`)."""
        ...


class EgressPool:
    """One pooled HTTP client per egress node (through its proxy, when it has one)."""

    def __init__(self, nodes: tuple[EgressNode, ...]) -> None:
        self._nodes = {n.name: n for n in nodes}
        self._sessions: dict[str, aiohttp.ClientSession] = {}

    def session(self, name: str) -> tuple[aiohttp.ClientSession, str | None]:
        """The client of egress node ``name`` and the proxy it goes through."""
        node = self._nodes[name]
        session = self._sessions.get(name)
        if session is None:
            connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
            session = aiohttp.ClientSession(
                connector=connector, auto_decompress=False, skip_auto_headers=("User-Agent",)
            )
            self._sessions[name] = session
        return session, node.proxy

    async def close(self) -> None:
        """Close every pool."""
        for session in self._sessions.values():
            await session.close()
        self._sessions.clear()


@dataclass(slots=True)
class _AiohttpReply:
    status: int
    _response: aiohttp.ClientResponse
    _timeout: float
    _upstream: str

    @contextlib.contextmanager
    def _failures(self, stalled: str, broke: str) -> Iterator[None]:
        """Silence and transport errors, as the gateway's errors (the connection dropped)."""
        try:
            yield
        except TimeoutError:
            self.close()
            msg = f"upstream {self._upstream} {stalled}"
            raise UpstreamTimeoutError(msg) from None
        except (aiohttp.ClientError, HttpProcessingError, ValueError) as exc:
            # HttpProcessingError: e.g. an event line past aiohttp's limit (LineTooLong).
            self.close()
            msg = f"upstream {self._upstream} {broke} ({type(exc).__name__})"
            raise UpstreamError(msg) from None

    async def body(self) -> bytes:
        with self._failures("stopped sending its answer", "broke off its answer"):
            async with asyncio.timeout(self._timeout):
                return await self._response.read()

    async def events(self) -> AsyncIterator[bytes]:
        content = self._response.content
        lines: list[bytes] = []
        with self._failures("stalled mid-stream", "cut its stream"):
            while True:
                async with asyncio.timeout(self._timeout):
                    line = await content.readline()
                if not line:
                    if lines:
                        yield b"\n".join(lines)
                    return
                line = line.rstrip(b"\r\n")
                if line:
                    lines.append(line)
                elif lines:
                    yield b"\n".join(lines)
                    lines = []

    def close(self) -> None:
        self._response.close()


class OpenAICompatible:
    """An upstream speaking OpenAI's API: OpenAI, Azure OpenAI, most domestic providers."""

    def __init__(self, upstream: Upstream, key: str, pool: EgressPool) -> None:
        self.name = upstream.name
        self.egress = upstream.egress
        self._base = upstream.base_url.rstrip("/") + "/"
        self._timeout = upstream.timeout_s
        self._key = key
        self._pool = pool
        auth = ("Authorization", f"Bearer {key}") if upstream.auth == "bearer" else ("api-key", key)
        self._headers = {auth[0]: auth[1], "Content-Type": "application/json"}

    def secrets(self) -> tuple[str, ...]:
        return (self._key,)

    async def post(self, path: str, body: bytes) -> ProviderReply:
        session, proxy = self._pool.session(self.egress)
        try:
            async with asyncio.timeout(self._timeout):
                # No redirects: aiohttp would carry a custom key header (api-key) to
                # whatever host the redirect names; a 3xx counts as a failed upstream.
                response = await session.post(
                    self._base + path,
                    data=body,
                    headers=self._headers,
                    proxy=proxy,
                    allow_redirects=False,
                )
        except TimeoutError:
            msg = f"upstream {self.name} did not answer within {self._timeout:g} s"
            raise UpstreamTimeoutError(msg) from None
        except aiohttp.ClientError as exc:
            msg = f"upstream {self.name} cannot be reached through egress {self.egress} "
            msg += f"({type(exc).__name__})"
            raise UpstreamError(msg) from None
        return _AiohttpReply(response.status, response, self._timeout, self.name)

    def __repr__(self) -> str:
        return f"OpenAICompatible({self.name!r}, egress={self.egress!r})"
