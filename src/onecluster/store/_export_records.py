"""What the store hands out about exports: approvals and exports as frozen values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ACTIVE_EXPORT_STATES", "ApprovalRecord", "ExportRecord", "NewApproval", "NewExport"]

ApprovalState = Literal["requested", "approved", "revoked"]
ExportState = Literal["preparing", "sending", "done", "failed", "refused"]

#: Exports the reconcile loop carries on.
ACTIVE_EXPORT_STATES: frozenset[str] = frozenset({"preparing", "sending"})


@dataclass(frozen=True, slots=True, kw_only=True)
class NewApproval:
    """An approval as a requester asks for it."""

    dataset: str
    destinations: tuple[str, ...]
    purpose: str
    categories: tuple[str, ...]
    personal: bool
    sensitive: bool
    route: str
    route_ref: str
    profile: str | None
    requester: str
    requester_token: str
    valid_from: float
    valid_until: float
    max_bytes: int
    max_exports: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRecord(NewApproval):
    """An approval, with its state and what was exported under it."""

    id: str
    state: ApprovalState
    approver: str | None
    bytes_used: int
    exports_used: int
    reason: str | None
    created_at: float
    decided_at: float | None

    def covers(self, dataset: str) -> bool:
        """Whether ``dataset`` is the approval's dataset or one of its family (``name*``)."""
        if self.dataset.endswith("*"):
            return dataset.startswith(self.dataset[:-1])
        return dataset == self.dataset


@dataclass(frozen=True, slots=True, kw_only=True)
class NewExport:
    """An export as it starts: version ``root`` of ``dataset`` from ``src`` to ``dst``."""

    approval_id: str
    dataset: str
    root: str
    src: str
    dst: str
    requester: str
    export_dataset: str
    profile: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportRecord(NewExport):
    """An export and how far it is."""

    id: str
    state: ExportState
    scan_id: str | None
    content_hash: str | None
    bytes: int
    files: int
    individuals: int
    individuals_sensitive: int
    findings: dict[str, Any] = field(default_factory=dict)
    transfer_id: str | None
    intent_seq: int | None
    end_seq: int | None
    error: str | None
    created_at: float
    finished_at: float | None
