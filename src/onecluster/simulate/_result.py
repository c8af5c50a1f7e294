"""What a simulation run measured: a frozen summary with per-team and per-site breakdowns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["SimResult", "SiteStats", "TeamStats"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TeamStats:
    """One team's jobs in a run.  Waits and JCTs are over its completed jobs."""

    jobs: int
    completed: int
    gpu_s: float
    mean_wait_s: float
    p95_wait_s: float
    mean_jct_s: float
    preemptions: int
    borrowed_starts: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteStats:
    """One site in a run: ``utilization`` is busy GPU-seconds ÷ (its GPUs × makespan)."""

    gpus: int
    busy_gpu_s: float
    utilization: float
    starts: int
    bytes_in: int
    peak_gpus: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SimResult:
    """The outcome of :func:`simulate`.

    ``gpu_utilization`` = busy GPU-seconds (GPUs held, staging and preemption grace included)
    ÷ (the fabric's GPUs × ``makespan_s``, first arrival to last completion);
    ``window_utilization`` counts only the ``arrival_span_s`` from the first to the last
    arrival, the steady state without the ramp-down after the last arrival.  Both stay under
    the workload's offered load (its GPU-seconds ÷ (GPUs × arrival span)) by the work that
    runs after the last arrival: the tail of jobs that started late in the span.  ``wait`` is the
    time a job spent queued, summed over its attempts; ``jct`` is submit to completion.
    ``lost_gpu_s`` is work thrown away by preemptions (what checkpoints kept is not lost).
    ``reclaims`` counts preemptions of borrowed work for an owner; ``reclaim_*_s`` is the
    time from the owner's queueing until the borrowed GPUs were free (bounded by the grace
    when the owner reclaims on arrival).  ``peak_usage`` maps ``site/type`` to
    the most GPUs ever held there at once (never above the pool's size).  ``warnings`` are
    sentences for the user (e.g. trace teams the fabric lacks).
    """

    policy: str
    seed: int
    jobs: int
    jobs_completed: int
    jobs_rejected: int
    gpu_utilization: float
    window_utilization: float
    mean_wait_s: float
    p95_wait_s: float
    mean_jct_s: float
    p95_jct_s: float
    preemptions: int
    bytes_moved: int
    makespan_s: float
    arrival_span_s: float
    busy_gpu_s: float
    lost_gpu_s: float
    passes: int
    reclaims: int = 0
    reclaim_p99_s: float = 0.0
    reclaim_max_s: float = 0.0
    sim_wall_s: float
    teams: Mapping[str, TeamStats] = field(default_factory=dict)
    sites: Mapping[str, SiteStats] = field(default_factory=dict)
    peak_usage: Mapping[str, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("teams", "sites", "peak_usage"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    @property
    def jobs_per_second(self) -> float:
        """Simulated jobs per second of wall time."""
        return self.jobs / self.sim_wall_s if self.sim_wall_s > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        """The result as plain JSON-ready data (numbers rounded for reading)."""
        out: dict[str, Any] = {}
        for key in (
            "policy",
            "seed",
            "jobs",
            "jobs_completed",
            "jobs_rejected",
            "gpu_utilization",
            "window_utilization",
            "mean_wait_s",
            "p95_wait_s",
            "mean_jct_s",
            "p95_jct_s",
            "preemptions",
            "bytes_moved",
            "makespan_s",
            "arrival_span_s",
            "busy_gpu_s",
            "lost_gpu_s",
            "reclaims",
            "reclaim_p99_s",
            "reclaim_max_s",
            "passes",
            "sim_wall_s",
        ):
            out[key] = _round(getattr(self, key))
        out["jobs_per_second"] = _round(self.jobs_per_second)
        out["teams"] = {k: _rounded(asdict(v)) for k, v in sorted(self.teams.items())}
        out["sites"] = {k: _rounded(asdict(v)) for k, v in sorted(self.sites.items())}
        out["peak_usage"] = dict(sorted(self.peak_usage.items()))
        out["warnings"] = list(self.warnings)
        return out


def _round(value: object) -> object:
    return round(value, 4) if isinstance(value, float) else value


def _rounded(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _round(v) for k, v in values.items()}
