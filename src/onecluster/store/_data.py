"""The :class:`DataStore`: datasets, their versions and replicas, scans and transfers.

Each method is one transaction.  The store knows no fabric: the caller checks that sites
exist and that a dataset it does not have is perhaps declared in the fabric, and gives
:meth:`DataStore.push` the function that ranks the sites a version could be sent from.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from onecluster.errors import ConflictError, NotFoundError
from onecluster.store._convert import (
    replica_record,
    scan_record,
    transfer_record,
    version_record,
)
from onecluster.store._data_records import (
    ACTIVE_SCAN_STATES,
    ACTIVE_TRANSFER_STATES,
    DataEndpoint,
    DatasetLocality,
    DatasetRecord,
    DataSync,
    DataWork,
    PushResult,
    ReplicaRecord,
    ScanRecord,
    TransferRecord,
    VersionRecord,
)
from onecluster.store._data_sync import data_endpoints, data_work, record_data
from onecluster.store._exports import Exports
from onecluster.store._push import SourceRanking, new_id, pick_source, pick_version, transfer_row
from onecluster.store._staging import Staging
from onecluster.store._tables import DatasetRow, ReplicaRow, ScanRow, TransferRow, VersionRow
from onecluster.store._transitions import event

__all__ = ["DataStore"]


class DataStore(Staging, Exports):
    """Datasets as content: what was scanned where, which site holds which version, and the
    transfers between sites.  Unknown scans and transfers raise :class:`NotFoundError`; a
    request that contradicts the current state (nothing to send from, a transfer that ended)
    raises :class:`ConflictError` with what to do instead."""

    # -- scans ----------------------------------------------------------------------------

    def add_scan(self, dataset: str, site: str, path: str, *, now: float) -> ScanRecord:
        """Register ``dataset`` (if new) and queue a scan of ``path`` at ``site`` for it.

        A scan of the same directory for the same dataset that has not ended yet is returned
        instead of a second one (asking twice scans once).
        """

        def work(s: Session) -> ScanRecord:
            if s.get(DatasetRow, dataset, with_for_update=True) is None:
                try:
                    with s.begin_nested():  # another request may register it meanwhile
                        s.add(DatasetRow(name=dataset, created_at=now))
                except IntegrityError:
                    pass
            running = s.scalars(
                select(ScanRow).where(
                    ScanRow.dataset == dataset,
                    ScanRow.site == site,
                    ScanRow.path == path,
                    ScanRow.state.in_(ACTIVE_SCAN_STATES),
                )
            ).first()
            if running is not None:
                return scan_record(running)
            row = ScanRow(
                id=new_id("s"),
                dataset=dataset,
                site=site,
                path=path,
                state="queued",
                files_done=0,
                bytes_done=0,
                created_at=now,
            )
            s.add(row)
            event(s, now, "scan_queued", f"scan {row.id} of {path} at {site} for {dataset}")
            return scan_record(row)

        return self._run(work)

    def scan(self, scan_id: str) -> ScanRecord:
        """The scan ``scan_id``; :class:`NotFoundError` if there is none."""

        def work(s: Session) -> ScanRecord:
            row = s.get(ScanRow, scan_id)
            if row is None:
                msg = f"there is no scan {scan_id}"
                raise NotFoundError(msg, hint="`onecluster dataset add` prints a scan's id")
            return scan_record(row)

        return self._read(work)

    # -- datasets -------------------------------------------------------------------------

    def datasets(self) -> list[DatasetRecord]:
        """Every registered dataset (by name), its versions newest first, with replicas."""
        return self._read(lambda s: _datasets(s, None))

    def dataset(self, name: str) -> DatasetRecord | None:
        """The registered dataset ``name``, or ``None`` (it may still be declared in the
        fabric: the caller decides)."""
        return self._read(lambda s: next(iter(_datasets(s, name)), None))

    def dataset_names(self) -> frozenset[str]:
        """The names of every registered dataset."""
        return self._read(lambda s: frozenset(s.scalars(select(DatasetRow.name))))

    def dataset_locality(self) -> list[DatasetLocality]:
        """Every registered dataset that has a version: its latest, and the sites holding
        all of it (read without the other versions' replicas: the reconcile loop asks
        every pass)."""

        def work(s: Session) -> list[DatasetLocality]:
            latest: dict[str, VersionRow] = {}
            for v in s.scalars(
                select(VersionRow).order_by(VersionRow.created_at.desc(), VersionRow.root.desc())
            ):
                latest.setdefault(v.dataset, v)
            complete: dict[tuple[str, str], set[str]] = {}
            for r in s.scalars(select(ReplicaRow).where(ReplicaRow.state == "complete")):
                complete.setdefault((r.dataset, r.root), set()).add(r.site)
            return [
                DatasetLocality(
                    name=name,
                    root=v.root,
                    bytes=v.bytes,
                    sites=frozenset(complete.get((name, v.root), ())),
                )
                for name, v in sorted(latest.items())
            ]

        return self._read(work)

    # -- transfers ------------------------------------------------------------------------

    def push(
        self,
        dataset: str,
        dst: str,
        *,
        now: float,
        rank: SourceRanking,
        src: str | None = None,
        root: str | None = None,
        job_id: str | None = None,
    ) -> PushResult:
        """Send version ``root`` (default: the latest) of ``dataset`` to ``dst``.

        From ``src`` if given, else from the first site ``rank`` puts first among those
        holding all of it.  When ``dst`` already holds all of it, a transfer that is already
        ``done`` records that nothing had to be sent; when the same version is already on its
        way to ``dst``, that transfer is the answer (``created`` false either time).

        :class:`ConflictError` when the dataset has no version yet, when ``src`` holds no
        complete replica, or when no site does; :class:`NotFoundError` for a ``root`` that is
        not one of its versions.  With ``job_id`` the transfer is that job's prefetch.
        """

        def work(s: Session) -> PushResult:
            # The dataset's row serialises pushes of it: two at once make one transfer.
            registered = s.get(DatasetRow, dataset, with_for_update=True)
            versions = [] if registered is None else _versions(s, dataset)
            version = pick_version(dataset, versions, root)
            complete = sorted(version.complete_at)
            if dst in complete:
                row = transfer_row(version, src or dst, dst, now, state="done", job_id=job_id)
                s.add(row)
                return PushResult(transfer=transfer_record(row), created=False)
            active = s.scalars(
                select(TransferRow).where(
                    TransferRow.dataset == dataset,
                    TransferRow.root == version.root,
                    TransferRow.dst == dst,
                    TransferRow.state.in_(ACTIVE_TRANSFER_STATES),
                )
            ).first()
            if active is not None:
                return PushResult(transfer=transfer_record(active), created=False)
            source = pick_source(version, complete, src, rank)
            row = transfer_row(version, source, dst, now, state="queued", job_id=job_id)
            s.add(row)
            event(
                s,
                now,
                "transfer_queued",
                f"transfer {row.id}: {dataset}@{version.root[:12]} from {source} to {dst}",
            )
            return PushResult(transfer=transfer_record(row), created=True)

        return self._run(work)

    def transfer(self, transfer_id: str) -> TransferRecord:
        """The transfer ``transfer_id``; :class:`NotFoundError` if there is none."""
        return self._read(lambda s: transfer_record(_get_transfer(s, transfer_id)))

    def transfers(self, *, active_only: bool = True, limit: int = 100) -> list[TransferRecord]:
        """Transfers newest first: those not ended, or (``active_only`` false) every one, at
        most ``limit``."""
        query = select(TransferRow)
        if active_only:
            query = query.where(TransferRow.state.in_(ACTIVE_TRANSFER_STATES))
        query = query.order_by(TransferRow.created_at.desc(), TransferRow.id.desc()).limit(limit)
        return self._read(lambda s: [transfer_record(r) for r in s.scalars(query)])

    def cancel_transfer(self, transfer_id: str, *, now: float) -> TransferRecord:
        """Cancel a transfer that has not ended (its agents stop it at their next sync);
        :class:`ConflictError` for one that has."""

        def work(s: Session) -> TransferRecord:
            row = _get_transfer(s, transfer_id, lock=True)
            if row.state not in ACTIVE_TRANSFER_STATES:
                msg = (
                    f"transfer {transfer_id} already ended ({row.state}); "
                    "there is nothing to cancel"
                )
                raise ConflictError(msg, hint="`onecluster transfers --all` lists every transfer")
            row.state, row.finished_at = "cancelled", now
            event(s, now, "transfer_cancelled", f"transfer {transfer_id} cancelled")
            return transfer_record(row)

        return self._run(work)

    # -- the data part of a sync ----------------------------------------------------------

    def record_data(self, site: str, data: DataSync | None, *, now: float) -> DataWork:
        """Take the data part of a sync of ``site`` (``None``: its agent has no data plane,
        nothing changes) and return what its data orders are made of."""

        def work(s: Session) -> DataWork:
            if data is not None:
                record_data(s, site, data, now)
            return data_work(s, site)

        return self._run(work) if data is not None else self.data_work(site)

    def data_work(self, site: str) -> DataWork:
        """What ``site``'s data orders are made of, changing nothing."""
        return self._read(lambda s: data_work(s, site))

    def data_endpoints(self) -> tuple[DataEndpoint, ...]:
        """The data endpoints of the sites that are up and announced one."""
        return self._read(data_endpoints)


def _versions(s: Session, dataset: str) -> list[VersionRecord]:
    found = _datasets(s, dataset)
    return list(found[0].versions) if found else []


def _datasets(s: Session, name: str | None) -> list[DatasetRecord]:
    """Registered datasets (one, or all), each with its versions newest first."""
    datasets = select(DatasetRow).order_by(DatasetRow.name)
    versions = select(VersionRow).order_by(VersionRow.created_at.desc(), VersionRow.root.desc())
    replicas = select(ReplicaRow).order_by(ReplicaRow.site)
    if name is not None:
        datasets = datasets.where(DatasetRow.name == name)
        versions = versions.where(VersionRow.dataset == name)
        replicas = replicas.where(ReplicaRow.dataset == name)
    held: dict[tuple[str, str], list[ReplicaRecord]] = {}
    for r in s.scalars(replicas):
        held.setdefault((r.dataset, r.root), []).append(replica_record(r))
    by_dataset: dict[str, list[VersionRecord]] = {}
    for v in s.scalars(versions):
        by_dataset.setdefault(v.dataset, []).append(
            version_record(v, tuple(held.get((v.dataset, v.root), ())))
        )
    return [
        DatasetRecord(
            name=d.name, created_at=d.created_at, versions=tuple(by_dataset.get(d.name, ()))
        )
        for d in s.scalars(datasets)
    ]


def _get_transfer(s: Session, transfer_id: str, *, lock: bool = False) -> TransferRow:
    row = s.get(TransferRow, transfer_id, with_for_update=lock)
    if row is None:
        msg = f"there is no transfer {transfer_id}"
        raise NotFoundError(msg, hint="list them with `onecluster transfers --all`")
    return row
