"""Agent sync bodies: what a site agent reports and the desired attempts it gets back."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from onecluster.schema._bounds import (
    MAX_LOG_CHARS,
    REPORT,
    Count,
    ExitCode,
    GpuCount,
    GpuType,
    Id,
)
from onecluster.schema._data import DataOrders, DataReport
from onecluster.schema._links import IPv4, LinkReport, PeerOut, RouteTableOut

#: Most attempts one sync may report: an attempt holds at least one GPU, and no site of any
#: fabric we know runs 100,000 at once.
MAX_ATTEMPTS_PER_SYNC = 100_000
#: Most log chunks in one sync (the agent ships one per attempt per sync).
MAX_LOG_CHUNKS_PER_SYNC = 10_000

__all__ = ["AgentSync", "AgentSyncReply", "AttemptReport", "DesiredAttempt", "LogChunkIn"]


class AttemptReport(BaseModel):
    """One attempt as the agent sees it; ``exited`` carries ``exit_code``.

    ``lost``: the agent cannot follow it, or stopped it itself (its lease ran out, it shut
    down), or it was handed to an earlier agent of the site — it did not fail on its own, and
    its job is requeued.  ``refused``: the agent will not run it (the order is malformed);
    ``reason`` says why and the job fails with it.

    ``queued``: the site's cluster manager (Slurm, Kubernetes) holds it but has not started
    it yet — still ``running`` for onecluster, with the manager's ``expected_start_at`` and
    ``waiting_reason`` when it gives them.  ``started_at``/``finished_at`` are when it really
    ran, by the site's clock (epoch seconds): GPU-hours count that span.
    """

    model_config = REPORT

    attempt_id: Id
    job_id: Id
    state: Literal["running", "exited", "lost", "refused"]
    exit_code: ExitCode | None = None
    reason: str | None = Field(default=None, max_length=500)
    started_at: float | None = Field(default=None, allow_inf_nan=False)
    finished_at: float | None = Field(default=None, allow_inf_nan=False)
    queued: bool = False
    expected_start_at: float | None = Field(default=None, allow_inf_nan=False)
    waiting_reason: str | None = Field(default=None, max_length=500)


class LogChunkIn(BaseModel):
    """Output of an attempt from character ``offset`` of that attempt's log."""

    model_config = REPORT

    attempt_id: Id
    offset: Count
    data: str = Field(max_length=MAX_LOG_CHARS)


class AgentSync(BaseModel):
    """``POST /agents/{site}/sync``: the agent's observed state (level-triggered, idempotent)."""

    model_config = REPORT

    agent_id: Id
    backend: str = Field(default="local", min_length=1, max_length=32)
    #: GPUs the site's cluster really has, per type (0 to 10⁶ each).
    capacity: dict[GpuType, GpuCount] = Field(default_factory=dict, max_length=64)
    #: Why the site's cluster cannot take work now (its manager does not answer, refuses
    #: jobs …): the site is *degraded*, nothing new is placed there.  ``None``: it can.
    problem: str | None = Field(default=None, max_length=2000)
    attempts: list[AttemptReport] = Field(default_factory=list, max_length=MAX_ATTEMPTS_PER_SYNC)
    logs: list[LogChunkIn] = Field(default_factory=list, max_length=MAX_LOG_CHUNKS_PER_SYNC)
    #: The site's own address for traffic from other sites (routes point at it), if any.
    service_address: IPv4 | None = None
    #: Probe results per circuit of the site (empty: this agent does not probe).
    links: list[LinkReport] = Field(default_factory=list, max_length=1000)
    #: The agent's monotonic clock when it built this body: the server maps the probes'
    #: send times through the smallest (server time − this) it has seen from the agent.
    probe_clock_s: float | None = Field(default=None, allow_inf_nan=False)
    #: The data plane: its endpoint, scans, transfers and replicas (``None``: this agent
    #: has none).
    data: DataReport | None = None


class DesiredAttempt(BaseModel):
    """An attempt the server wants at the site: ``run`` it (once) or ``stop`` it."""

    attempt_id: str
    job_id: str
    action: Literal["run", "stop"]
    command: list[str]
    gpu_type: str
    gpus: int
    env: dict[str, str]
    grace_s: float = Field(ge=0, allow_inf_nan=False)
    reason: str | None = None
    #: The id of the agent process this attempt was first handed to.  An agent that is not
    #: that one and does not hold the attempt never starts it (its predecessor may have): it
    #: reports it ``lost``.
    handed_to: str | None = None
    #: Where the attempt's command runs (a directory at the site); ``None``: a scratch
    #: directory of its own.
    workdir: str | None = None


class AgentSyncReply(BaseModel):
    """The desired set of attempts at the site; anything the agent has beyond it, it stops."""

    heartbeat_interval_s: float = Field(gt=0, allow_inf_nan=False)
    attempts: list[DesiredAttempt]
    #: The lease this sync grants the site: for this long after the server recorded it, the
    #: site's work is given to no other site.  An agent that cannot renew it stops its
    #: attempts before it runs out (counting from when it sent the sync), so no job runs twice.
    lease_s: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    #: Where the far ends of the site's circuits take probes (those announced so far).
    peers: list[PeerOut] = Field(default_factory=list)
    #: The site's routes to every other site, to follow.
    routes: RouteTableOut | None = None
    #: Why link reports of this sync were ignored (a circuit that does not reach the site …);
    #: the rest of the sync was taken.
    refused_links: list[str] = Field(default_factory=list)
    #: What the site's data plane should do: scans, transfers to receive, transfers to serve.
    data: DataOrders = Field(default_factory=DataOrders)
