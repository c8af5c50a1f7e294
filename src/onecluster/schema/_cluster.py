"""Cluster bodies: sites, teams and the statistics the dashboard reads."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from onecluster.model import SiteStatus

__all__ = [
    "HealthOut",
    "LeaderOut",
    "PoolOut",
    "ServerOut",
    "SiteOut",
    "SiteStatsOut",
    "StatsOut",
    "TeamOut",
    "WhoAmIOut",
]


class HealthOut(BaseModel):
    """``GET /healthz``: ``role`` is ``leader`` or ``follower`` (the replica answering),
    ``leader`` the leader's URL (None while nobody leads or it gave none), ``term`` the
    leadership term this replica last saw."""

    status: str
    role: Literal["leader", "follower"] = "leader"
    leader: str | None = None
    term: int = 0


class ServerOut(BaseModel):
    """A server replica seen in the last ten seconds."""

    id: str
    url: str | None
    version: str
    started_at: float
    seen_at: float
    leads: bool


class LeaderOut(BaseModel):
    """``GET /api/v1/cluster/leader``: who leads the control plane, since when and in which
    term (``leader`` None while the lease is vacant), which replica answered, and every
    replica seen lately."""

    leader: str | None
    leader_id: str | None
    term: int
    since: float | None
    expires_in_s: float | None
    answered_by: str
    answered_by_id: str
    role: Literal["leader", "follower"]
    servers: list[ServerOut]


class PoolOut(BaseModel):
    """One GPU pool of a site and how many of its GPUs are held by attempts now;
    ``draining``: it takes no new work (``onecluster drain``, the pool's or its site's)."""

    gpu_type: str
    count: int
    cost_per_gpu_hour: float
    used: int
    draining: bool = False


class SiteOut(BaseModel):
    """A site, its agent's status and its pools.

    ``status`` is ``unknown`` until the site's agent first syncs, ``down`` once it has not
    synced for ``agent_timeout_s``, ``degraded`` while its agent reports that the site's
    cluster cannot take work (``problem`` says why): nothing new is placed there, what runs
    there keeps running.  ``draining``: an operator drained the whole site
    (``onecluster drain``), with the same effect.
    """

    name: str
    region: str
    jurisdiction: str
    backend: str
    status: SiteStatus
    problem: str | None = None
    last_heartbeat: float | None
    pools: list[PoolOut]
    draining: bool = False


class TeamOut(BaseModel):
    """A team, its quota and the GPUs it holds now (``borrowed``: held beyond its quota)."""

    name: str
    home_site: str
    weight: float
    quota: dict[str, int] | None
    usage: dict[str, int]
    borrowed: dict[str, int]


class SiteStatsOut(BaseModel):
    """Per-site figures in :class:`StatsOut` (``pending``: pending jobs of teams homed here)."""

    gpus: int
    busy: int
    pending: int


class StatsOut(BaseModel):
    """``GET /stats``: a snapshot of the whole cluster.  ``running`` counts the jobs that hold
    GPUs, among them ``borrowed`` (running on GPUs lent beyond their team's guarantee) and
    ``waiting_for_data`` (holding GPUs while their dataset comes)."""

    gpus_total: int
    gpus_busy: int
    utilization: float
    pending: int
    running: int
    borrowed: int = 0
    waiting_for_data: int = 0
    completed: int
    failed: int
    cancelled: int
    preemptions: int
    mean_wait_s: float
    p95_wait_s: float
    sites: dict[str, SiteStatsOut]


class WhoAmIOut(BaseModel):
    """``GET /api/v1/whoami``: the caller's role and, for members and agents, their team or
    site; ``holder`` is who the token was minted for.  The dashboard shows what the role
    may see from it (the API enforces it anyway)."""

    role: str
    team: str | None
    site: str | None
    holder: str | None
