"""The SQL tables, as SQLAlchemy 2 typed declarative models.

The schema is versioned by the Alembic migrations in ``migrations/versions``; a change here
needs a new migration (``tests/store`` checks that the migrations produce exactly these
tables).  JSON columns hold small lists and maps only (parts, gpu types, commands, capacity,
a transfer's last path reports).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, ForeignKey, ForeignKeyConstraint, Index, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = [
    "AgentRow",
    "ApprovalRow",
    "AttemptRow",
    "Base",
    "DatasetRow",
    "DrainRow",
    "EventRow",
    "ExportRow",
    "FabricEpochRow",
    "FabricRow",
    "JobRow",
    "LogRow",
    "ReplicaRow",
    "ScanRow",
    "TokenRow",
    "TransferRow",
    "VersionRow",
]


class Base(DeclarativeBase):
    """Declarative base of every onecluster table."""


class JobRow(Base):
    """A submitted job: its spec, where it is in its life, and its latest placement."""

    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    team: Mapped[str] = mapped_column(String(64), index=True)
    state: Mapped[str] = mapped_column(String(16), index=True)
    gpus: Mapped[int]
    gpu_types: Mapped[list[str]] = mapped_column(JSON)
    duration_s: Mapped[float]
    dataset: Mapped[str | None] = mapped_column(String(64))
    dataset_bytes: Mapped[int] = mapped_column(BigInteger)
    priority: Mapped[int]
    preemptible: Mapped[bool]
    command: Mapped[list[str]] = mapped_column(JSON)
    max_sites: Mapped[int]
    submitted_at: Mapped[float] = mapped_column(index=True)
    #: When the job last entered the queue (submission or requeue); waits count from here.
    queued_at: Mapped[float]
    started_at: Mapped[float | None]
    finished_at: Mapped[float | None]
    exit_code: Mapped[int | None]
    reason: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(default=0)
    preemptions: Mapped[int] = mapped_column(default=0)
    borrowed: Mapped[bool] = mapped_column(default=False)
    parts: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    log_size: Mapped[int] = mapped_column(default=0)
    #: While the site's cluster manager queues the job: when it expects to start it.
    expected_start_at: Mapped[float | None] = mapped_column(default=None)
    #: Where the job's command runs at its site (``None``: a scratch directory of its own).
    workdir: Mapped[str | None] = mapped_column(Text, default=None)
    #: The job saves its state at least this often (``None``: it declared no interval).
    checkpoint_interval_s: Mapped[float | None] = mapped_column(default=None)
    #: The job saves its state on SIGTERM, within the stop grace.
    checkpoint_on_sigterm: Mapped[bool] = mapped_column(default=False)


class AttemptRow(Base):
    """One part of one run of a job at one site (a run of a gang spanning sites has several).

    ``state``: starting → running → stopping → exited, or lost when its site went down.
    """

    __tablename__ = "attempts"
    __table_args__ = (Index("ix_attempts_site_state", "site", "state"),)

    id: Mapped[str] = mapped_column(String(96), primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), index=True)
    run: Mapped[int]
    site: Mapped[str] = mapped_column(String(64))
    gpu_type: Mapped[str] = mapped_column(String(64))
    gpus: Mapped[int]
    parts: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16), index=True)
    stop_reason: Mapped[str | None] = mapped_column(Text)
    exit_code: Mapped[int | None]
    started_at: Mapped[float]
    finished_at: Mapped[float | None]
    borrowed: Mapped[bool]
    preemptible: Mapped[bool]
    waited_s: Mapped[float]
    cost_per_gpu_hour: Mapped[float]
    cost: Mapped[float] = mapped_column(default=0.0)
    log_size: Mapped[int] = mapped_column(default=0)
    #: When the job really ran under the site's cluster manager (its own clock, kept inside
    #: ``started_at``…``finished_at``); GPU-hours and cost count this span when known.
    ran_from: Mapped[float | None] = mapped_column(default=None)
    ran_until: Mapped[float | None] = mapped_column(default=None)
    #: The agent process the attempt was first handed to; no other agent ever starts it.
    handed_to: Mapped[str | None] = mapped_column(String(128), default=None)
    #: While the attempt waits for its dataset at its site: :data:`STAGE_CHECK` until the
    #: reconcile loop looked, then the id of the transfer bringing it.  Such an attempt is
    #: not handed to its agent.  ``None``: nothing to wait for (any more).
    data_wait: Mapped[str | None] = mapped_column(String(64), default=None)
    #: The directory of the attempt's dataset at its site (``$ONECLUSTER_DATASET_DIR``).
    dataset_dir: Mapped[str | None] = mapped_column(Text, default=None)
    #: When its dataset was complete at the site (the start timeout counts from then).
    data_ready_at: Mapped[float | None] = mapped_column(default=None)
    #: It was told to stop because its job was preempted (not cancelled, not a gang's break).
    preempted: Mapped[bool] = mapped_column(default=False)


class TokenRow(Base):
    """An API token, stored as the SHA-256 of its secret only."""

    __tablename__ = "tokens"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    role: Mapped[str] = mapped_column(String(16))
    team: Mapped[str | None] = mapped_column(String(64))
    site: Mapped[str | None] = mapped_column(String(64))
    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[float]
    revoked: Mapped[bool] = mapped_column(default=False)
    #: The person or service holding it (the register names them; two-person rule).
    holder: Mapped[str | None] = mapped_column(String(128), default=None)


class AgentRow(Base):
    """The status of a site as its agent last reported it."""

    __tablename__ = "agents"

    site: Mapped[str] = mapped_column(String(64), primary_key=True)
    agent_id: Mapped[str] = mapped_column(String(128))
    backend: Mapped[str] = mapped_column(String(32))
    last_heartbeat: Mapped[float]
    capacity: Mapped[dict[str, int]] = mapped_column(JSON)
    down: Mapped[bool] = mapped_column(default=False)
    #: Why the site's cluster cannot take work now (its agent says so): the site is degraded.
    problem: Mapped[str | None] = mapped_column(Text, default=None)
    #: The lease granted with the last sync: the site's work is nobody else's until
    #: ``last_heartbeat + lease_s``, whatever the server's configuration is now.
    lease_s: Mapped[float] = mapped_column(default=10.0, server_default="10.0")
    #: Agent ids this site's agent replaced (the latest last): their syncs are refused.
    replaced: Mapped[list[str]] = mapped_column(JSON, default=list, server_default="[]")
    #: Until when the last replaced agent's lease ran: what was handed to it is not taken as
    #: lost before then (it may still be running it).
    replaced_until: Mapped[float | None] = mapped_column(default=None)
    #: Where the site's data plane takes connections (its agent's data report): the address
    #: it announced, else its service address; ``None`` while it announced none.
    data_address: Mapped[str | None] = mapped_column(String(15), default=None)
    data_port: Mapped[int | None] = mapped_column(default=None)


class LogRow(Base):
    """A chunk of a job's log; ``offset`` counts characters from the start of the job's log."""

    __tablename__ = "job_logs"
    __table_args__ = (Index("ix_job_logs_job_offset", "job_id", "offset"),)

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"))
    attempt_id: Mapped[str] = mapped_column(String(96))
    offset: Mapped[int] = mapped_column(BigInteger)
    size: Mapped[int]
    data: Mapped[str] = mapped_column(Text)


class EventRow(Base):
    """Something that happened (submitted, started, preempted, site down …), for the record."""

    __tablename__ = "events"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    time: Mapped[float] = mapped_column(index=True)
    kind: Mapped[str] = mapped_column(String(32))
    job_id: Mapped[str | None] = mapped_column(String(64), index=True)
    message: Mapped[str] = mapped_column(Text)


class DatasetRow(Base):
    """A dataset registered with ``onecluster dataset add`` (its versions come from scans)."""

    __tablename__ = "datasets"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[float]


class VersionRow(Base):
    """One version of a dataset: the content whose Merkle root is ``root``."""

    __tablename__ = "dataset_versions"

    dataset: Mapped[str] = mapped_column(ForeignKey("datasets.name"), primary_key=True)
    root: Mapped[str] = mapped_column(String(64), primary_key=True)
    bytes: Mapped[int] = mapped_column(BigInteger)
    files: Mapped[int] = mapped_column(BigInteger)
    chunks: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[float] = mapped_column(index=True)
    #: The site where it was first scanned.
    site: Mapped[str] = mapped_column(String(64))


class ReplicaRow(Base):
    """A version at one site, as that site's agent last listed it: ``complete`` (every chunk
    verified) or ``partial`` (``bytes_present`` of it), at ``path`` there."""

    __tablename__ = "replicas"
    __table_args__ = (
        ForeignKeyConstraint(
            ["dataset", "root"], ["dataset_versions.dataset", "dataset_versions.root"]
        ),
    )

    dataset: Mapped[str] = mapped_column(String(64), primary_key=True)
    root: Mapped[str] = mapped_column(String(64), primary_key=True)
    site: Mapped[str] = mapped_column(String(64), primary_key=True)
    state: Mapped[str] = mapped_column(String(16))
    bytes_present: Mapped[int] = mapped_column(BigInteger)
    path: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[float]


class ScanRow(Base):
    """A scan of a directory at a site: queued → scanning → done (a version) or failed."""

    __tablename__ = "scans"
    __table_args__ = (Index("ix_scans_site_state", "site", "state"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    dataset: Mapped[str] = mapped_column(ForeignKey("datasets.name"), index=True)
    site: Mapped[str] = mapped_column(String(64))
    path: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(16))
    files_done: Mapped[int] = mapped_column(BigInteger, default=0)
    bytes_done: Mapped[int] = mapped_column(BigInteger, default=0)
    files_total: Mapped[int | None] = mapped_column(BigInteger, default=None)
    bytes_total: Mapped[int | None] = mapped_column(BigInteger, default=None)
    root: Mapped[str | None] = mapped_column(String(64), default=None)
    new_version: Mapped[bool | None] = mapped_column(default=None)
    error: Mapped[str | None] = mapped_column(Text, default=None)
    created_at: Mapped[float]
    finished_at: Mapped[float | None] = mapped_column(default=None)
    #: For an export's de-identification at its source: the export, the version of
    #: ``source_dataset`` to de-identify, the profile (YAML; ``None``: every detector on every
    #: field), and what the agent reported of the run.
    export_id: Mapped[str | None] = mapped_column(String(64), default=None)
    source_dataset: Mapped[str | None] = mapped_column(String(64), default=None)
    source_root: Mapped[str | None] = mapped_column(String(64), default=None)
    profile: Mapped[str | None] = mapped_column(Text, default=None)
    deid: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)


class ApprovalRow(Base):
    """An approval of exports: requested by a member, approved or revoked by compliance."""

    __tablename__ = "export_approvals"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    #: A dataset's name, or a family: a prefix ending in ``*``.
    dataset: Mapped[str] = mapped_column(String(64))
    destinations: Mapped[list[str]] = mapped_column(JSON)
    purpose: Mapped[str] = mapped_column(Text)
    categories: Mapped[list[str]] = mapped_column(JSON)
    personal: Mapped[bool]
    sensitive: Mapped[bool]
    route: Mapped[str] = mapped_column(String(32))
    route_ref: Mapped[str] = mapped_column(Text)
    profile: Mapped[str | None] = mapped_column(Text, default=None)
    requester: Mapped[str] = mapped_column(String(160))
    requester_token: Mapped[str] = mapped_column(String(32))
    approver: Mapped[str | None] = mapped_column(String(160), default=None)
    state: Mapped[str] = mapped_column(String(16))
    valid_from: Mapped[float]
    valid_until: Mapped[float]
    max_bytes: Mapped[int] = mapped_column(BigInteger)
    max_exports: Mapped[int | None] = mapped_column(default=None)
    bytes_used: Mapped[int] = mapped_column(BigInteger, default=0)
    exports_used: Mapped[int] = mapped_column(default=0)
    reason: Mapped[str | None] = mapped_column(Text, default=None)
    created_at: Mapped[float]
    decided_at: Mapped[float | None] = mapped_column(default=None)


class ExportRow(Base):
    """One export under an approval: preparing (de-identified at its source) → sending (its
    register entry written, its transfer running) → done or failed; or refused."""

    __tablename__ = "exports"
    __table_args__ = (Index("ix_exports_state", "state"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    approval_id: Mapped[str] = mapped_column(ForeignKey("export_approvals.id"))
    dataset: Mapped[str] = mapped_column(String(64))
    root: Mapped[str] = mapped_column(String(64))
    src: Mapped[str] = mapped_column(String(64))
    dst: Mapped[str] = mapped_column(String(64))
    requester: Mapped[str] = mapped_column(String(160))
    state: Mapped[str] = mapped_column(String(16))
    #: The dataset the de-identified version is registered under, and that version.
    export_dataset: Mapped[str] = mapped_column(String(64))
    scan_id: Mapped[str | None] = mapped_column(String(64), default=None)
    content_hash: Mapped[str | None] = mapped_column(String(64), default=None)
    bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    files: Mapped[int] = mapped_column(BigInteger, default=0)
    individuals: Mapped[int] = mapped_column(BigInteger, default=0)
    individuals_sensitive: Mapped[int] = mapped_column(BigInteger, default=0)
    findings: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    transfer_id: Mapped[str | None] = mapped_column(String(64), default=None)
    intent_seq: Mapped[int | None] = mapped_column(BigInteger, default=None)
    end_seq: Mapped[int | None] = mapped_column(BigInteger, default=None)
    error: Mapped[str | None] = mapped_column(Text, default=None)
    created_at: Mapped[float] = mapped_column(index=True)
    finished_at: Mapped[float | None] = mapped_column(default=None)


class TransferRow(Base):
    """A transfer of one version from ``src`` to ``dst``: queued → running ⇄ waiting → done
    or failed, or cancelled.  ``ticket`` is the secret the destination (and any relay)
    presents to the source's data plane."""

    __tablename__ = "transfers"
    __table_args__ = (
        ForeignKeyConstraint(
            ["dataset", "root"], ["dataset_versions.dataset", "dataset_versions.root"]
        ),
        Index("ix_transfers_state", "state"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    dataset: Mapped[str] = mapped_column(String(64))
    root: Mapped[str] = mapped_column(String(64))
    src: Mapped[str] = mapped_column(String(64))
    dst: Mapped[str] = mapped_column(String(64))
    reason: Mapped[str] = mapped_column(String(16))
    job_id: Mapped[str | None] = mapped_column(String(64), default=None)
    state: Mapped[str] = mapped_column(String(16))
    bytes_total: Mapped[int] = mapped_column(BigInteger, default=0)
    bytes_done: Mapped[int] = mapped_column(BigInteger, default=0)
    bytes_sent: Mapped[int] = mapped_column(BigInteger, default=0)
    bytes_local: Mapped[int] = mapped_column(BigInteger, default=0)
    chunks_total: Mapped[int] = mapped_column(BigInteger, default=0)
    chunks_done: Mapped[int] = mapped_column(BigInteger, default=0)
    chunks_sent: Mapped[int] = mapped_column(BigInteger, default=0)
    #: The destination's last report of each path: ``[{name, bytes, streams, state}]``.
    paths: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    rate_bps: Mapped[float] = mapped_column(default=0.0)
    error: Mapped[str | None] = mapped_column(Text, default=None)
    ticket: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[float] = mapped_column(index=True)
    started_at: Mapped[float | None] = mapped_column(default=None)
    finished_at: Mapped[float | None] = mapped_column(default=None)


class FabricRow(Base):
    """One version of the fabric in force: its YAML as applied, who applied it and when.
    The newest version is in force; versions are never changed or deleted."""

    __tablename__ = "fabrics"

    version: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String(64))
    text: Mapped[str] = mapped_column(Text)
    applied_at: Mapped[float]
    applied_by: Mapped[str] = mapped_column(String(256))
    #: What changed against the version before, one line per change (empty for version 1).
    summary: Mapped[str] = mapped_column(Text)


class DrainRow(Base):
    """A site or pool that takes no new work; its running work finishes.  ``gpu_type`` is
    ``""`` for the whole site (every pool it has or will have)."""

    __tablename__ = "drains"

    site: Mapped[str] = mapped_column(String(64), primary_key=True)
    gpu_type: Mapped[str] = mapped_column(String(64), primary_key=True)
    since: Mapped[float]
    by: Mapped[str] = mapped_column(String(256))
    reason: Mapped[str | None] = mapped_column(Text, default=None)


class FabricEpochRow(Base):
    """One row (id 1): the fabric version in force and an epoch that grows with every
    change of the fabric or of its drains, so that every replica sees a change by reading
    one row; applying a fabric locks it, so applies run one at a time."""

    __tablename__ = "fabric_epoch"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    version: Mapped[int]
    epoch: Mapped[int] = mapped_column(BigInteger)
