"""Datasets, scans and transfers on the wire: the REST bodies and the data part of a sync.

A *scan* registers a directory that already lives at a site (``onecluster dataset add``):
the site's agent cuts it into chunks in place and reports the version it found.  A
*transfer* moves a version to another site (``onecluster push``, or a job's prefetch); the
destination's agent pulls the chunks it lacks from the source's agent.  Which chunks a site
holds stays between the agents: the control plane sees versions, replicas and byte counts.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field

from onecluster.schema._bounds import (
    REPORT,
    STRICT,
    Count,
    DatasetName,
    Id,
    SiteName,
)
from onecluster.schema._links import IPv4

__all__ = [
    "DataOrders",
    "DataReport",
    "DatasetAdd",
    "DatasetOut",
    "HopOut",
    "PathOut",
    "PathReport",
    "PushIn",
    "ReceiveOrder",
    "ReplicaOut",
    "ReplicaReport",
    "Root",
    "ScanOrder",
    "ScanOut",
    "ScanReport",
    "ServeOrder",
    "SitePath",
    "TransferOut",
    "TransferReport",
    "VersionOut",
]

#: Longest directory path a dataset may be registered at (Linux's PATH_MAX).
MAX_PATH = 4096
#: Most scans, transfers or replicas one sync may report.
MAX_DATA_ITEMS = 10_000

ScanState = Literal["queued", "scanning", "done", "failed"]
TransferState = Literal["queued", "running", "waiting", "done", "failed", "cancelled"]
ReplicaState = Literal["complete", "partial"]


def _absolute(value: str) -> str:
    if not value.startswith("/"):
        msg = f"the path {value!r} is not absolute: give the directory as the site sees it"
        raise ValueError(msg)
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError("the path holds a control character")
    return value


#: An absolute directory path at a site.
SitePath = Annotated[
    str,
    Field(
        min_length=1, max_length=MAX_PATH, json_schema_extra={"pattern": r"^/[^\x00-\x1f\x7f]*$"}
    ),
    AfterValidator(_absolute),
]
#: A dataset version's id: the hex of its 32-byte Merkle root.
Root = Annotated[str, Field(min_length=64, max_length=64, pattern=r"^[0-9a-f]{64}$")]


# -- REST -------------------------------------------------------------------------------------


class DatasetAdd(BaseModel):
    """``POST /datasets``: register (or rescan) the directory ``path`` at ``site`` as ``name``."""

    model_config = STRICT

    name: DatasetName
    site: SiteName
    path: SitePath


class ScanOut(BaseModel):
    """A scan of a directory at a site: its progress and, once done, the version it found
    (``new_version``: whether that content was not registered before)."""

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


class ReplicaOut(BaseModel):
    """A version at one site: complete (every chunk verified) or partial, and where."""

    site: str
    state: ReplicaState
    bytes_present: int
    path: str | None
    updated_at: float


class VersionOut(BaseModel):
    """One version of a dataset and its replicas."""

    root: str
    bytes: int
    files: int
    chunks: int
    created_at: float
    replicas: list[ReplicaOut]


class DatasetOut(BaseModel):
    """A dataset: its versions (newest first; ``latest`` is the newest's root) and the size
    its fabric entry declares, if it has one."""

    name: str
    latest: str | None
    declared_bytes: int | None
    versions: list[VersionOut]


class PushIn(BaseModel):
    """``POST /transfers``: send a version (default: the latest) of ``dataset`` to ``to``,
    from ``from_site`` (default: the best site holding all of it)."""

    model_config = STRICT

    dataset: DatasetName
    to: SiteName
    from_site: SiteName | None = Field(default=None, alias="from")
    version: Root | None = None


class HopOut(BaseModel):
    """An agent's data endpoint."""

    address: str
    port: int


class PathOut(BaseModel):
    """One path of a transfer: connect to ``hops[0]``, which relays to the next.

    ``bytes`` and ``streams`` are what it carries now (reported by the destination)."""

    name: str
    circuits: list[str]
    relay: str | None = None
    rtt_s: float
    rate_bps: float | None
    hops: list[HopOut] = Field(default_factory=list)
    bytes: int = 0
    streams: int = 0
    state: str = "planned"


class TransferOut(BaseModel):
    """A transfer of one version from ``src`` to ``dst``.

    ``bytes_done``: verified at the destination (from the wire or copied from a replica it
    had, ``bytes_local``); ``bytes_sent``: payload on the wire (compressed).  ``state``:
    ``waiting`` while no path to the source works (it carries on by itself).
    """

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
    paths: list[PathOut]
    rate_bps: float
    eta_s: float | None
    seconds: float
    error: str | None
    created_at: float
    started_at: float | None
    finished_at: float | None


# -- the agent sync ---------------------------------------------------------------------------


class ScanReport(BaseModel):
    """A scan's progress at the agent; ``done`` carries the version found."""

    model_config = REPORT

    id: Id
    state: Literal["scanning", "done", "failed"]
    files_done: Count = 0
    bytes_done: Count = 0
    files_total: Count | None = None
    bytes_total: Count | None = None
    root: Root | None = None
    files: Count | None = None
    chunks: Count | None = None
    error: str | None = Field(default=None, max_length=2000)
    #: An export's de-identification: the directory of the copy, and its report
    #: (``individuals``, ``individuals_sensitive``, ``findings`` per detector, ``rows``).
    path: str | None = Field(default=None, max_length=4096)
    deid: dict[str, Any] | None = None


class PathReport(BaseModel):
    """What one path of a transfer carries."""

    model_config = REPORT

    name: str = Field(max_length=256)
    bytes: Count = 0
    streams: Count = 0
    state: str = Field(default="running", max_length=64)


class TransferReport(BaseModel):
    """A transfer's progress at its destination's agent."""

    model_config = REPORT

    id: Id
    state: Literal["running", "waiting", "done", "failed"]
    bytes_total: Count = 0
    bytes_done: Count = 0
    bytes_sent: Count = 0
    bytes_local: Count = 0
    chunks_total: Count = 0
    chunks_done: Count = 0
    chunks_sent: Count = 0
    rate_bps: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    paths: list[PathReport] = Field(default_factory=list, max_length=64)
    error: str | None = Field(default=None, max_length=2000)


class ReplicaReport(BaseModel):
    """A version the site holds, whole or in part, and where."""

    model_config = REPORT

    dataset: DatasetName
    root: Root
    state: ReplicaState
    bytes_present: Count
    path: str = Field(max_length=MAX_PATH)


class DataReport(BaseModel):
    """The data part of a sync: the agent's data endpoint, its scans and transfers, the
    replicas it holds, and the bytes its data plane moved per circuit (counters)."""

    model_config = REPORT

    port: int | None = Field(default=None, ge=1, le=65535)
    #: Where other sites reach the data endpoint when the site announced no service address.
    address: IPv4 | None = None
    scans: list[ScanReport] = Field(default_factory=list, max_length=MAX_DATA_ITEMS)
    transfers: list[TransferReport] = Field(default_factory=list, max_length=MAX_DATA_ITEMS)
    replicas: list[ReplicaReport] = Field(default_factory=list, max_length=MAX_DATA_ITEMS)
    circuit_bytes: dict[str, Count] = Field(default_factory=dict, max_length=1000)


class ScanOrder(BaseModel):
    """Scan ``path`` at this site as a version of ``dataset``; for an export, first write a
    de-identified copy of version ``source_root`` of ``source_dataset`` through ``profile``
    (YAML; ``None``: every detector on every field) and scan that instead (``export``)."""

    id: str
    dataset: str
    path: str
    export: str | None = None
    source_dataset: str | None = None
    source_root: str | None = None
    profile: str | None = None


class ReceiveOrder(BaseModel):
    """Pull version ``root`` of ``dataset`` from ``src`` over ``paths``, presenting
    ``ticket`` to the source (and to relays)."""

    id: str
    dataset: str
    root: str
    src: str
    ticket: str
    paths: list[PathOut]
    priority: Literal["bulk", "prefetch"] = "bulk"


class ServeOrder(BaseModel):
    """Serve (or relay, when ``relay``) the chunks of transfer ``id`` to whoever presents
    ``ticket``; ``rates`` caps each path (bits per second, by path name)."""

    id: str
    dataset: str
    root: str
    ticket: str
    relay: bool = False
    rates: dict[str, float] = Field(default_factory=dict)


class DataOrders(BaseModel):
    """What the server wants of the site's data plane now (level-triggered: a transfer no
    longer listed is stopped)."""

    scans: list[ScanOrder] = Field(default_factory=list)
    receive: list[ReceiveOrder] = Field(default_factory=list)
    serve: list[ServeOrder] = Field(default_factory=list)
