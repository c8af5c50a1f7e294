"""Requests that only the leader can answer, forwarded to it by the other replicas.

Every replica serves the whole API from the shared database.  A few routes answer from what
only the leader holds in memory: the agents' syncs (link state, routes, the data plane's
rates and orders), the link board and route table, a pending job's ``why`` (the leader's
queue), transfers (their paths and rates) and exports with the register (written by the
leader's reconcile loop).  A follower forwards those, unchanged with their headers, to the
leader's advertised URL and returns its answer; with no leader known (an election is under
way) it answers 503 ``not_leader``, which clients retry.  A forwarded request carries
``X-Onecluster-Forwarded``, and is never forwarded a second time: a replica that receives one
while it does not lead answers 503 too.
"""

from __future__ import annotations

import re

import httpx
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from onecluster.errors import NotLeaderError
from onecluster.server._election import Election
from onecluster.server._errors import error_response

__all__ = ["FORWARDED_HEADER", "FORWARD_TIMEOUT_S", "LEADER_ROUTES", "LeaderForwarding"]

#: Set on a request one replica forwards to another.
FORWARDED_HEADER = "x-onecluster-forwarded"
#: The paths only the leader answers.
LEADER_ROUTES = re.compile(
    r"^/api/v1/(agents/[^/]+/sync|links(/.*)?|routes|jobs/[^/]+/why|transfers(/.*)?"
    r"|exports(/.*)?|register(/.*)?)$"
)
#: Hop-by-hop headers, which a proxy does not pass on (RFC 9110 §7.6.1), and the length,
#: which httpx sets again.
_NOT_PASSED = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
        "te",
        "trailer",
        "host",
        "content-length",
    }
)
#: How long a follower waits for the leader's answer to a forwarded request.
FORWARD_TIMEOUT_S = 30.0


class LeaderForwarding:
    """Pure ASGI middleware: a follower passes :data:`LEADER_ROUTES` on to the leader.

    ``app.state.election`` and ``app.state.forwarder`` (an ``httpx.AsyncClient`` the app's
    lifespan owns and closes) are read at each request: they exist only while the app runs;
    without them every request is served here.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not LEADER_ROUTES.match(scope["path"]):
            await self.app(scope, receive, send)
            return
        state = scope["app"].state if "app" in scope else None
        election = getattr(state, "election", None)
        http = getattr(state, "forwarder", None)
        if not isinstance(election, Election) or not isinstance(http, httpx.AsyncClient):
            await self.app(scope, receive, send)
            return
        if election.leading:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        target = election.leader_url
        if FORWARDED_HEADER in headers or target is None or target == election.url:
            await _no_leader(scope, receive, send, forwarded=FORWARDED_HEADER in headers)
            return
        body = await _body(receive)
        if body is None:  # the client went away mid-body: forward nothing
            return
        # The path as the client sent it (its escapes kept), and the query string unparsed.
        path = scope.get("raw_path") or scope["path"].encode("latin-1")
        query = scope.get("query_string", b"")
        url = (
            target.rstrip("/")
            + path.decode("latin-1")
            + ("?" + query.decode("latin-1") if query else "")
        )
        try:
            answer = await http.request(
                scope["method"],
                url,
                content=body,
                headers=[(k, v) for k, v in headers.items() if k.lower() not in _NOT_PASSED]
                + [(FORWARDED_HEADER, election.url or election.holder)],
            )
        except (httpx.HTTPError, httpx.InvalidURL):
            await _no_leader(scope, _no_receive, send, forwarded=False, tried=target)
            return
        passed = [
            (k.encode("latin-1"), v.encode("latin-1"))
            for k, v in answer.headers.multi_items()
            if k.lower() not in _NOT_PASSED and k.lower() != "content-encoding"
        ]
        passed.append((b"content-length", str(len(answer.content)).encode()))
        await send({"type": "http.response.start", "status": answer.status_code, "headers": passed})
        await send({"type": "http.response.body", "body": answer.content})


async def _body(receive: Receive) -> bytes | None:
    """The whole request body (bounded by :class:`BodyLimits`, outside this middleware), or
    None if the client disconnected before sending all of it."""
    chunks: list[bytes] = []
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _no_leader(
    scope: Scope, receive: Receive, send: Send, *, forwarded: bool, tried: str | None = None
) -> None:
    hint = "retry in a second"
    if forwarded:
        msg = "this replica was sent a request for the leader, but it does not lead"
        hint = (
            "retry in a second; if this persists, a replica's --advertise-url reaches another "
            "replica (a load balancer?): each must name the replica itself"
        )
    elif tried is not None:
        msg = f"this replica does not lead, and the leader at {tried} cannot be reached"
    else:
        msg = "no replica leads the control plane right now (an election is under way)"
    response = error_response(NotLeaderError(msg, hint=hint))
    await response(scope, receive, send)


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}
