"""What the store hands out and takes in about datasets: frozen values, never live ORM rows.

Out: datasets with their versions and replicas, scans, transfers, and what one site's data
plane should do (:class:`DataWork`).  In: the data part of an agent's sync
(:class:`DataSync`), already converted from the wire format by the server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "ACTIVE_SCAN_STATES",
    "ACTIVE_TRANSFER_STATES",
    "DataEndpoint",
    "DataSync",
    "DataWork",
    "DatasetLocality",
    "DatasetRecord",
    "PathSample",
    "PushResult",
    "ReplicaHeld",
    "ReplicaRecord",
    "ScanProgress",
    "ScanRecord",
    "TransferProgress",
    "TransferRecord",
    "VersionRecord",
]

ScanState = Literal["queued", "scanning", "done", "failed"]
TransferState = Literal["queued", "running", "waiting", "done", "failed", "cancelled"]
ReplicaState = Literal["complete", "partial"]

#: Scans the site's agent is still asked to run.
ACTIVE_SCAN_STATES: frozenset[str] = frozenset({"queued", "scanning"})
#: Transfers that have not ended: the agents are told to carry them on.
ACTIVE_TRANSFER_STATES: frozenset[str] = frozenset({"queued", "running", "waiting"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaRecord:
    """A version at one site: ``complete`` or ``partial`` (``bytes_present`` of it), at
    ``path`` there (``None`` when no agent said where)."""

    dataset: str
    root: str
    site: str
    state: ReplicaState
    bytes_present: int
    path: str | None
    updated_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionRecord:
    """One version of a dataset (its content's Merkle root) and where it lives."""

    dataset: str
    root: str
    bytes: int
    files: int
    chunks: int
    created_at: float
    #: Where it was first scanned.
    site: str
    replicas: tuple[ReplicaRecord, ...] = ()

    @property
    def complete_at(self) -> frozenset[str]:
        """Sites holding all of it."""
        return frozenset(r.site for r in self.replicas if r.state == "complete")


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetRecord:
    """A registered dataset and its versions, newest first."""

    name: str
    created_at: float
    versions: tuple[VersionRecord, ...] = ()

    @property
    def latest(self) -> VersionRecord | None:
        """The newest version, or ``None`` before the first scan is done."""
        return self.versions[0] if self.versions else None


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetLocality:
    """For the scheduler: a registered dataset's latest version, its size and the sites
    holding all of it."""

    name: str
    root: str
    bytes: int
    sites: frozenset[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScanRecord:
    """A scan of ``path`` at ``site``; once done, the version it found (``new_version``:
    whether that content was not registered before)."""

    id: str
    dataset: str
    site: str
    path: str
    state: ScanState
    files_done: int
    bytes_done: int
    files_total: int | None
    bytes_total: int | None
    root: str | None
    new_version: bool | None
    error: str | None
    created_at: float
    finished_at: float | None
    #: An export's de-identification: version ``source_root`` of ``source_dataset`` through
    #: ``profile`` (``None``: every detector on every field) into a version of ``dataset``.
    export_id: str | None = None
    source_dataset: str | None = None
    source_root: str | None = None
    profile: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PathSample:
    """What one path of a transfer carried, as the destination last reported it."""

    name: str
    bytes: int = 0
    streams: int = 0
    state: str = "running"


@dataclass(frozen=True, slots=True, kw_only=True)
class TransferRecord:
    """A transfer of version ``root`` of ``dataset`` from ``src`` to ``dst``."""

    id: str
    dataset: str
    root: str
    src: str
    dst: str
    reason: Literal["push", "prefetch"]
    job_id: str | None
    state: TransferState
    bytes_total: int
    bytes_done: int
    bytes_sent: int
    bytes_local: int
    chunks_total: int
    chunks_done: int
    chunks_sent: int
    paths: tuple[PathSample, ...]
    rate_bps: float
    error: str | None
    ticket: str
    created_at: float
    started_at: float | None
    finished_at: float | None

    @property
    def active(self) -> bool:
        """Whether it has not ended yet."""
        return self.state in ACTIVE_TRANSFER_STATES


@dataclass(frozen=True, slots=True, kw_only=True)
class PushResult:
    """The transfer a push asked for; ``created`` false when an active one (or nothing to
    send, a transfer already ``done``) answered it."""

    transfer: TransferRecord
    created: bool


# -- in: the data part of a sync --------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ScanProgress:
    """A scan as the agent reports it; ``done`` carries the version found."""

    id: str
    state: Literal["scanning", "done", "failed"]
    files_done: int = 0
    bytes_done: int = 0
    files_total: int | None = None
    bytes_total: int | None = None
    root: str | None = None
    files: int | None = None
    chunks: int | None = None
    error: str | None = None
    #: An export's de-identification: where the copy is, and what was found and changed.
    path: str | None = None
    deid: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TransferProgress:
    """A transfer as its destination's agent reports it."""

    id: str
    state: Literal["running", "waiting", "done", "failed"]
    bytes_total: int = 0
    bytes_done: int = 0
    bytes_sent: int = 0
    bytes_local: int = 0
    chunks_total: int = 0
    chunks_done: int = 0
    chunks_sent: int = 0
    rate_bps: float = 0.0
    paths: tuple[PathSample, ...] = ()
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaHeld:
    """A version the site holds, whole or in part, and where."""

    dataset: str
    root: str
    state: ReplicaState
    bytes_present: int
    path: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DataSync:
    """The data part of one sync: where the site's data plane takes connections, its scans
    and transfers, and every replica it holds (level-triggered: one it no longer lists is
    gone)."""

    address: str | None = None
    port: int | None = None
    scans: tuple[ScanProgress, ...] = ()
    transfers: tuple[TransferProgress, ...] = ()
    replicas: tuple[ReplicaHeld, ...] = ()


# -- out: what a site's data plane should do --------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DataEndpoint:
    """A site's data plane, as its agent last announced it (sites that are down left out)."""

    site: str
    address: str
    port: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DataWork:
    """What the server decides a site's data orders from: the site's scans still to run,
    every active transfer (the site may receive, serve or relay any of them) and the data
    endpoints of the sites that are up."""

    scans: tuple[ScanRecord, ...] = ()
    transfers: tuple[TransferRecord, ...] = ()
    endpoints: tuple[DataEndpoint, ...] = ()
