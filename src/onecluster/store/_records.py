"""What the store hands out and takes in: frozen values, never live ORM rows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "AgentReport",
    "Assignment",
    "EventRecord",
    "GangMember",
    "LogChunk",
    "PlacedPart",
    "PreemptOrder",
    "SiteRecord",
    "StartOrder",
    "SyncReport",
    "TokenRecord",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteRecord:
    """A site as its agent last reported it; ``down`` once its lease ran out unrenewed."""

    site: str
    agent_id: str
    backend: str
    last_heartbeat: float
    capacity: Mapping[str, int]
    down: bool
    #: Why the site's cluster cannot take work now; the site is degraded while it is set.
    problem: str | None = None
    #: The lease granted with the last sync (the site is its own until ``last_heartbeat``
    #: plus this).
    lease_s: float = 10.0

    def lease_ended(self, now: float) -> bool:
        """Whether the lease of the last sync has run out at ``now``."""
        return now - self.last_heartbeat > self.lease_s


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenRecord:
    """An API token without its secret."""

    id: str
    role: str
    team: str | None
    site: str | None
    created_at: float
    revoked: bool
    holder: str | None = None


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
    ``started_at``/``finished_at``: when it really ran, by the site's clock.  ``refused``: the
    agent will not run it, for ``reason``.
    """

    attempt_id: str
    state: Literal["running", "exited", "lost", "refused"]
    exit_code: int | None = None
    reason: str | None = None
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
class GangMember:
    """One site of a job's gang, as an attempt there is told of it: the site, where its agent
    said other sites reach it (``None``: it announced no address), and its GPUs."""

    site: str
    address: str | None
    gpus: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Assignment:
    """An attempt the server wants at a site: ``run`` it (once) or ``stop`` it.

    ``handed_to``: the agent it was first handed to (only that one may start it).
    ``gang``: every site of the job's run in part order (a member's index is its site rank);
    ``()`` stands for a gang of this attempt alone.  ``checkpoint_interval_s``: how often the
    job said it saves its state (``None``: it did not say).
    """

    attempt_id: str
    job_id: str
    site: str
    action: Literal["run", "stop"]
    command: tuple[str, ...]
    gpu_type: str
    gpus: int
    reason: str | None
    handed_to: str | None = None
    workdir: str | None = None
    #: The directory of the job's dataset at the site (``$ONECLUSTER_DATASET_DIR``).
    dataset_dir: str | None = None
    gang: tuple[GangMember, ...] = ()
    checkpoint_interval_s: float | None = None
