"""The agent's one call to the control plane: ``POST /api/v1/agents/{site}/sync``.

:class:`SyncLink` is the seam (the SDK's ``Client.agent_sync`` has the same shape);
:class:`ServerLink` implements it with httpx and translates every failure into the
:mod:`onecluster.errors` tree: unreachable server or 5xx → :class:`UnavailableError`,
401/403 → :class:`AuthError`/:class:`ForbiddenError`, a reply that is not the contract's JSON →
:class:`ValidationError`.
"""

from __future__ import annotations

from typing import Protocol

import httpx
import pydantic

from onecluster.client import usable_token
from onecluster.errors import (
    AuthError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PlatformError,
    UnavailableError,
    ValidationError,
)
from onecluster.schema import AgentSync, AgentSyncReply

__all__ = ["ServerLink", "SyncLink"]

_BY_STATUS: dict[int, type[PlatformError]] = {
    401: AuthError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
}


class SyncLink(Protocol):
    """Something that delivers one sync body and returns the server's desired state."""

    def agent_sync(
        self, site: str, body: AgentSync, *, timeout_s: float | None = None
    ) -> AgentSyncReply:
        """Send ``body`` for ``site``; raise a :class:`PlatformError` on any failure.

        ``timeout_s``: the call must be over by then, answered or failed (``None``: the
        link's own timeout) — the agent's lease may not wait for it.
        """
        ...

    def close(self) -> None:
        """Release connections."""
        ...


class ServerLink:
    """A :class:`SyncLink` over httpx with a bearer token and a per-request timeout.

    :class:`AuthError` at once for a token that cannot be sent (whitespace or control
    characters inside it), rather than "cannot reach the server" on every sync.
    """

    def __init__(self, server_url: str, token: str, *, timeout_s: float = 5.0) -> None:
        self._url = server_url.rstrip("/")
        self._timeout_s = timeout_s
        self._http = httpx.Client(
            base_url=self._url,
            headers={"Authorization": f"Bearer {usable_token(token, source='the agent token')}"},
            timeout=timeout_s,
        )

    def agent_sync(
        self, site: str, body: AgentSync, *, timeout_s: float | None = None
    ) -> AgentSyncReply:
        """POST ``body``; the reply parsed, or the failure as a :class:`PlatformError`.

        With ``timeout_s``, connecting, sending and reading each get a third of it (at most
        the link's own timeout each), so the whole call is over by ``timeout_s``.
        """
        phase = self._timeout_s if timeout_s is None else min(self._timeout_s, timeout_s / 3)
        try:
            response = self._http.post(
                f"/api/v1/agents/{site}/sync",
                json=body.model_dump(mode="json"),
                timeout=httpx.Timeout(phase),
            )
        except httpx.HTTPError as exc:
            msg = f"cannot reach the onecluster server at {self._url}: {exc or type(exc).__name__}"
            raise UnavailableError(msg, hint="is `onecluster server` running?") from exc
        if response.status_code >= 400:
            raise _error_from(response, self._url)
        try:
            return AgentSyncReply.model_validate_json(response.content)
        except pydantic.ValidationError as exc:
            msg = f"the server at {self._url} answered the sync with a body this agent cannot read"
            raise ValidationError(msg, hint=str(exc).splitlines()[0]) from exc

    def close(self) -> None:
        """Close the connection pool; idempotent."""
        self._http.close()


def _error_from(response: httpx.Response, url: str) -> PlatformError:
    """The error tree's class for an error reply, keeping the server's message and hint."""
    message = f"the server at {url} answered the sync with HTTP {response.status_code}"
    hint: str | None = None
    try:
        detail = response.json().get("error", {})
        message = str(detail.get("message") or message)
        hint = detail.get("hint")
    except (ValueError, AttributeError):
        pass
    if response.status_code >= 500:
        return UnavailableError(message, hint=hint or "the server failed; retrying later")
    return _BY_STATUS.get(response.status_code, ValidationError)(message, hint=hint)
