"""The agent's one call to the control plane: ``POST /api/v1/agents/{site}/sync``.

:class:`SyncLink` is the seam (the SDK's ``Client.agent_sync`` has the same shape);
:class:`ServerLink` implements it with httpx, over one server or several replicas of one
control plane, and translates every failure into the :mod:`onecluster.errors` tree:
unreachable server or 5xx → :class:`UnavailableError` (:class:`NotLeaderError` when a
replica answered that none leads and none took the sync: an election is under way), 401/403 →
:class:`AuthError`/:class:`ForbiddenError`, a reply that is not the contract's JSON →
:class:`ValidationError`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import httpx
import pydantic

from onecluster.client import ServerList, usable_token
from onecluster.client._servers import describe_tries
from onecluster.errors import (
    AuthError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    NotLeaderError,
    PlatformError,
    UnavailableError,
    ValidationError,
)
from onecluster.schema import AgentSync, AgentSyncReply

__all__ = ["ServerLink", "SyncLink"]

_log = logging.getLogger("onecluster.agent")

#: A try is not started with less time than this left of the sync's budget.
_MIN_TRY_S = 0.01

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

    ``server_url`` names one server, or several replicas of one control plane (a
    comma-separated string or a sequence; :class:`~onecluster.client.ServerList`).  A sync goes
    to the current replica; where that cannot be reached, does not answer in time or answers
    5xx, the same sync goes to the next one, round-robin, each at most once, and the replica
    that answers stays current.  Sending a sync again is safe even after a timeout — the server
    may have done it — because a sync is idempotent (``store/_sync.py``; decision 161).  Any
    other answer (a refusal, a body that cannot be read) is raised as it is: every replica
    reads the same database and would say the same.

    :class:`AuthError` at once for a token that cannot be sent (whitespace or control
    characters inside it), rather than "cannot reach the server" on every sync;
    :class:`ValidationError` for a server list that cannot work.  ``clock`` (monotonic
    seconds) measures the sync's budget.
    """

    def __init__(
        self,
        server_url: str | Sequence[str],
        token: str,
        *,
        timeout_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._servers = ServerList(server_url, source="the agent's server URL")
        self._timeout_s = timeout_s
        self._clock = clock
        self._http = httpx.Client(
            headers={"Authorization": f"Bearer {usable_token(token, source='the agent token')}"},
            timeout=timeout_s,
        )

    @property
    def servers(self) -> ServerList:
        """The server URLs and the current one."""
        return self._servers

    def agent_sync(
        self, site: str, body: AgentSync, *, timeout_s: float | None = None
    ) -> AgentSyncReply:
        """POST ``body``; the reply parsed, or the failure as a :class:`PlatformError`.

        With ``timeout_s``, the whole call — every replica tried — is over by then: each try
        gets an even share of what is left for the replicas not yet tried (the last one all
        of it), and connecting, sending and reading each a third of its share (at most the
        link's own timeout each).  Without, each try gets the link's own timeout per phase.
        """
        deadline = None if timeout_s is None else self._clock() + timeout_s
        payload = body.model_dump(mode="json")
        rotation = self._servers.rotation()
        tries: list[tuple[str, str]] = []
        failure: PlatformError | None = None
        electing = False  # a replica answered that none leads: the others may be gone
        for index, url in enumerate(rotation):
            phase = self._timeout_s
            if deadline is not None:
                share = (deadline - self._clock()) / (len(rotation) - index)
                if share < _MIN_TRY_S:
                    left = ", ".join(rotation[index:])
                    tries.append((left, f"not tried: the sync's {timeout_s:.1f} s ran out"))
                    break
                phase = min(self._timeout_s, share / 3)
            try:
                reply = self._one_try(url, site, payload, phase)
            except NotLeaderError as exc:
                tries.append((url, exc.message))
                failure = exc  # alive, and soon the leader or forwarding to it: not failed
                electing = True
                continue
            except UnavailableError as exc:
                tries.append((url, exc.message))
                failure = exc
                self._servers.failed(url)
                continue
            except PlatformError:
                self._servers.answered(url)  # it answered: it is alive, and the refusal stands
                raise
            if tries:
                _log.warning(
                    "the onecluster server at %s answered the sync after %s",
                    url,
                    describe_tries(tries),
                )
            self._servers.answered(url)
            return reply
        if len(self._servers) == 1 and failure is not None:
            raise failure
        msg = f"no onecluster server answered the sync: {describe_tries(tries)}"
        if electing:
            hint = "no replica leads yet (an election, or the database away); retrying soon"
            raise NotLeaderError(msg, hint=hint)
        raise UnavailableError(msg, hint="is `onecluster server` running at any of them?")

    def _one_try(self, url: str, site: str, payload: object, phase: float) -> AgentSyncReply:
        """The sync sent to the server at ``url``, each phase given ``phase`` seconds."""
        try:
            response = self._http.post(
                f"{url}/api/v1/agents/{site}/sync", json=payload, timeout=httpx.Timeout(phase)
            )
        except httpx.HTTPError as exc:
            msg = f"cannot reach the onecluster server at {url}: {exc or type(exc).__name__}"
            raise UnavailableError(msg, hint="is `onecluster server` running?") from exc
        if response.status_code >= 400:
            raise _error_from(response, url)
        try:
            return AgentSyncReply.model_validate_json(response.content)
        except pydantic.ValidationError as exc:
            msg = f"the server at {url} answered the sync with a body this agent cannot read"
            raise ValidationError(msg, hint=str(exc).splitlines()[0]) from exc

    def close(self) -> None:
        """Close the connection pool; idempotent."""
        self._http.close()


def _error_from(response: httpx.Response, url: str) -> PlatformError:
    """The error tree's class for an error reply, keeping the server's message and hint."""
    message = f"the server at {url} answered the sync with HTTP {response.status_code}"
    hint: str | None = None
    code: object = None
    try:
        detail = response.json().get("error", {})
        message = str(detail.get("message") or message)
        hint = detail.get("hint")
        code = detail.get("code")
    except (ValueError, AttributeError):
        pass
    if response.status_code >= 500:
        if code == NotLeaderError.code:
            return NotLeaderError(message, hint=hint or "another replica leads or soon will")
        return UnavailableError(message, hint=hint or "the server failed; retrying later")
    return _BY_STATUS.get(response.status_code, ValidationError)(message, hint=hint)
