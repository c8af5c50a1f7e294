"""The fabric in force and its drains, in the database every replica shares (mixed into
:class:`~onecluster.store.Store`).

Each version of the fabric is stored as the YAML text applied (``fabrics``), the newest in
force.  Drained sites and pools are rows of ``drains``.  One row, ``fabric_epoch``, holds
the version in force and an epoch that every change of either bumps, in the change's own
transaction: a replica learns of a change by reading that one row (``fabric_epoch``), and
applying a fabric locks it first, so that two applies run one after the other and each
judges its change against the version really in force.

The store does not parse fabrics: the caller's ``decide`` function turns the version in
force and the work that must not be stranded into the new version (or refuses), inside the
transaction that writes it, with its events.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from onecluster.errors import ConflictError, NotFoundError
from onecluster.fabric import ActiveAttempt, ActiveTransfer, PendingWork, Workload
from onecluster.model import JobState
from onecluster.store._data_records import ACTIVE_TRANSFER_STATES
from onecluster.store._export_records import ACTIVE_EXPORT_STATES
from onecluster.store._tables import (
    AttemptRow,
    DatasetRow,
    DrainRow,
    ExportRow,
    FabricEpochRow,
    FabricRow,
    JobRow,
    TransferRow,
)
from onecluster.store._transactions import Transactions
from onecluster.store._transitions import ACTIVE, event

__all__ = ["DrainRecord", "FabricEpoch", "FabricRecord", "Fabrics", "NewFabric"]

#: The id of the one ``fabric_epoch`` row.
_EPOCH_ROW = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricRecord:
    """One version of the fabric: its YAML as applied, who applied it, when, and what it
    changed (one line per change; empty for version 1)."""

    version: int
    name: str
    text: str
    applied_at: float
    applied_by: str
    summary: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DrainRecord:
    """A drained site (``gpu_type`` None: every pool of it) or pool."""

    site: str
    gpu_type: str | None
    since: float
    by: str
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class FabricEpoch:
    """The version in force and the epoch of fabric and drains together."""

    version: int
    epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NewFabric:
    """A version to store: its text and name, who applies it, what changed (``summary``,
    one line each), the events to record, and the pools (site, GPU type) it has — drains of
    sites and pools it no longer has are lifted with it."""

    text: str
    name: str
    by: str
    summary: tuple[str, ...]
    events: tuple[tuple[str, str], ...]
    pools: frozenset[tuple[str, str]]


#: Turns the version in force and the work that must not be stranded into the next version,
#: or ``None`` for no change; raises (e.g. :class:`ConflictError`) to refuse.
Decide = Callable[[FabricRecord, Workload], NewFabric | None]


class Fabrics(Transactions):
    """Versions of the fabric and the drains (see the module docstring)."""

    def fabric_epoch(self) -> FabricEpoch:
        """The version in force (0 before the first) and the epoch; one row read."""

        def work(s: Session) -> FabricEpoch:
            row = s.get(FabricEpochRow, _EPOCH_ROW)
            return FabricEpoch(0, 0) if row is None else FabricEpoch(row.version, row.epoch)

        return self._read(work)

    def fabric(self, version: int | None = None) -> FabricRecord | None:
        """Version ``version`` of the fabric, or the one in force (``None`` before the first);
        :class:`NotFoundError` for a version that does not exist."""

        def work(s: Session) -> FabricRecord | None:
            if version is None:
                return _latest(s)
            row = s.get(FabricRow, version)
            if row is None:
                msg = f"there is no fabric version {version}"
                raise NotFoundError(msg, hint="`onecluster fabric show` shows the one in force")
            return _record(row)

        return self._read(work)

    def fabric_versions(self, *, limit: int = 20) -> list[FabricRecord]:
        """The newest ``limit`` versions, newest first."""
        query = select(FabricRow).order_by(FabricRow.version.desc()).limit(limit)
        return self._read(lambda s: [_record(r) for r in s.scalars(query)])

    def fabric_workload(self) -> Workload:
        """The work a change of fabric must not strand, now (what :meth:`apply_fabric` gives
        its ``decide``, for a dry run)."""
        return self._read(_workload)

    def adopt_fabric(self, text: str, *, name: str, by: str, now: float) -> FabricRecord:
        """The fabric in force; a database that has none takes ``text`` as version 1 (with a
        ``fabric_applied`` event).  Replicas that start at once agree on one version 1."""

        def work(s: Session) -> FabricRecord:
            epoch = _lock_epoch(s)
            found = _latest(s)
            if found is not None:
                return found
            row = FabricRow(
                version=1, name=name, text=text, applied_at=now, applied_by=by, summary=""
            )
            s.add(row)
            epoch.version = 1
            epoch.epoch += 1
            event(s, now, "fabric_applied", f"fabric {name} version 1 is in force ({by})")
            return _record(row)

        return self._run(work)

    def apply_fabric(self, decide: Decide, *, now: float) -> tuple[FabricRecord, bool]:
        """Apply the version ``decide`` makes of the one in force, in one transaction with its
        events and the drains it lifts; returns the version in force afterwards and whether it
        is new.  Applies run one at a time (the epoch row is locked first); whatever
        ``decide`` raises refuses the change, and nothing is written."""

        def work(s: Session) -> tuple[FabricRecord, bool]:
            epoch = _lock_epoch(s)
            current = _latest(s)
            if current is None:
                msg = "no fabric is in force yet"
                raise ConflictError(msg, hint="start `onecluster server --fabric FILE` first")
            new = decide(current, _workload(s))
            if new is None:
                return current, False
            row = FabricRow(
                version=current.version + 1,
                name=new.name,
                text=new.text,
                applied_at=now,
                applied_by=new.by,
                summary="\n".join(new.summary),
            )
            s.add(row)
            epoch.version = row.version
            epoch.epoch += 1
            sites = {site for site, _ in new.pools}
            for drain in s.scalars(select(DrainRow)):
                pool = (drain.site, drain.gpu_type)
                if drain.site not in sites or (drain.gpu_type and pool not in new.pools):
                    s.delete(drain)
            for kind, message in new.events:
                event(s, now, kind, message)
            return _record(row), True

        return self._run(work)

    # -- drains ---------------------------------------------------------------------------

    def drains(self) -> list[DrainRecord]:
        """Every drained site and pool, by site then GPU type (a whole site first)."""
        query = select(DrainRow).order_by(DrainRow.site, DrainRow.gpu_type)
        return self._read(lambda s: [_drain(r) for r in s.scalars(query)])

    def drain(
        self,
        site: str,
        gpu_type: str | None,
        *,
        by: str,
        now: float,
        reason: str | None = None,
    ) -> tuple[DrainRecord, bool]:
        """Drain ``site`` (``gpu_type`` None) or one pool of it; returns the drain and whether
        it is new (draining what is drained already changes nothing).  The caller checks that
        the site and pool exist."""

        def work(s: Session) -> tuple[DrainRecord, bool]:
            epoch = _lock_epoch(s)
            found = s.get(DrainRow, (site, gpu_type or ""))
            if found is not None:
                return _drain(found), False
            row = DrainRow(site=site, gpu_type=gpu_type or "", since=now, by=by, reason=reason)
            s.add(row)
            epoch.epoch += 1
            what = f"site {site}" if gpu_type is None else f"pool {site}/{gpu_type}"
            why = f": {reason}" if reason else ""
            kind = "site_draining" if gpu_type is None else "pool_draining"
            event(s, now, kind, f"{what} is draining: it takes no new work ({by}){why}")
            return _drain(row), True

        return self._run(work)

    def undrain(self, site: str, gpu_type: str | None, *, by: str, now: float) -> list[DrainRecord]:
        """Lift the drain of one pool, or (``gpu_type`` None) every drain at ``site``; the
        drains lifted (none: nothing was drained there)."""

        def work(s: Session) -> list[DrainRecord]:
            epoch = _lock_epoch(s)
            query = select(DrainRow).where(DrainRow.site == site)
            if gpu_type is not None:
                query = query.where(DrainRow.gpu_type == gpu_type)
            rows = list(s.scalars(query.order_by(DrainRow.gpu_type)))
            if not rows:
                return []
            s.execute(
                delete(DrainRow)
                .where(DrainRow.site == site)
                .where(DrainRow.gpu_type.in_([r.gpu_type for r in rows]))
            )
            epoch.epoch += 1
            for r in rows:
                what = f"site {site}" if not r.gpu_type else f"pool {site}/{r.gpu_type}"
                kind = "site_undrained" if not r.gpu_type else "pool_undrained"
                event(s, now, kind, f"{what} takes new work again ({by})")
            return [_drain(r) for r in rows]

        return self._run(work)


def _lock_epoch(s: Session) -> FabricEpochRow:
    query = select(FabricEpochRow).where(FabricEpochRow.id == _EPOCH_ROW).with_for_update()
    return s.scalars(query).one()


def _latest(s: Session) -> FabricRecord | None:
    row = s.scalars(select(FabricRow).order_by(FabricRow.version.desc()).limit(1)).first()
    return None if row is None else _record(row)


def _record(row: FabricRow) -> FabricRecord:
    return FabricRecord(
        version=row.version,
        name=row.name,
        text=row.text,
        applied_at=row.applied_at,
        applied_by=row.applied_by,
        summary=tuple(line for line in row.summary.splitlines() if line),
    )


def _drain(row: DrainRow) -> DrainRecord:
    return DrainRecord(
        site=row.site, gpu_type=row.gpu_type or None, since=row.since, by=row.by, reason=row.reason
    )


def _workload(s: Session) -> Workload:
    """Everything a change of fabric must not strand, as this transaction sees it."""
    attempts = s.execute(
        select(
            AttemptRow.id,
            AttemptRow.job_id,
            JobRow.team,
            AttemptRow.site,
            AttemptRow.gpu_type,
            AttemptRow.gpus,
        )
        .join(JobRow, JobRow.id == AttemptRow.job_id)
        .where(AttemptRow.state.in_(ACTIVE))
        .order_by(AttemptRow.id)
    )
    pending = s.execute(
        select(
            JobRow.id,
            JobRow.team,
            JobRow.gpus,
            JobRow.gpu_types,
            JobRow.max_sites,
            JobRow.dataset,
        )
        .where(JobRow.state == JobState.PENDING)
        .order_by(JobRow.submitted_at, JobRow.id)
    )
    transfers = s.execute(
        select(TransferRow.id, TransferRow.src, TransferRow.dst, TransferRow.paths)
        .where(TransferRow.state.in_(ACTIVE_TRANSFER_STATES))
        .order_by(TransferRow.id)
    )
    exports = s.execute(
        select(ExportRow.id, ExportRow.src, ExportRow.dst)
        .where(ExportRow.state.in_(ACTIVE_EXPORT_STATES))
        .order_by(ExportRow.id)
    )
    moving = [
        ActiveTransfer(transfer_id=tid, src=src, dst=dst, circuits=_circuits(paths))
        for tid, src, dst, paths in transfers
    ]
    moving += [ActiveTransfer(transfer_id=eid, src=src, dst=dst) for eid, src, dst in exports]
    return Workload(
        attempts=tuple(
            ActiveAttempt(attempt_id=aid, job_id=job, team=team, site=site, gpu_type=t, gpus=n)
            for aid, job, team, site, t, n in attempts
        ),
        pending=tuple(
            PendingWork(
                job_id=job,
                team=team,
                gpus=gpus,
                gpu_types=tuple(types),
                max_sites=max_sites,
                dataset=dataset,
            )
            for job, team, gpus, types, max_sites, dataset in pending
        ),
        transfers=tuple(moving),
        registered=frozenset(s.scalars(select(DatasetRow.name))),
    )


def _circuits(paths: Sequence[dict[str, object]] | None) -> frozenset[str]:
    """The circuits a transfer's last path reports name (a path is ``c1+c2``)."""
    return frozenset(
        name for p in paths or () for name in str(p.get("name", "")).split("+") if name
    )
