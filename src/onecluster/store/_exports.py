"""Approvals and exports (mixed into :class:`~onecluster.store.Store`).

An export starts as a de-identification *scan* at its source (the agent there writes the
de-identified copy and scans it as a version of ``export_dataset``), then becomes a
transfer of that version once its register entry is written; the server's reconcile loop
moves it on (``server/_exports.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from onecluster.errors import NotFoundError
from onecluster.store._export_records import (
    ACTIVE_EXPORT_STATES,
    ApprovalRecord,
    ApprovalState,
    ExportRecord,
    ExportState,
    NewApproval,
    NewExport,
)
from onecluster.store._push import new_id
from onecluster.store._tables import ApprovalRow, DatasetRow, ExportRow, ScanRow
from onecluster.store._transactions import Transactions
from onecluster.store._transitions import event

__all__ = ["Exports"]

#: Checks an approval just before an export takes a share of it (under its row's lock); it
#: raises the refusal.
ApprovalCheck = Callable[[ApprovalRecord], None]


class Exports(Transactions):
    """Approvals and exports; unknown ones raise :class:`NotFoundError`, a change that the
    current state forbids raises :class:`ConflictError`."""

    # -- approvals --------------------------------------------------------------------------

    def add_approval(self, new: NewApproval, *, now: float) -> ApprovalRecord:
        """Store a requested approval."""

        def work(s: Session) -> ApprovalRecord:
            row = ApprovalRow(
                id=new_id("a"),
                dataset=new.dataset,
                destinations=list(new.destinations),
                purpose=new.purpose,
                categories=list(new.categories),
                personal=new.personal,
                sensitive=new.sensitive,
                route=new.route,
                route_ref=new.route_ref,
                profile=new.profile,
                requester=new.requester,
                requester_token=new.requester_token,
                approver=None,
                state="requested",
                valid_from=new.valid_from,
                valid_until=new.valid_until,
                max_bytes=new.max_bytes,
                max_exports=new.max_exports,
                bytes_used=0,
                exports_used=0,
                reason=None,
                created_at=now,
                decided_at=None,
            )
            s.add(row)
            event(s, now, "approval_requested", f"approval {row.id} of {new.dataset} requested")
            return approval_record(row)

        return self._run(work)

    def approval(self, approval_id: str) -> ApprovalRecord:
        """One approval."""
        return self._read(lambda s: approval_record(_approval(s, approval_id)))

    def approvals(self, *, limit: int = 100) -> list[ApprovalRecord]:
        """Approvals, newest first."""

        def work(s: Session) -> list[ApprovalRecord]:
            rows = s.scalars(
                select(ApprovalRow)
                .order_by(ApprovalRow.created_at.desc(), ApprovalRow.id.desc())
                .limit(limit)
            )
            return [approval_record(r) for r in rows]

        return self._read(work)

    def decide_approval(
        self,
        approval_id: str,
        state: ApprovalState,
        *,
        who: str,
        check: ApprovalCheck,
        reason: str | None = None,
        now: float,
    ) -> ApprovalRecord:
        """Approve a requested approval or revoke one (``check`` raises what forbids it)."""

        def work(s: Session) -> ApprovalRecord:
            row = _approval(s, approval_id, lock=True)
            check(approval_record(row))
            row.state, row.decided_at = state, now
            if state == "approved":
                row.approver = who
            row.reason = reason if state == "revoked" else row.reason
            event(s, now, f"approval_{state}", f"approval {row.id} {state} by {who}")
            return approval_record(row)

        return self._run(work)

    # -- exports ----------------------------------------------------------------------------

    def start_export(self, new: NewExport, *, check: ApprovalCheck, now: float) -> ExportRecord:
        """Take one export of the approval (``check`` raises a refusal, under its lock) and
        queue the de-identification of the version at its source."""

        def work(s: Session) -> ExportRecord:
            approval = _approval(s, new.approval_id, lock=True)
            check(approval_record(approval))
            approval.exports_used += 1
            if s.get(DatasetRow, new.export_dataset) is None:
                try:
                    with s.begin_nested():
                        s.add(DatasetRow(name=new.export_dataset, created_at=now))
                except IntegrityError:
                    pass
            export_id = new_id("x")
            scan = ScanRow(
                id=new_id("s"),
                dataset=new.export_dataset,
                site=new.src,
                path="",
                state="queued",
                files_done=0,
                bytes_done=0,
                created_at=now,
                export_id=export_id,
                source_dataset=new.dataset,
                source_root=new.root,
                profile=new.profile,
            )
            s.add(scan)
            row = ExportRow(
                id=export_id,
                approval_id=new.approval_id,
                dataset=new.dataset,
                root=new.root,
                src=new.src,
                dst=new.dst,
                requester=new.requester,
                state="preparing",
                export_dataset=new.export_dataset,
                scan_id=scan.id,
                bytes=0,
                files=0,
                individuals=0,
                individuals_sensitive=0,
                findings={},
                created_at=now,
            )
            s.add(row)
            event(
                s,
                now,
                "export_preparing",
                f"export {row.id}: {new.dataset}@{new.root[:12]} from {new.src} to {new.dst} "
                f"under approval {new.approval_id}; de-identifying at {new.src}",
            )
            return export_record(row, profile=new.profile)

        return self._run(work)

    def export(self, export_id: str) -> ExportRecord:
        """One export."""
        return self._read(lambda s: _export_out(s, _export(s, export_id)))

    def exports(self, *, active_only: bool = False, limit: int = 100) -> list[ExportRecord]:
        """Exports, newest first (those not ended, or every one)."""

        def work(s: Session) -> list[ExportRecord]:
            query = select(ExportRow)
            if active_only:
                query = query.where(ExportRow.state.in_(ACTIVE_EXPORT_STATES))
            rows = s.scalars(query.order_by(ExportRow.created_at.desc()).limit(limit))
            return [_export_out(s, r) for r in rows]

        return self._read(work)

    def export_scan(self, export_id: str) -> tuple[str, str | None, dict[str, Any] | None, str]:
        """The state, version found, de-identification report and error of the export's
        scan."""

        def work(s: Session) -> tuple[str, str | None, dict[str, Any] | None, str]:
            row = _export(s, export_id)
            scan = s.get(ScanRow, row.scan_id) if row.scan_id else None
            if scan is None:
                return "failed", None, None, "its de-identification scan is gone"
            return scan.state, scan.root, scan.deid, scan.error or ""

        return self._read(work)

    def export_sending(
        self,
        export_id: str,
        *,
        content_hash: str,
        bytes_total: int,
        files: int,
        deid: dict[str, Any],
        intent_seq: int,
        transfer_id: str,
        now: float,
    ) -> ExportRecord:
        """The export's entry is in the register and its transfer runs."""

        def work(s: Session) -> ExportRecord:
            row = _export(s, export_id, lock=True)
            if row.state != "preparing":
                return _export_out(s, row)
            approval = _approval(s, row.approval_id, lock=True)
            approval.bytes_used += bytes_total
            row.state, row.content_hash, row.bytes, row.files = (
                "sending",
                content_hash,
                bytes_total,
                files,
            )
            row.individuals = int(deid.get("individuals", 0))
            row.individuals_sensitive = int(deid.get("individuals_sensitive", 0))
            row.findings = dict(deid.get("findings", {}))
            row.intent_seq, row.transfer_id = intent_seq, transfer_id
            event(
                s,
                now,
                "export_sending",
                f"export {row.id}: register entry {intent_seq} written; transfer {transfer_id}",
            )
            return _export_out(s, row)

        return self._run(work)

    def export_ended(
        self,
        export_id: str,
        state: ExportState,
        *,
        end_seq: int | None,
        error: str | None,
        now: float,
    ) -> ExportRecord:
        """The export is done, failed or refused (its entry ``end_seq`` in the register)."""

        def work(s: Session) -> ExportRecord:
            row = _export(s, export_id, lock=True)
            if row.state not in ACTIVE_EXPORT_STATES:
                return _export_out(s, row)
            row.state, row.end_seq, row.error, row.finished_at = state, end_seq, error, now
            if state == "refused":  # nothing left: the approval's export is given back
                approval = _approval(s, row.approval_id, lock=True)
                approval.exports_used = max(0, approval.exports_used - 1)
            if row.scan_id and state != "done":
                scan = s.get(ScanRow, row.scan_id, with_for_update=True)
                if scan is not None and scan.state in ("queued", "scanning"):
                    scan.state, scan.error, scan.finished_at = "failed", error, now
            event(
                s,
                now,
                f"export_{state}",
                f"export {row.id} {state}" + (f": {error}" if error else ""),
            )
            return _export_out(s, row)

        return self._run(work)

    def highest_register_seq(self) -> int:
        """The highest register entry any export names (-1: none)."""

        def work(s: Session) -> int:
            top = s.execute(
                select(func.max(ExportRow.intent_seq), func.max(ExportRow.end_seq))
            ).one()
            return max((v for v in top if v is not None), default=-1)

        return self._read(work)

    def year_individuals(self, since: float) -> tuple[int, int]:
        """Individuals exported since ``since`` (sums over exports: an upper bound of the
        distinct ones), and the sensitive among them."""

        def work(s: Session) -> tuple[int, int]:
            rows = s.execute(
                select(ExportRow.individuals, ExportRow.individuals_sensitive).where(
                    ExportRow.created_at >= since, ExportRow.state.in_(("sending", "done"))
                )
            )
            total = sensitive = 0
            for a, b in rows:
                total, sensitive = total + a, sensitive + b
            return total, sensitive

        return self._read(work)


def _approval(s: Session, approval_id: str, *, lock: bool = False) -> ApprovalRow:
    row = s.get(ApprovalRow, approval_id, with_for_update=lock)
    if row is None:
        msg = f"there is no approval {approval_id}"
        raise NotFoundError(msg, hint="`onecluster export approvals` lists them")
    return row


def _export(s: Session, export_id: str, *, lock: bool = False) -> ExportRow:
    row = s.get(ExportRow, export_id, with_for_update=lock)
    if row is None:
        msg = f"there is no export {export_id}"
        raise NotFoundError(msg, hint="`onecluster export list` lists them")
    return row


def _export_out(s: Session, row: ExportRow) -> ExportRecord:
    scan = s.get(ScanRow, row.scan_id) if row.scan_id else None
    return export_record(row, profile=scan.profile if scan is not None else None)


def approval_record(row: ApprovalRow) -> ApprovalRecord:
    """The value of an approval row."""
    return ApprovalRecord(
        id=row.id,
        dataset=row.dataset,
        destinations=tuple(row.destinations),
        purpose=row.purpose,
        categories=tuple(row.categories),
        personal=row.personal,
        sensitive=row.sensitive,
        route=row.route,
        route_ref=row.route_ref,
        profile=row.profile,
        requester=row.requester,
        requester_token=row.requester_token,
        valid_from=row.valid_from,
        valid_until=row.valid_until,
        max_bytes=row.max_bytes,
        max_exports=row.max_exports,
        state=cast("ApprovalState", row.state),
        approver=row.approver,
        bytes_used=row.bytes_used,
        exports_used=row.exports_used,
        reason=row.reason,
        created_at=row.created_at,
        decided_at=row.decided_at,
    )


def export_record(row: ExportRow, *, profile: str | None) -> ExportRecord:
    """The value of an export row."""
    return ExportRecord(
        id=row.id,
        approval_id=row.approval_id,
        dataset=row.dataset,
        root=row.root,
        src=row.src,
        dst=row.dst,
        requester=row.requester,
        export_dataset=row.export_dataset,
        profile=profile,
        state=cast("ExportState", row.state),
        scan_id=row.scan_id,
        content_hash=row.content_hash,
        bytes=row.bytes,
        files=row.files,
        individuals=row.individuals,
        individuals_sensitive=row.individuals_sensitive,
        findings=dict(row.findings or {}),
        transfer_id=row.transfer_id,
        intent_seq=row.intent_seq,
        end_seq=row.end_seq,
        error=row.error,
        created_at=row.created_at,
        finished_at=row.finished_at,
    )
