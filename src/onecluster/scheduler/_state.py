"""What the scheduler sees (allocations, pending jobs, the cluster view) and what it decides."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from onecluster.model import JobSpec, PriorityClass, SitePart

__all__ = ["Allocation", "ClusterView", "PassStats", "PendingJob", "Plan", "Preempt", "Start"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Allocation:
    """GPUs held by a running job: one :class:`SitePart` per site of its gang.

    ``borrowed`` work runs beyond its team's quota on idle GPUs and is always pre-emptible.
    ``draining`` allocations are being preempted or cancelled; their GPUs stay occupied until
    the process exits.  The checkpoint fields are the job's declaration
    (:class:`~onecluster.model.JobSpec`): what preempting it would lose.
    """

    job_id: str
    team: str
    parts: tuple[SitePart, ...]
    priority: PriorityClass = PriorityClass.NORMAL
    borrowed: bool = False
    preemptible: bool = False
    started_at: float = 0.0
    expected_end: float = 0.0
    draining: bool = False
    checkpoint_interval_s: float | None = None
    checkpoint_on_sigterm: bool = False

    @property
    def gpus(self) -> int:
        """GPUs across every part."""
        return sum(p.gpus for p in self.parts)

    @property
    def victim_class(self) -> bool:
        """Whether anything may preempt this allocation at all."""
        return (self.borrowed or self.preemptible) and not self.draining


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingJob:
    """A job waiting for GPUs; ``pinned_site`` restricts it to one site (e.g. data staged there)."""

    job_id: str
    spec: JobSpec
    submitted_at: float
    pinned_site: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterView:
    """The observed state a scheduling pass decides on.

    ``running`` is either the allocations themselves or an :class:`AllocationLedger` that the
    caller keeps up to date incrementally (the simulator does, so a pass costs nothing per
    running job).  ``replicas`` maps a dataset to the sites holding a complete copy;
    ``circuit_load`` maps a circuit name to the fraction of its capacity in use.
    ``capacity`` maps a pool (site, GPU type) to the GPUs its site reports it really has when
    that is fewer than the fabric declares (GPUs out of service, a smaller test cluster).
    ``closed_sites`` are up but take no new work (their cluster manager is degraded): their
    running work stays, their circuits still carry traffic.  ``closed_pools`` (site, GPU
    type) likewise, one pool at a time: drained by an operator (``onecluster drain``), their
    running work finishes and nothing new is placed or reclaimed there.  ``usage`` maps a
    team to its decayed GPU-seconds at the pass's ``now``
    (:mod:`onecluster.scheduler._usage`); a team missing from it used nothing lately.
    """

    running: Iterable[Allocation] = ()
    down_sites: frozenset[str] = frozenset()
    closed_sites: frozenset[str] = frozenset()
    closed_pools: frozenset[tuple[str, str]] = frozenset()
    replicas: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))
    circuit_load: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    capacity: Mapping[tuple[str, str], int] = field(default_factory=lambda: MappingProxyType({}))
    usage: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True, kw_only=True)
class Start:
    """Start ``job_id`` now on ``parts``.  ``missing_bytes`` of its dataset must be staged first."""

    job_id: str
    parts: tuple[SitePart, ...]
    borrowed: bool
    preemptible: bool
    missing_bytes: int = 0
    staging_s: float = 0.0
    score: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Preempt:
    """Preempt ``job_id`` (grace signal, then requeue) to make room for ``for_job_id``."""

    job_id: str
    for_job_id: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PassStats:
    """Counters of one scheduling pass, for metrics and benchmarks."""

    pending: int = 0
    considered: int = 0
    started: int = 0
    preempted: int = 0
    waiting_on_preemption: int = 0
    blocked_shapes: int = 0
    reservations: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """Everything one pass decided; the caller applies it."""

    starts: tuple[Start, ...] = ()
    preemptions: tuple[Preempt, ...] = ()
    stats: PassStats = PassStats()
