"""Usage records: what one attempt (run) of a job consumed, the input of every report."""

from __future__ import annotations

from dataclasses import dataclass

from onecluster.errors import ValidationError

__all__ = ["UsageRecord"]


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageRecord:
    """One attempt of a job: ``gpus`` GPUs of ``gpu_type`` at ``site`` from ``started_at`` to
    ``finished_at`` (epoch seconds; for an attempt still running the caller passes *now*).

    ``waited_s`` is how long the job queued before this attempt started; ``borrowed`` says the
    attempt ran beyond the team's quota on idle GPUs.  Construction raises
    :class:`ValidationError` for an attempt that ends before it starts, or for negative or
    zero quantities.
    """

    job_id: str
    team: str
    site: str
    gpu_type: str
    gpus: int
    started_at: float
    finished_at: float
    cost_per_gpu_hour: float
    borrowed: bool = False
    waited_s: float = 0.0

    def __post_init__(self) -> None:
        if self.gpus < 1:
            msg = f"usage record of job {self.job_id} has {self.gpus} GPUs; it needs at least 1"
            raise ValidationError(msg)
        if self.finished_at < self.started_at:
            msg = (
                f"usage record of job {self.job_id} finishes at {self.finished_at}, "
                f"before it starts at {self.started_at}"
            )
            raise ValidationError(msg)
        if self.cost_per_gpu_hour < 0:
            msg = f"usage record of job {self.job_id} has a negative cost per GPU-hour"
            raise ValidationError(msg)
        if self.waited_s < 0:
            msg = f"usage record of job {self.job_id} has a negative queue wait"
            raise ValidationError(msg)

    def gpu_hours_within(self, start: float, end: float) -> float:
        """GPU-hours of this attempt that fall inside ``[start, end)``."""
        overlap = min(self.finished_at, end) - max(self.started_at, start)
        return max(overlap, 0.0) * self.gpus / 3600.0

    def touches(self, start: float, end: float) -> bool:
        """Whether the attempt ran (or started) inside ``[start, end)``."""
        if start <= self.started_at < end:
            return True
        return self.started_at < end and self.finished_at > start
