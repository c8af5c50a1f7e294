"""Usage records: what one attempt (run) of a job consumed, the input of every report."""

from __future__ import annotations

from dataclasses import dataclass

from onecluster.errors import ValidationError
from onecluster.model import AttemptRecord, JobSpec

__all__ = ["UsageRecord", "usage_record"]


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageRecord:
    """One attempt of a job: ``gpus`` GPUs of ``gpu_type`` at ``site`` from ``started_at`` to
    ``finished_at`` (epoch seconds; for an attempt still running the caller passes *now*).

    ``waited_s`` is how long the job queued before this attempt started; ``borrowed`` says the
    attempt ran beyond the team's quota on idle GPUs; ``lost_s`` is how much of its run a
    preemption threw away (0 for an attempt that was not preempted).  Construction raises
    :class:`ValidationError` for an attempt that ends before it starts, for negative or zero
    quantities, or for more lost than it ran.
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
    lost_s: float = 0.0

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
        if not 0 <= self.lost_s <= self.finished_at - self.started_at:
            msg = (
                f"usage record of job {self.job_id} lost {self.lost_s} s of work; it must be "
                f"between 0 and the {self.finished_at - self.started_at} s it ran"
            )
            raise ValidationError(msg)

    def gpu_hours_within(self, start: float, end: float) -> float:
        """GPU-hours of this attempt that fall inside ``[start, end)``."""
        overlap = min(self.finished_at, end) - max(self.started_at, start)
        return max(overlap, 0.0) * self.gpus / 3600.0

    def lost_gpu_hours_within(self, start: float, end: float) -> float:
        """GPU-hours a preemption lost, counted whole in the period the attempt ended in
        (``start < finished_at <= end``, so that an attempt that :meth:`touches` no period
        never holds a loss): the loss happens at the preemption, however long the run was."""
        if not start < self.finished_at <= end:
            return 0.0
        return self.lost_s * self.gpus / 3600.0

    def touches(self, start: float, end: float) -> bool:
        """Whether the attempt ran (or started) inside ``[start, end)``."""
        if start <= self.started_at < end:
            return True
        return self.started_at < end and self.finished_at > start


def usage_record(attempt: AttemptRecord, team: str, spec: JobSpec, *, now: float) -> UsageRecord:
    """The usage of one attempt of a job of ``team`` with ``spec``, over its billed span
    (:meth:`~onecluster.model.AttemptRecord.billed_span`; ``now`` ends one still active).

    A preempted attempt lost what it ran less what its job's checkpoints keep
    (:meth:`~onecluster.model.JobSpec.kept_after`); any other attempt lost nothing here.
    """
    started, finished = attempt.billed_span(now)
    lost = 0.0
    if attempt.preempted:
        ran = finished - started
        lost = min(max(ran - spec.kept_after(ran), 0.0), ran)
    return UsageRecord(
        job_id=attempt.job_id,
        team=team,
        site=attempt.site,
        gpu_type=attempt.gpu_type,
        gpus=attempt.gpus,
        started_at=started,
        finished_at=finished,
        cost_per_gpu_hour=attempt.cost_per_gpu_hour,
        borrowed=attempt.borrowed,
        waited_s=attempt.waited_s,
        lost_s=lost,
    )
