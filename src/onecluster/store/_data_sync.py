"""The data part of an agent sync, applied inside the caller's transaction.

Level-triggered and idempotent, like the attempts (``_sync.py``): a report about a scan or
transfer the server does not know, that belongs to another site, or that already ended
changes nothing, and repeating a report changes nothing more.  The replicas a site lists are
the whole truth about that site: one it no longer lists is gone.  So the replicas are taken
first, and what this sync's scans and transfers finish is recorded on top of them.

Only the site a thing belongs to may report on it: a scan by its site, a transfer by its
destination (whose agent pulls the chunks and verifies them).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from onecluster.store._convert import paths_json, scan_record, transfer_record
from onecluster.store._data_records import (
    ACTIVE_SCAN_STATES,
    ACTIVE_TRANSFER_STATES,
    DataEndpoint,
    DataSync,
    DataWork,
    ReplicaHeld,
    ScanProgress,
    TransferProgress,
)
from onecluster.store._tables import AgentRow, ReplicaRow, ScanRow, TransferRow, VersionRow
from onecluster.store._transitions import event

__all__ = ["data_endpoints", "data_work", "record_data", "set_replica"]

#: Longest error text kept from an agent.
_MAX_ERROR = 2000


def record_data(session: Session, site: str, data: DataSync, now: float) -> None:
    """Take one sync's data report from ``site``'s agent (whose sync was just recorded)."""
    agent = session.get(AgentRow, site)
    if agent is not None and (agent.data_address, agent.data_port) != (data.address, data.port):
        agent.data_address = data.address
        agent.data_port = data.port
    _take_replicas(session, site, data.replicas, now)
    for scan in data.scans:
        _take_scan(session, site, scan, now)
    for transfer in data.transfers:
        _take_transfer(session, site, transfer, now)


def data_work(session: Session, site: str) -> DataWork:
    """What ``site``'s data orders are made of: its scans still to run, every active transfer,
    and the data endpoints of the sites that are up."""
    scans = session.scalars(
        select(ScanRow)
        .where(ScanRow.site == site, ScanRow.state.in_(ACTIVE_SCAN_STATES))
        .order_by(ScanRow.created_at, ScanRow.id)
    )
    transfers = session.scalars(
        select(TransferRow)
        .where(TransferRow.state.in_(ACTIVE_TRANSFER_STATES))
        .order_by(TransferRow.created_at, TransferRow.id)
    )
    return DataWork(
        scans=tuple(scan_record(r) for r in scans),
        transfers=tuple(transfer_record(r) for r in transfers),
        endpoints=data_endpoints(session),
    )


def data_endpoints(session: Session) -> tuple[DataEndpoint, ...]:
    """The data endpoints of the sites that are up and announced one, by site."""
    agents = session.scalars(
        select(AgentRow)
        .where(
            AgentRow.down.is_(False),
            AgentRow.data_address.is_not(None),
            AgentRow.data_port.is_not(None),
        )
        .order_by(AgentRow.site)
    )
    return tuple(
        DataEndpoint(site=a.site, address=a.data_address, port=a.data_port)
        for a in agents
        if a.data_address is not None and a.data_port is not None
    )


def set_replica(
    session: Session,
    *,
    dataset: str,
    root: str,
    site: str,
    complete: bool,
    bytes_present: int,
    path: str | None,
    now: float,
) -> None:
    """Record (or update) the replica of ``dataset``@``root`` at ``site``; ``path=None`` keeps
    the one already known.  ``updated_at`` moves only when something changed."""
    state = "complete" if complete else "partial"
    row = session.get(ReplicaRow, (dataset, root, site))
    if row is None:
        session.add(
            ReplicaRow(
                dataset=dataset,
                root=root,
                site=site,
                state=state,
                bytes_present=bytes_present,
                path=path,
                updated_at=now,
            )
        )
        return
    path = path if path is not None else row.path
    if (row.state, row.bytes_present, row.path) != (state, bytes_present, path):
        row.state, row.bytes_present, row.path, row.updated_at = state, bytes_present, path, now


def _take_replicas(session: Session, site: str, held: Iterable[ReplicaHeld], now: float) -> None:
    """Make the site's replicas exactly those it lists (of versions the server knows)."""
    listed = {(r.dataset, r.root): r for r in held}
    known = _known_versions(session, listed)
    for row in session.scalars(select(ReplicaRow).where(ReplicaRow.site == site)):
        if (row.dataset, row.root) not in listed:
            session.delete(row)
    session.flush()
    for key, replica in sorted(listed.items()):
        if key in known:
            set_replica(
                session,
                dataset=replica.dataset,
                root=replica.root,
                site=site,
                complete=replica.state == "complete",
                bytes_present=replica.bytes_present,
                path=replica.path,
                now=now,
            )


def _known_versions(session: Session, keys: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
    datasets = sorted({dataset for dataset, _root in keys})
    if not datasets:
        return set()
    rows = session.execute(
        select(VersionRow.dataset, VersionRow.root).where(VersionRow.dataset.in_(datasets))
    )
    return {(dataset, root) for dataset, root in rows}


def _take_scan(session: Session, site: str, report: ScanProgress, now: float) -> None:
    scan = session.get(ScanRow, report.id, with_for_update=True)
    if scan is None or scan.site != site or scan.state not in ACTIVE_SCAN_STATES:
        return
    scan.files_done, scan.bytes_done = report.files_done, report.bytes_done
    if report.files_total is not None:
        scan.files_total = report.files_total
    if report.bytes_total is not None:
        scan.bytes_total = report.bytes_total
    if report.state == "scanning":
        scan.state = "scanning"
    elif report.state == "failed":
        _fail_scan(session, scan, report.error or "the agent gave no reason", now)
    elif report.root is None:
        _fail_scan(session, scan, "the agent reported the scan done without a version", now)
    else:
        _finish_scan(session, scan, report, report.root, now)


def _fail_scan(session: Session, scan: ScanRow, error: str, now: float) -> None:
    scan.state, scan.error, scan.finished_at = "failed", error[:_MAX_ERROR], now
    event(
        session,
        now,
        "scan_failed",
        f"scan {scan.id} of {scan.path} at {scan.site} for dataset {scan.dataset} failed: "
        f"{scan.error}",
    )


def _finish_scan(
    session: Session, scan: ScanRow, report: ScanProgress, root: str, now: float
) -> None:
    """Record the version the scan found (new or not) and a complete replica where it was
    scanned."""
    size = report.bytes_total if report.bytes_total is not None else report.bytes_done
    version = session.get(VersionRow, (scan.dataset, root))
    scan.new_version = version is None
    if version is None:
        files = report.files if report.files is not None else (report.files_total or 0)
        version = VersionRow(
            dataset=scan.dataset,
            root=root,
            bytes=size,
            files=files,
            chunks=report.chunks or 0,
            created_at=now,
            site=scan.site,
        )
        session.add(version)
        session.flush()
    scan.state, scan.root, scan.finished_at = "done", root, now
    if scan.export_id is not None:
        scan.path = report.path or scan.path
        scan.deid = report.deid
    scan.bytes_total = scan.bytes_total if scan.bytes_total is not None else version.bytes
    set_replica(
        session,
        dataset=scan.dataset,
        root=root,
        site=scan.site,
        complete=True,
        bytes_present=version.bytes,
        path=scan.path,
        now=now,
    )
    what = "a new version" if scan.new_version else "a known version"
    event(
        session,
        now,
        "scan_done",
        f"scan {scan.id} of {scan.path} at {scan.site} found {what} of dataset {scan.dataset}: "
        f"{root[:12]} ({version.bytes} bytes, {version.files} files)",
    )


def _take_transfer(session: Session, site: str, report: TransferProgress, now: float) -> None:
    transfer = session.get(TransferRow, report.id, with_for_update=True)
    if transfer is None or transfer.dst != site or transfer.state not in ACTIVE_TRANSFER_STATES:
        return
    for name in ("bytes_done", "bytes_sent", "bytes_local", "chunks_done", "chunks_sent"):
        setattr(transfer, name, getattr(report, name))
    # The totals are the version's (known at creation); the agent's count only once it has
    # read the manifest.
    transfer.bytes_total = report.bytes_total or transfer.bytes_total
    transfer.chunks_total = report.chunks_total or transfer.chunks_total
    transfer.rate_bps = report.rate_bps
    transfer.paths = paths_json(report.paths)
    if report.state in ("running", "done") and transfer.started_at is None:
        transfer.started_at = now
    if report.state in ("running", "waiting"):
        # While it waits, why (no path works, …); once it runs again, nothing.
        transfer.state = report.state
        transfer.error = _error_text(report.error) if report.state == "waiting" else None
        return
    transfer.finished_at = now
    if report.state == "failed":
        transfer.state = "failed"
        transfer.error = _error_text(report.error) or "the agent gave no reason"
        event(
            session,
            now,
            "transfer_failed",
            f"transfer {transfer.id} of {transfer.dataset}@{transfer.root[:12]} from "
            f"{transfer.src} to {transfer.dst} failed: {transfer.error}",
        )
        return
    transfer.state = "done"
    version = session.get(VersionRow, (transfer.dataset, transfer.root))
    set_replica(
        session,
        dataset=transfer.dataset,
        root=transfer.root,
        site=site,
        complete=True,
        bytes_present=version.bytes if version is not None else transfer.bytes_total,
        path=None,
        now=now,
    )
    event(
        session,
        now,
        "transfer_done",
        f"transfer {transfer.id} of {transfer.dataset}@{transfer.root[:12]} from "
        f"{transfer.src} to {transfer.dst} is done: {transfer.bytes_done} bytes verified, "
        f"{transfer.bytes_sent} sent",
    )


def _error_text(error: str | None) -> str | None:
    return None if error is None else error[:_MAX_ERROR]
