"""What the store hands out and takes in: frozen values, never live ORM rows."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from onecluster.model import JobSpec, JobState, PriorityClass, SitePart

__all__ = [
    "ACTIVE_ATTEMPT_STATES",
    "AgentReport",
    "Assignment",
    "AttemptRecord",
    "AttemptState",
    "EventRecord",
    "JobRecord",
    "LogChunk",
    "PlacedPart",
    "PreemptOrder",
    "SiteRecord",
    "StartOrder",
    "SyncReport",
    "TokenRecord",
]


class AttemptState(enum.StrEnum):
    """Where one attempt (one part of one run of a job) is: ``starting`` until its agent
    reports it running, ``stopping`` once told to stop, ``exited`` or ``lost`` at the end."""

    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    EXITED = "exited"
    LOST = "lost"


#: Attempts that still hold their GPUs.
ACTIVE_ATTEMPT_STATES = frozenset(
    {AttemptState.STARTING, AttemptState.RUNNING, AttemptState.STOPPING}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRecord:
    """A job as stored: its spec, its state and its current (or last) placement."""

    id: str
    name: str
    team: str
    state: JobState
    gpus: int
    gpu_types: tuple[str, ...]
    duration_s: float
    dataset: str | None
    dataset_bytes: int
    priority: PriorityClass
    preemptible: bool
    command: tuple[str, ...]
    max_sites: int
    submitted_at: float
    queued_at: float
    started_at: float | None
    finished_at: float | None
    exit_code: int | None
    reason: str | None
    attempts: int
    preemptions: int
    borrowed: bool
    parts: tuple[SitePart, ...]
    #: While the site's cluster manager queues it: when it expects to start it, if it says.
    expected_start_at: float | None = None

    def spec(self) -> JobSpec:
        """The job's spec, as submitted."""
        return JobSpec(
            team=self.team,
            gpus=self.gpus,
            duration_s=self.duration_s,
            name=self.name,
            gpu_types=self.gpu_types,
            dataset=self.dataset,
            dataset_bytes=self.dataset_bytes,
            priority=self.priority,
            preemptible=self.preemptible,
            command=self.command,
            max_sites=self.max_sites,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptRecord:
    """One part of one run of a job at one site (``run`` counts the job's runs from 1)."""

    id: str
    job_id: str
    run: int
    site: str
    gpu_type: str
    gpus: int
    state: AttemptState
    stop_reason: str | None
    exit_code: int | None
    started_at: float
    finished_at: float | None
    borrowed: bool
    preemptible: bool
    waited_s: float
    cost_per_gpu_hour: float
    cost: float
    ran_from: float | None = None
    ran_until: float | None = None

    def billed_span(self, now: float) -> tuple[float, float]:
        """The span its GPUs count for in reports: when it really ran under the site's
        cluster manager where the agent said so, else from its start by onecluster to its end
        (``now`` for one still active)."""
        start = self.ran_from if self.ran_from is not None else self.started_at
        end = self.ran_until if self.ran_until is not None else self.finished_at
        if end is None:
            end = now
        return start, max(end, start)


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteRecord:
    """A site as its agent last reported it; ``down`` once it missed ``agent_timeout_s``."""

    site: str
    agent_id: str
    backend: str
    last_heartbeat: float
    capacity: Mapping[str, int]
    down: bool
    #: Why the site's cluster cannot take work now; the site is degraded while it is set.
    problem: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenRecord:
    """An API token without its secret."""

    id: str
    role: str
    team: str | None
    site: str | None
    created_at: float
    revoked: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class EventRecord:
    """Something that happened, for the record; ``id`` grows with every event."""

    time: float
    kind: str
    job_id: str | None
    message: str
    id: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacedPart:
    """A :class:`SitePart` with the price of its GPUs, as a start order carries it."""

    site: str
    gpu_type: str
    gpus: int
    cost_per_gpu_hour: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class StartOrder:
    """Start a run of pending job ``job_id`` on ``parts`` (one attempt per part)."""

    job_id: str
    parts: tuple[PlacedPart, ...]
    borrowed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class PreemptOrder:
    """Stop the running job ``job_id`` so that its GPUs go to other work; it is requeued."""

    job_id: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentReport:
    """One attempt as an agent sees it.

    ``queued``: the site's cluster manager holds it but has not started it (it may say when
    it expects to, ``expected_start_at``, and why it waits, ``waiting_reason``).
    ``started_at``/``finished_at``: when it really ran, by the site's clock.
    """

    attempt_id: str
    state: Literal["running", "exited", "lost"]
    exit_code: int | None = None
    queued: bool = False
    expected_start_at: float | None = None
    waiting_reason: str | None = None
    started_at: float | None = None
    finished_at: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LogChunk:
    """Output of an attempt from character ``offset`` of that attempt's own log."""

    attempt_id: str
    offset: int
    data: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncReport:
    """Everything one agent sync carries."""

    agent_id: str
    backend: str = "local"
    capacity: Mapping[str, int] = field(default_factory=dict)
    attempts: tuple[AgentReport, ...] = ()
    logs: tuple[LogChunk, ...] = ()
    #: Why the site's cluster cannot take work now (``None``: it can).
    problem: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Assignment:
    """An attempt the server wants at a site: ``run`` it (once) or ``stop`` it."""

    attempt_id: str
    job_id: str
    site: str
    action: Literal["run", "stop"]
    command: tuple[str, ...]
    gpu_type: str
    gpus: int
    reason: str | None
