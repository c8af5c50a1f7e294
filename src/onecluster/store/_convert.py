"""Rows → records (the only place that reads ORM rows into values)."""

from __future__ import annotations

from onecluster.model import (
    AttemptRecord,
    AttemptState,
    JobRecord,
    JobState,
    PriorityClass,
    SitePart,
)
from onecluster.store._records import SiteRecord
from onecluster.store._tables import AgentRow, AttemptRow, JobRow

__all__ = ["attempt_record", "job_record", "parts_json", "site_record"]


def job_record(row: JobRow) -> JobRecord:
    """The value of a job row."""
    return JobRecord(
        id=row.id,
        name=row.name,
        team=row.team,
        state=JobState(row.state),
        gpus=row.gpus,
        gpu_types=tuple(row.gpu_types),
        duration_s=row.duration_s,
        dataset=row.dataset,
        dataset_bytes=row.dataset_bytes,
        priority=PriorityClass(row.priority),
        preemptible=row.preemptible,
        command=tuple(row.command),
        max_sites=row.max_sites,
        submitted_at=row.submitted_at,
        queued_at=row.queued_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        exit_code=row.exit_code,
        reason=row.reason,
        attempts=row.attempts,
        preemptions=row.preemptions,
        borrowed=row.borrowed,
        parts=tuple(
            SitePart(site=p["site"], gpu_type=p["gpu_type"], gpus=int(p["gpus"])) for p in row.parts
        ),
        expected_start_at=row.expected_start_at,
        workdir=row.workdir,
    )


def attempt_record(row: AttemptRow) -> AttemptRecord:
    """The value of an attempt row."""
    return AttemptRecord(
        id=row.id,
        job_id=row.job_id,
        run=row.run,
        site=row.site,
        gpu_type=row.gpu_type,
        gpus=row.gpus,
        state=AttemptState(row.state),
        stop_reason=row.stop_reason,
        exit_code=row.exit_code,
        started_at=row.started_at,
        finished_at=row.finished_at,
        borrowed=row.borrowed,
        preemptible=row.preemptible,
        waited_s=row.waited_s,
        cost_per_gpu_hour=row.cost_per_gpu_hour,
        cost=row.cost,
        ran_from=row.ran_from,
        ran_until=row.ran_until,
    )


def site_record(row: AgentRow) -> SiteRecord:
    """The value of an agent row."""
    return SiteRecord(
        site=row.site,
        agent_id=row.agent_id,
        backend=row.backend,
        last_heartbeat=row.last_heartbeat,
        capacity=dict(row.capacity),
        down=row.down,
        problem=row.problem,
        lease_s=row.lease_s,
    )


def parts_json(parts: tuple[SitePart, ...]) -> list[dict[str, object]]:
    """Parts as stored in a JSON column."""
    return [{"site": p.site, "gpu_type": p.gpu_type, "gpus": p.gpus} for p in parts]
