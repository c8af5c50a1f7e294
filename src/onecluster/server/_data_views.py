"""Read models of datasets, scans and transfers, and the data part of a sync turned into the
store's value (pure)."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from onecluster.model import Fabric
from onecluster.schema import (
    AgentSync,
    DatasetOut,
    PathOut,
    ReplicaOut,
    ScanOut,
    TransferOut,
    VersionOut,
)
from onecluster.server._data_orders import path_out
from onecluster.store import (
    DatasetRecord,
    DataSync,
    PathSample,
    ReplicaHeld,
    ScanProgress,
    ScanRecord,
    TransferProgress,
    TransferRecord,
)
from onecluster.transfer import PathPlan

__all__ = ["data_sync", "dataset_out", "scan_out", "transfer_out"]


def scan_out(scan: ScanRecord) -> ScanOut:
    """The API body of a scan."""
    return ScanOut(
        id=scan.id,
        dataset=scan.dataset,
        site=scan.site,
        path=scan.path,
        state=scan.state,
        files_done=scan.files_done,
        bytes_done=scan.bytes_done,
        files_total=scan.files_total,
        bytes_total=scan.bytes_total,
        root=scan.root,
        new_version=scan.new_version,
        error=scan.error,
        created_at=scan.created_at,
        finished_at=scan.finished_at,
    )


def dataset_out(fabric: Fabric, name: str, record: DatasetRecord | None) -> DatasetOut:
    """The API body of dataset ``name``: its registered versions (if any) and the size its
    fabric entry declares (if it has one)."""
    declared = fabric.dataset(name)
    versions = () if record is None else record.versions
    return DatasetOut(
        name=name,
        latest=versions[0].root if versions else None,
        declared_bytes=declared.size_bytes if declared is not None else None,
        versions=[
            VersionOut(
                root=v.root,
                bytes=v.bytes,
                files=v.files,
                chunks=v.chunks,
                created_at=v.created_at,
                replicas=[
                    ReplicaOut(
                        site=r.site,
                        state=r.state,
                        bytes_present=r.bytes_present,
                        path=r.path,
                        updated_at=r.updated_at,
                    )
                    for r in v.replicas
                ],
            )
            for v in versions
        ],
    )


def transfer_out(
    fabric: Fabric, t: TransferRecord, plans: Sequence[PathPlan], *, now: float
) -> TransferOut:
    """The API body of a transfer.

    ``paths``: the paths planned now (for one still active), each with what the destination
    last reported of it, then any reported path no longer planned.  ``seconds`` runs from
    its first running report to its end (or now); ``rate_bps`` (bits per second) is the
    destination's last figure while it runs (the mean over ``seconds`` when it gives none)
    and the mean over ``seconds`` once it is done; ``eta_s`` is what is left at that rate (0
    once done, ``None`` while unknown).
    """
    seconds = 0.0 if t.started_at is None else max(0.0, (t.finished_at or now) - t.started_at)
    left = max(0, t.bytes_total - t.bytes_done)
    rate = t.rate_bps
    eta: float | None = None
    if t.state == "done" or (t.active and rate <= 0):
        # The mean since it started: what the destination gives no figure for, and the
        # whole of a transfer that is done.
        rate = t.bytes_done * 8 / seconds if seconds > 0 else 0.0
    if t.state == "done":
        eta = 0.0
    elif t.active and rate > 0:
        eta = left * 8 / rate
    planned = [path_out(p, t.paths) for p in plans]
    named = {p.name for p in planned}
    return TransferOut(
        id=t.id,
        dataset=t.dataset,
        root=t.root,
        src=t.src,
        dst=t.dst,
        reason=t.reason,
        job_id=t.job_id,
        state=t.state,
        bytes_total=t.bytes_total,
        bytes_done=t.bytes_done,
        bytes_sent=t.bytes_sent,
        bytes_local=t.bytes_local,
        chunks_total=t.chunks_total,
        chunks_done=t.chunks_done,
        chunks_sent=t.chunks_sent,
        paths=planned + [_reported(fabric, t, s) for s in t.paths if s.name not in named],
        rate_bps=rate,
        eta_s=eta,
        seconds=seconds,
        error=t.error,
        created_at=t.created_at,
        started_at=t.started_at,
        finished_at=t.finished_at,
    )


def _reported(fabric: Fabric, t: TransferRecord, sample: PathSample) -> PathOut:
    """A path known only from the destination's report: its circuits from its name (a
    circuit, two joined by ``+`` through a relay, or ``default``)."""
    circuits = [c for c in fabric.circuits if c.name in sample.name.split("+")]
    sites = {end for c in circuits for end in (c.a, c.b)} - {t.src, t.dst}
    return PathOut(
        name=sample.name,
        circuits=[c.name for c in circuits],
        relay=min(sites) if len(circuits) > 1 and sites else None,
        rtt_s=sum(c.rtt_ms for c in circuits) / 1000,
        rate_bps=None,
        bytes=sample.bytes,
        streams=sample.streams,
        state=sample.state,
    )


def data_sync(body: AgentSync) -> DataSync | None:
    """The store's value of a sync's data part (``None``: the agent has no data plane).

    Its data endpoint is the address it announced, else the site's service address.  Text
    from the agent loses control characters (PostgreSQL stores no NUL); a replica at a path
    that is not absolute, or holds a control character, is left out (it changes nothing).
    """
    data = body.data
    if data is None:
        return None
    return DataSync(
        address=data.address or body.service_address,
        port=data.port,
        scans=tuple(
            ScanProgress(
                id=s.id,
                state=s.state,
                files_done=s.files_done,
                bytes_done=s.bytes_done,
                files_total=s.files_total,
                bytes_total=s.bytes_total,
                root=s.root,
                files=s.files,
                chunks=s.chunks,
                error=_text(s.error),
                path=s.path,
                deid=s.deid,
            )
            for s in data.scans
        ),
        transfers=tuple(
            TransferProgress(
                id=t.id,
                state=t.state,
                bytes_total=t.bytes_total,
                bytes_done=t.bytes_done,
                bytes_sent=t.bytes_sent,
                bytes_local=t.bytes_local,
                chunks_total=t.chunks_total,
                chunks_done=t.chunks_done,
                chunks_sent=t.chunks_sent,
                rate_bps=t.rate_bps,
                paths=tuple(
                    PathSample(
                        name=_text(p.name) or "",
                        bytes=p.bytes,
                        streams=p.streams,
                        state=_text(p.state) or "",
                    )
                    for p in t.paths
                ),
                error=_text(t.error),
            )
            for t in data.transfers
        ),
        replicas=tuple(
            ReplicaHeld(
                dataset=r.dataset,
                root=r.root,
                state=r.state,
                bytes_present=r.bytes_present,
                path=r.path,
            )
            for r in data.replicas
            if r.path.startswith("/") and _text(r.path) == r.path
        ),
    )


def _text(value: str | None) -> str | None:
    """``value`` without control characters (line breaks become spaces)."""
    if value is None:
        return None
    return "".join(
        " " if c in "\n\r\t" else c
        for c in value
        if unicodedata.category(c) != "Cc" or c in "\n\r\t"
    )
