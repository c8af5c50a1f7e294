"""The export gate: approvals, exports, and the register every export is written to before
its first byte leaves (``docs/export.md``).

**Refusals.**  Each one is written to the register (``type: refused``) with its reason,
then raised (:class:`ForbiddenError`, 403): an export with no approval, one whose approval
is not approved yet, revoked, expired or not yet valid, for another dataset or destination,
asked for by someone else, or over its limits; a push or prefetch that would take data out
of a jurisdiction that controls exports; a de-identification that failed at the source.  A
register that cannot be written refuses everything (:class:`UnavailableError`, 503).

**An export's life** (the reconcile loop's ``export`` phase moves it on):

1. ``preparing`` — its source's agent writes the de-identified copy of the version and scans
   it as a version of ``<dataset>-deid``;
2. the copy is checked against the approval again, the ``intent`` entry (dataset, content
   hash, size, requester, approver, approval, route, individuals, …) is appended and made
   durable, and only then is the transfer created: ``sending``;
3. the transfer ends → a ``complete`` or ``failed`` entry; ``done`` or ``failed``.

A crash anywhere leaves the register and the database consistent after the next pass: the
intents and ends already in the register are found by export id and never written twice.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from onecluster.clock import Clock
from onecluster.errors import (
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PlatformError,
    UnavailableError,
)
from onecluster.export import (
    DETECTOR_VERSION,
    is_export,
    profile_from_bytes,
    required_route,
)
from onecluster.model import Fabric
from onecluster.register import Register
from onecluster.schema import ApprovalIn, ExportIn
from onecluster.server._auth import Principal
from onecluster.server._cluster_register import open_register
from onecluster.server._data_control import DataControl
from onecluster.server._views import require_site
from onecluster.store import (
    ApprovalRecord,
    ExportRecord,
    NewApproval,
    NewExport,
    Store,
    VersionRecord,
)

__all__ = ["ExportControl", "export_dataset_of"]

_log = logging.getLogger("onecluster.export")


def export_dataset_of(dataset: str) -> str:
    """The dataset an export of ``dataset`` arrives as (its de-identified versions)."""
    return f"{dataset[:59]}-deid"


class ExportControl:
    """Approvals, exports and the register; thread-safe; raises :mod:`onecluster.errors`."""

    def __init__(
        self,
        fabric: Fabric,
        store: Store,
        clock: Clock,
        data: DataControl,
        register_dir: Path,
        *,
        register_key: Path | None = None,
    ) -> None:
        """``register_dir``: the state folder's register folder (its key's default home, and
        a register from before to import); ``register_key``: the signing key's file
        (``server/_cluster_register.py``)."""
        self.fabric = fabric
        self.store = store
        self.clock = clock
        self.data = data
        self._lock = threading.Lock()
        self._intents: dict[str, int] = {}
        self._ends: dict[str, int] = {}
        self.register: Register | None = None
        self.register_error: str | None = None
        try:
            self.register = open_register(store, register_dir, register_key, clock)
        except (PlatformError, OSError) as exc:
            reason = exc.message if isinstance(exc, PlatformError) else str(exc)
            hint = f" ({exc.hint})" if isinstance(exc, PlatformError) and exc.hint else ""
            self.register_error = f"the export register cannot be used: {reason}{hint}"
            _log.error("%s; every export is refused until it is mended", self.register_error)
        self._indexed = 0  # the entries looked through for intents and ends
        if self.register is not None:
            self._check_not_replaced()
        data.refuse = self.refuse

    def _check_not_replaced(self) -> None:
        """Refuse a register that holds fewer entries than the exports name: it was
        replaced, emptied or rolled back (a new key would sign whatever it is told)."""
        assert self.register is not None
        try:
            highest = self.store.highest_register_seq()
        except PlatformError:
            return  # the database is down: the first export will say so
        if highest >= self.register.size:
            self.register_error = (
                f"{self.register.where} holds {self.register.size} entries, "
                f"but the exports name entry {highest}: it was replaced or rolled back"
            )
            _log.error("%s; every export is refused until it is restored", self.register_error)
            self.register.close()
            self.register = None

    def _index(self, register: Register) -> None:
        """Find the intents and ends in the register that were not looked through yet —
        all of them the first time an export is carried on, then those another replica (a
        leader before this one) or this one added since."""
        register.refresh()
        for entry in register.entries(self._indexed):
            export, kind = entry.get("export"), entry.get("type")
            if isinstance(export, str) and kind == "intent":
                self._intents[export] = int(entry["seq"])
            elif isinstance(export, str) and kind in ("complete", "failed", "refused"):
                self._ends[export] = int(entry["seq"])
        self._indexed = register.size

    def close(self) -> None:
        """Close the register."""
        if self.register is not None:
            self.register.close()

    # -- the register -----------------------------------------------------------------------

    def readable(self) -> Register:
        """The register (:class:`UnavailableError` when it could not be opened)."""
        return self._register()

    def _register(self) -> Register:
        """The register, up to date with what other replicas appended (one read of the
        database when nothing was)."""
        if self.register is None:
            raise UnavailableError(
                self.register_error or "the export register is not open",
                hint="every export is refused until the register can be written",
            )
        self.register.refresh()
        return self.register

    def _append(self, entry: Mapping[str, Any]) -> int:
        """Append ``entry`` durably; its seq."""
        return self._register().append(entry).seq

    def refuse(self, facts: Mapping[str, Any], reason: str) -> ForbiddenError:
        """Write a refusal to the register and return the error to raise."""
        entry = {"type": "refused", "export": _new_id(), "reason": reason, **facts}
        try:
            seq = self._append(entry)
        except PlatformError as exc:
            return ForbiddenError(
                f"{reason} (and the refusal could not be written to the register: {exc.message})"
            )
        _log.warning("export refused (register entry %d): %s", seq, reason)
        return ForbiddenError(reason, hint=f"the refusal is register entry {seq}")

    # -- approvals --------------------------------------------------------------------------

    def request(self, body: ApprovalIn, who: Principal) -> ApprovalRecord:
        """Store a requested approval (destinations must exist; the profile must parse)."""
        for site in body.destinations:
            require_site(self.fabric, site)
        if body.profile is not None:
            profile_from_bytes(body.profile.encode(), source="the profile")
        now = self.clock.now()
        return self.store.add_approval(
            NewApproval(
                dataset=body.dataset,
                destinations=tuple(body.destinations),
                purpose=body.purpose,
                categories=tuple(body.categories),
                personal=body.personal,
                sensitive=body.sensitive,
                route=body.route,
                route_ref=body.route_ref,
                profile=body.profile,
                requester=who.identity,
                requester_token=who.token_id,
                valid_from=body.valid_from if body.valid_from is not None else now,
                valid_until=body.valid_until,
                max_bytes=body.max_bytes,
                max_exports=body.max_exports,
            ),
            now=now,
        )

    def approve(self, approval_id: str, who: Principal) -> ApprovalRecord:
        """Approve a requested approval; nobody approves their own request."""
        now = self.clock.now()

        def check(a: ApprovalRecord) -> None:
            if a.state != "requested":
                msg = f"approval {a.id} is {a.state}: only a requested one can be approved"
                raise ConflictError(msg)
            if _same_person(a, who):
                msg = (
                    f"approval {a.id} was requested by {a.requester}: nobody approves their "
                    "own request"
                )
                raise ForbiddenError(msg, hint="another compliance officer must approve it")
            if a.valid_until <= now:
                msg = f"approval {a.id} expired at {_when(a.valid_until)} before it was approved"
                raise ConflictError(msg, hint="ask for a new one")

        return self.store.decide_approval(
            approval_id, "approved", who=who.identity, check=check, now=now
        )

    def revoke(self, approval_id: str, who: Principal, reason: str) -> ApprovalRecord:
        """Revoke an approval; exports under it that are still running are stopped."""

        def check(a: ApprovalRecord) -> None:
            if a.state == "revoked":
                msg = f"approval {a.id} is already revoked"
                raise ConflictError(msg)

        return self.store.decide_approval(
            approval_id,
            "revoked",
            who=who.identity,
            check=check,
            reason=reason,
            now=self.clock.now(),
        )

    # -- exports ----------------------------------------------------------------------------

    def start(self, body: ExportIn, who: Principal) -> ExportRecord:
        """Start an export under an approval, or refuse it (written to the register)."""
        require_site(self.fabric, body.to)
        self._register()
        version = self._version(body.dataset, body.version)
        sources = sorted(s for s in version.complete_at if is_export(self.fabric, s, body.to))
        facts: dict[str, Any] = {
            "via": "export",
            "dataset": body.dataset,
            "version": version.root,
            "destination": body.to,
            "requester": who.identity,
            "approval": body.approval,
        }
        if not sources:
            held = ", ".join(sorted(version.complete_at)) or "no site"
            msg = (
                f"sending {body.dataset} to {body.to} from where it is complete ({held}) takes "
                "it out of no jurisdiction that controls exports: it is no export"
            )
            raise ConflictError(msg, hint=f"push it: onecluster push {body.dataset} --to {body.to}")
        src = self.data.rank(body.to, sources)[0]
        facts["source"] = src
        try:
            approval = self.store.approval(body.approval)
        except NotFoundError as exc:
            raise self.refuse(facts, f"there is no approval {body.approval}") from exc
        now = self.clock.now()

        def check(a: ApprovalRecord) -> None:
            reason = _refusal(a, body.dataset, body.to, who, now, extra_bytes=0)
            if reason is not None:
                raise _Refused(reason)

        try:
            return self.store.start_export(
                NewExport(
                    approval_id=approval.id,
                    dataset=body.dataset,
                    root=version.root,
                    src=src,
                    dst=body.to,
                    requester=who.identity,
                    export_dataset=export_dataset_of(body.dataset),
                    profile=approval.profile,
                ),
                check=check,
                now=now,
            )
        except _Refused as refused:
            # Written once the store's transaction is over: the register is in the same
            # database, and SQLite has one writer at a time.
            raise self.refuse(facts, refused.message) from None

    def _version(self, dataset: str, root: str | None) -> VersionRecord:
        record = self.store.dataset(dataset)
        if record is None or not record.versions:
            msg = f"dataset {dataset} has no scanned version: there is nothing to export"
            raise NotFoundError(
                msg, hint=f"onecluster dataset add {dataset} --site SITE --path DIR"
            )
        if root is None:
            return record.versions[0]
        for version in record.versions:
            if version.root == root:
                return version
        msg = f"dataset {dataset} has no version {root}"
        raise NotFoundError(msg)

    # -- the reconcile phase ----------------------------------------------------------------

    def reconcile(self) -> int:
        """Move every active export on; how many changed state."""
        if self.register is None:
            return 0
        moved = 0
        with self._lock:
            active = self.store.exports(active_only=True, limit=10_000)
            if active:
                self._index(self.register)
            for export in active:
                try:
                    moved += self._step(export)
                except PlatformError as exc:
                    _log.warning("export %s: %s (retried next pass)", export.id, exc.message)
        return moved

    def _step(self, export: ExportRecord) -> int:
        if export.state == "preparing":
            return self._prepared(export)
        return self._sent(export)

    def _prepared(self, export: ExportRecord) -> int:
        state, root, deid, error = self.store.export_scan(export.id)
        now = self.clock.now()
        if state in ("queued", "scanning"):
            return 0
        facts = _facts(export)
        if state == "failed" or root is None:
            reason = f"the de-identification at {export.src} failed: {error or 'no version'}"
            end = self._refusal_entry(export, facts, reason)
            self.store.export_ended(export.id, "refused", end_seq=end, error=reason, now=now)
            return 1
        approval = self.store.approval(export.approval_id)
        version = self._version(export.export_dataset, root)
        refusal = _refusal(approval, export.dataset, export.dst, None, now, version.bytes)
        if refusal is not None:
            end = self._refusal_entry(export, facts, refusal)
            self.store.export_ended(export.id, "refused", end_seq=end, error=refusal, now=now)
            return 1
        report = deid or {}
        seq = self._intents.get(export.id)
        year, year_sensitive = self.store.year_individuals(_year_start(now))
        year += int(report.get("individuals", 0))
        year_sensitive += int(report.get("individuals_sensitive", 0))
        needed = required_route(year, min(year_sensitive, year))
        found = int(report.get("individuals", 0))
        refusal = None
        if not approval.personal and found:
            refusal = (
                f"approval {approval.id} says the data holds no personal information, but its "
                f"de-identification found {found} individuals"
            )
        elif _ROUTE_RANK[approval.route] < _ROUTE_RANK[needed.route.value.lower()]:
            refusal = (
                f"approval {approval.id} is under {approval.route}, but this export brings the "
                f"year to {needed.reason}, which needs {needed.route.value.lower()}"
            )
        if seq is None and refusal is not None:
            end = self._refusal_entry(export, facts, refusal)
            self.store.export_ended(export.id, "refused", end_seq=end, error=refusal, now=now)
            return 1
        if seq is None:
            seq = self._append(
                {
                    **facts,
                    "type": "intent",
                    "export_dataset": export.export_dataset,
                    "content_hash": root,
                    "bytes": version.bytes,
                    "files": version.files,
                    "source_jurisdiction": self.fabric.site(export.src).jurisdiction,
                    "destination_jurisdiction": self.fabric.site(export.dst).jurisdiction,
                    "relays": [],
                    "approver": approval.approver,
                    "approval_valid_from": _when(approval.valid_from),
                    "approval_valid_until": _when(approval.valid_until),
                    "purpose": approval.purpose,
                    "route": approval.route,
                    "route_ref": approval.route_ref,
                    "categories": list(approval.categories),
                    "personal": approval.personal,
                    "sensitive": approval.sensitive,
                    "deid_status": "de-identified",
                    "profile_sha256": report.get("profile_sha256"),
                    "key_id": report.get("key_id"),
                    "detector_version": report.get("detector_version", DETECTOR_VERSION),
                    "records": report.get("records", 0),
                    "findings": report.get("findings", {}),
                    "individuals": report.get("individuals", 0),
                    "individuals_sensitive": report.get("individuals_sensitive", 0),
                    "year_individuals": year,
                    "year_individuals_sensitive": year_sensitive,
                    "route_required": needed.route.value.lower(),
                    "route_warning": needed.warning,
                }
            )
            self._intents[export.id] = seq
        transfer = self.data.send(export.export_dataset, root, export.src, export.dst)
        self.store.export_sending(
            export.id,
            content_hash=root,
            bytes_total=version.bytes,
            files=version.files,
            deid=report,
            intent_seq=seq,
            transfer_id=transfer.id,
            now=now,
        )
        _log.info("export %s: register entry %d written; transfer %s", export.id, seq, transfer.id)
        return 1

    def _sent(self, export: ExportRecord) -> int:
        assert export.transfer_id is not None
        transfer = self.store.transfer(export.transfer_id)
        now = self.clock.now()
        if transfer.state in ("queued", "running", "waiting"):
            approval = self.store.approval(export.approval_id)
            if approval.state == "revoked":
                self.data.cancel(transfer.id)
            return 0
        done = transfer.state == "done"
        seq = self._ends.get(export.id)
        error = None if done else (transfer.error or f"transfer {transfer.id} {transfer.state}")
        if seq is None:
            entry: dict[str, Any] = {
                "type": "complete" if done else "failed",
                "export": export.id,
                "intent_seq": export.intent_seq,
                "transfer": transfer.id,
                "content_hash": transfer.root,
                "bytes_sent": transfer.bytes_sent,
                "bytes_received": transfer.bytes_done,
            }
            if error is not None:
                entry["reason"] = error
            seq = self._append(entry)
            self._ends[export.id] = seq
        self.store.export_ended(
            export.id, "done" if done else "failed", end_seq=seq, error=error, now=now
        )
        return 1

    def _refusal_entry(self, export: ExportRecord, facts: Mapping[str, Any], reason: str) -> int:
        seq = self._ends.get(export.id)
        if seq is None:
            seq = self._append({**facts, "type": "refused", "reason": reason})
            self._ends[export.id] = seq
        return seq


class _Refused(ForbiddenError):
    """An export refused under the approval's lock, written to the register after."""


#: The legal routes from the weakest; a certification has a standard contract's ceiling.
_ROUTE_RANK = {
    "exempt": 0,
    "standard_contract": 1,
    "certification": 1,
    "security_assessment": 2,
}


def _facts(export: ExportRecord) -> dict[str, Any]:
    return {
        "export": export.id,
        "via": "export",
        "dataset": export.dataset,
        "version": export.root,
        "source": export.src,
        "destination": export.dst,
        "requester": export.requester,
        "approval": export.approval_id,
        "profile": export.profile is not None,
    }


def _refusal(  # noqa: PLR0917 -- the facts of one decision
    a: ApprovalRecord,
    dataset: str,
    dst: str,
    who: Principal | None,
    now: float,
    extra_bytes: int,
) -> str | None:
    """Why approval ``a`` does not cover this export (``None``: it does)."""
    if a.state != "approved":
        why = f": {a.reason}" if a.reason else ""
        return f"approval {a.id} is {a.state}, not approved{why}"
    if now < a.valid_from:
        return f"approval {a.id} is valid only from {_when(a.valid_from)}"
    if now >= a.valid_until:
        return f"approval {a.id} expired at {_when(a.valid_until)}"
    if not a.covers(dataset):
        return f"approval {a.id} covers {a.dataset}, not {dataset}"
    if dst not in a.destinations:
        return f"approval {a.id} covers exports to {', '.join(a.destinations)}, not to {dst}"
    if who is not None and not _same_person(a, who):
        return f"approval {a.id} was asked for by {a.requester}, not by {who.identity}"
    if who is not None and a.max_exports is not None and a.exports_used >= a.max_exports:
        return f"approval {a.id} allows {a.max_exports} exports and all were made"
    if a.bytes_used + extra_bytes > a.max_bytes or (
        not extra_bytes and a.bytes_used >= a.max_bytes
    ):
        return (
            f"approval {a.id} allows {a.max_bytes} bytes; {a.bytes_used} were exported and "
            f"this export is {extra_bytes} more"
        )
    return None


def _same_person(a: ApprovalRecord, who: Principal) -> bool:
    if who.token_id == a.requester_token:
        return True
    return who.holder is not None and a.requester.startswith(f"{who.holder} (")


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _year_start(now: float) -> float:
    year = datetime.fromtimestamp(now, UTC).year
    return datetime(year, 1, 1, tzinfo=UTC).timestamp()


def _new_id() -> str:
    """The id of a refused export (one that never started)."""
    return f"x-{time.time_ns() // 1000:013x}{secrets.token_hex(3)}"
