"""The agent sync route: a site's agent reports what it runs and learns what it should run.

The caller is authenticated as the site's agent before the body is read at all (the route
class below), so a stranger learns nothing from how a body is refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.routing import APIRoute

from onecluster.errors import NotLeaderError
from onecluster.schema import AgentSync, AgentSyncReply, ErrorOut
from onecluster.server._deps import Caller, Control, Elected, principal_of
from onecluster.store import fenced

__all__ = ["router"]


class _AgentFirst(APIRoute):
    """A route that checks for the agent token of the path's site before FastAPI reads and
    validates the body (it would otherwise answer a malformed body before a missing token)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def authenticated(request: Request) -> Response:
            caller = await principal_of(request)
            caller.require_agent_of(str(request.path_params.get("site", "")))
            return await handle(request)

        return authenticated


router = APIRouter(prefix="/api/v1/agents", tags=["agents"], route_class=_AgentFirst)


@router.post(
    "/{site}/sync",
    responses={
        409: {
            "model": ErrorOut,
            "description": "This agent was replaced at its site by another one; it must stop.",
        }
    },
)
async def sync(
    site: str, body: AgentSync, control: Control, election: Elected, caller: Caller
) -> AgentSyncReply:
    """Record the agent's report (idempotently), renew the site's lease and answer with the
    desired attempts."""
    received = control.clock.now()
    caller.require_agent_of(site)
    # Only the leader takes syncs (a follower forwards them); fenced like its reconcile
    # writes, so a replica deposed meanwhile records nothing.
    term = election.mandate()
    if term is None:
        msg = "this replica stopped leading before it could take the sync"
        raise NotLeaderError(msg, hint="the agent sends it again, to the leader")
    if control.links.office != term:  # elected, and reading the links the leader before left
        msg = "this replica was just elected and has not taken office yet"
        raise NotLeaderError(msg, hint="the agent sends it again in a moment")

    def record() -> AgentSyncReply:
        with fenced(term, election.holder):
            return control.agent_sync(site, body, received=received)

    return await asyncio.to_thread(record)
