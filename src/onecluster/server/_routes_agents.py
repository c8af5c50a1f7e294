"""The agent sync route: a site's agent reports what it runs and learns what it should run."""

from __future__ import annotations

from fastapi import APIRouter

from onecluster.schema import AgentSync, AgentSyncReply
from onecluster.server._deps import Caller, Control
from onecluster.server._views import desired_attempt
from onecluster.store import AgentReport, LogChunk, SyncReport

__all__ = ["router"]

router = APIRouter(prefix="/api/v1/agents", tags=["agents"])


@router.post("/{site}/sync")
def sync(site: str, body: AgentSync, control: Control, caller: Caller) -> AgentSyncReply:
    """Record the agent's report (idempotently) and answer with the desired attempts."""
    received = control.clock.now()
    caller.require_agent_of(site)
    control.require_site(site)
    report = SyncReport(
        agent_id=body.agent_id,
        backend=body.backend,
        capacity=dict(body.capacity),
        problem=body.problem,
        attempts=tuple(
            AgentReport(
                attempt_id=a.attempt_id,
                state=a.state,
                exit_code=a.exit_code,
                queued=a.queued,
                expected_start_at=a.expected_start_at,
                waiting_reason=a.waiting_reason,
                started_at=a.started_at,
                finished_at=a.finished_at,
            )
            for a in body.attempts
        ),
        logs=tuple(
            LogChunk(attempt_id=c.attempt_id, offset=c.offset, data=c.data) for c in body.logs
        ),
    )
    wanted = control.store.sync(site, report, now=control.clock.now())
    # After the attempts: a bad probe report must never cost a site its jobs (an agent whose
    # syncs fail fences itself); the reports that cannot be taken are named in the reply.
    refused = control.take_link_reports(site, body, received=received)
    return AgentSyncReply(
        heartbeat_interval_s=control.config.heartbeat_interval_s,
        lease_s=control.config.agent_timeout_s,
        attempts=[desired_attempt(a, grace_s=control.config.grace_s) for a in wanted],
        peers=control.links.peers(site),
        routes=control.links.routes(site),
        refused_links=refused,
    )
