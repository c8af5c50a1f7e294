"""Rows → records (the only place that reads ORM rows into values)."""

from __future__ import annotations

from typing import Any, cast

from onecluster.model import (
    AttemptRecord,
    AttemptState,
    JobRecord,
    JobState,
    PriorityClass,
    SitePart,
)
from onecluster.store._data_records import (
    PathSample,
    ReplicaRecord,
    ScanRecord,
    ScanState,
    TransferRecord,
    TransferState,
    VersionRecord,
)
from onecluster.store._records import SiteRecord
from onecluster.store._tables import (
    AgentRow,
    AttemptRow,
    JobRow,
    ReplicaRow,
    ScanRow,
    TransferRow,
    VersionRow,
)

__all__ = [
    "attempt_record",
    "job_record",
    "parts_json",
    "paths_json",
    "replica_record",
    "scan_record",
    "site_parts",
    "site_record",
    "transfer_record",
    "version_record",
]


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
        parts=site_parts(row.parts),
        expected_start_at=row.expected_start_at,
        workdir=row.workdir,
        checkpoint_interval_s=row.checkpoint_interval_s,
        checkpoint_on_sigterm=row.checkpoint_on_sigterm,
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
        preempted=row.preempted,
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


def site_parts(stored: list[dict[str, Any]]) -> tuple[SitePart, ...]:
    """Parts from a JSON column (what :func:`parts_json` wrote), in their stored order."""
    return tuple(
        SitePart(site=p["site"], gpu_type=p["gpu_type"], gpus=int(p["gpus"])) for p in stored
    )


def version_record(row: VersionRow, replicas: tuple[ReplicaRecord, ...] = ()) -> VersionRecord:
    """The value of a version row, with the replicas given."""
    return VersionRecord(
        dataset=row.dataset,
        root=row.root,
        bytes=row.bytes,
        files=row.files,
        chunks=row.chunks,
        created_at=row.created_at,
        site=row.site,
        replicas=replicas,
    )


def replica_record(row: ReplicaRow) -> ReplicaRecord:
    """The value of a replica row."""
    return ReplicaRecord(
        dataset=row.dataset,
        root=row.root,
        site=row.site,
        state="complete" if row.state == "complete" else "partial",
        bytes_present=row.bytes_present,
        path=row.path,
        updated_at=row.updated_at,
    )


def scan_record(row: ScanRow) -> ScanRecord:
    """The value of a scan row."""
    return ScanRecord(
        id=row.id,
        dataset=row.dataset,
        site=row.site,
        path=row.path,
        state=cast("ScanState", row.state),
        files_done=row.files_done,
        bytes_done=row.bytes_done,
        files_total=row.files_total,
        bytes_total=row.bytes_total,
        root=row.root,
        new_version=row.new_version,
        error=row.error,
        created_at=row.created_at,
        finished_at=row.finished_at,
        export_id=row.export_id,
        source_dataset=row.source_dataset,
        source_root=row.source_root,
        profile=row.profile,
    )


def transfer_record(row: TransferRow) -> TransferRecord:
    """The value of a transfer row."""
    return TransferRecord(
        id=row.id,
        dataset=row.dataset,
        root=row.root,
        src=row.src,
        dst=row.dst,
        reason="prefetch" if row.reason == "prefetch" else "push",
        job_id=row.job_id,
        state=cast("TransferState", row.state),
        bytes_total=row.bytes_total,
        bytes_done=row.bytes_done,
        bytes_sent=row.bytes_sent,
        bytes_local=row.bytes_local,
        chunks_total=row.chunks_total,
        chunks_done=row.chunks_done,
        chunks_sent=row.chunks_sent,
        paths=tuple(
            PathSample(
                name=str(p.get("name", "")),
                bytes=int(p.get("bytes", 0)),
                streams=int(p.get("streams", 0)),
                state=str(p.get("state", "running")),
            )
            for p in row.paths
        ),
        rate_bps=row.rate_bps,
        error=row.error,
        ticket=row.ticket,
        created_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
    )


def paths_json(paths: tuple[PathSample, ...]) -> list[dict[str, object]]:
    """Path reports as stored in a JSON column."""
    return [
        {"name": p.name, "bytes": p.bytes, "streams": p.streams, "state": p.state} for p in paths
    ]
