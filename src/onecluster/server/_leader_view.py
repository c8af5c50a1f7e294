"""``GET /api/v1/cluster/leader``: the leadership lease and the replicas, as the API shows them."""

from __future__ import annotations

from onecluster.schema import LeaderOut, ServerOut
from onecluster.server._control import ControlPlane
from onecluster.server._election import Election

__all__ = ["leader_out"]

#: A replica not heard from for this long is not listed.
_SEEN_WITHIN_S = 10.0


def leader_out(control: ControlPlane, election: Election) -> LeaderOut:
    """Who leads (read from the database now), which replica answers, and the replicas seen
    in the last ten seconds."""
    lease = control.store.leader()
    servers = control.store.servers(seen_since=control.clock.now() - _SEEN_WITHIN_S)
    holder = None if lease.vacant else lease.holder
    return LeaderOut(
        leader=None if lease.vacant else lease.url,
        leader_id=holder,
        term=lease.term,
        since=None if lease.vacant else lease.since,
        expires_in_s=None if lease.vacant else round(lease.expires_at - lease.now, 3),
        answered_by=election.url or "",
        answered_by_id=election.holder,
        role="leader" if election.leading else "follower",
        servers=[
            ServerOut(
                id=s.id,
                url=s.url,
                version=s.version,
                started_at=s.started_at,
                seen_at=s.seen_at,
                leads=s.id == holder,
            )
            for s in servers
        ],
    )
