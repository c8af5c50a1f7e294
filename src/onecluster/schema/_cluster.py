"""Cluster bodies: sites, teams and the statistics the dashboard reads."""

from __future__ import annotations

from pydantic import BaseModel

from onecluster.model import SiteStatus

__all__ = ["HealthOut", "PoolOut", "SiteOut", "SiteStatsOut", "StatsOut", "TeamOut"]


class HealthOut(BaseModel):
    """``GET /healthz``."""

    status: str


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
    """``GET /stats``: a snapshot of the whole cluster."""

    gpus_total: int
    gpus_busy: int
    utilization: float
    pending: int
    running: int
    completed: int
    failed: int
    cancelled: int
    preemptions: int
    mean_wait_s: float
    p95_wait_s: float
    sites: dict[str, SiteStatsOut]
