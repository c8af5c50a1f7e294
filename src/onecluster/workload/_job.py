"""One job of a workload trace, as read from a file or drawn by the generator."""

from __future__ import annotations

from dataclasses import dataclass

from onecluster.errors import ValidationError
from onecluster.model import JobSpec, PriorityClass

__all__ = ["TraceJob"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceJob:
    """A job of a trace: when it arrives, how long it runs, what it needs.

    ``submit_time`` and ``duration_s`` are seconds (submit times are relative to the start of
    the trace).  ``gpu_types`` lists acceptable GPU types (empty: any).  ``home_site`` is the
    site the job's team calls home when the trace says so, else ``None``.  ``name`` is the
    job's name in the trace (e.g. the Alibaba pod name), kept for reference only.  The
    checkpoint fields, ``max_sites``, ``priority`` and ``preemptible`` are the job's own
    (:class:`~onecluster.model.JobSpec`).

    Construction raises :class:`ValidationError` for a negative submit time, a non-positive
    duration, fewer than one GPU or a negative dataset size.
    """

    submit_time: float
    duration_s: float
    gpus: int
    team: str
    gpu_types: tuple[str, ...] = ()
    dataset: str | None = None
    dataset_bytes: int = 0
    home_site: str | None = None
    name: str = ""
    checkpoint_interval_s: float | None = None
    checkpoint_on_sigterm: bool = False
    max_sites: int = 1
    priority: PriorityClass = PriorityClass.NORMAL
    preemptible: bool = False

    def __post_init__(self) -> None:
        if not self.submit_time >= 0:
            msg = f"the submit time must not be negative (got {self.submit_time})"
            raise ValidationError(msg)
        if not self.duration_s > 0:
            msg = f"the duration must be greater than 0 seconds (got {self.duration_s})"
            raise ValidationError(msg)
        if not isinstance(self.gpus, int) or self.gpus < 1:
            msg = f"a job needs at least 1 GPU (got {self.gpus})"
            raise ValidationError(msg)
        if self.dataset_bytes < 0:
            msg = f"the dataset size must not be negative (got {self.dataset_bytes} bytes)"
            raise ValidationError(msg)

    def to_spec(self, name: str = "job") -> JobSpec:
        """The :class:`JobSpec` this trace job submits; :class:`ValidationError` if invalid
        (e.g. a team or dataset name the platform does not accept)."""
        return JobSpec(
            team=self.team,
            gpus=self.gpus,
            duration_s=self.duration_s,
            name=name,
            gpu_types=self.gpu_types,
            dataset=self.dataset,
            dataset_bytes=self.dataset_bytes,
            checkpoint_interval_s=self.checkpoint_interval_s,
            checkpoint_on_sigterm=self.checkpoint_on_sigterm,
            max_sites=self.max_sites,
            priority=self.priority,
            preemptible=self.preemptible,
        )
