"""Audited exports on the wire: approvals, exports and the register's heads and proofs.

A member asks for an *approval* (``POST /exports/approvals``); a compliance officer approves
or revokes it; a member then starts an *export* under it (``POST /exports``), which is
de-identified at its source and written to the register before its first byte leaves.
Auditors read the register: its signed head, its entries, inclusion and consistency proofs,
and a month's bundle (``docs/export.md``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, model_validator

from onecluster.schema._bounds import STRICT, Count, DatasetName, Id, SiteName, Text
from onecluster.schema._data import Root

__all__ = [
    "ApprovalIn",
    "ApprovalOut",
    "ExportIn",
    "ExportOut",
    "RegisterBundleOut",
    "RegisterEntriesOut",
    "RegisterHeadOut",
    "RegisterProofOut",
    "RevokeIn",
    "Route",
]

Route = Literal["security_assessment", "standard_contract", "certification", "exempt"]

#: A dataset's name, or a family of them: a prefix ending in ``*`` (``patients-*``).
DatasetOrFamily = Annotated[
    str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_.-]{0,62}\*?$")
]
Category = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_.:-]*$")]
Seconds = Annotated[float, Field(ge=0, le=4_102_444_800, allow_inf_nan=False)]  # ≤ 2100


class ApprovalIn(BaseModel):
    """``POST /exports/approvals``: ask for an approval to export ``dataset`` (or a family)
    to ``destinations`` for ``purpose``, under a legal ``route``, de-identified by
    ``profile`` (YAML, ``docs/export.md``; none: every detector on every field), valid from
    ``valid_from`` (default now) until ``valid_until`` (Unix seconds), for at most
    ``max_bytes`` (of de-identified data, all exports together) and ``max_exports``."""

    model_config = STRICT

    dataset: DatasetOrFamily
    destinations: list[SiteName] = Field(min_length=1, max_length=32)
    purpose: Text = Field(min_length=1)
    categories: list[Category] = Field(default_factory=list, max_length=64)
    personal: bool
    sensitive: bool = False
    route: Route
    route_ref: Text = Field(min_length=1)
    profile: Text | None = None
    valid_from: Seconds | None = None
    valid_until: Seconds
    max_bytes: Count = Field(gt=0)
    max_exports: Count | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _consistent(self) -> ApprovalIn:
        if self.valid_from is not None and self.valid_until <= self.valid_from:
            msg = "valid_until must come after valid_from"
            raise ValueError(msg)
        if self.sensitive and not self.personal:
            msg = "sensitive personal information is personal information: set personal too"
            raise ValueError(msg)
        if len(set(self.destinations)) != len(self.destinations):
            msg = "a destination is listed twice"
            raise ValueError(msg)
        return self


class RevokeIn(BaseModel):
    """``POST /exports/approvals/{id}/revoke``: why."""

    model_config = STRICT

    reason: Text = Field(min_length=1)


class ApprovalOut(BaseModel):
    """An approval and what was exported under it."""

    id: str
    state: Literal["requested", "approved", "revoked"]
    dataset: str
    destinations: list[str]
    purpose: str
    categories: list[str]
    personal: bool
    sensitive: bool
    route: str
    route_ref: str
    profile: str | None
    requester: str
    approver: str | None
    valid_from: float
    valid_until: float
    max_bytes: int
    max_exports: int | None
    bytes_used: int
    exports_used: int
    reason: str | None
    created_at: float
    decided_at: float | None


class ExportIn(BaseModel):
    """``POST /exports``: export version ``version`` (default: the latest) of ``dataset`` to
    site ``to`` under approval ``approval``."""

    model_config = STRICT

    dataset: DatasetName
    to: SiteName
    approval: Id
    version: Root | None = None


class ExportOut(BaseModel):
    """An export: ``preparing`` (being de-identified at its source), ``sending`` (its
    register entry written, its transfer running), ``done``, ``failed`` or ``refused``.
    ``content_hash`` is the de-identified version's root, the hash the register records;
    ``export_dataset`` is the dataset it arrives as."""

    id: str
    state: Literal["preparing", "sending", "done", "failed", "refused"]
    approval: str
    dataset: str
    version: str
    src: str
    dst: str
    requester: str
    export_dataset: str
    content_hash: str | None
    bytes: int
    files: int
    individuals: int
    individuals_sensitive: int
    findings: dict[str, int]
    transfer: str | None
    intent_seq: int | None
    end_seq: int | None
    error: str | None
    created_at: float
    finished_at: float | None


class RegisterHeadOut(BaseModel):
    """The register's latest signed tree head (C2SP checkpoint ``note`` and its Ed25519
    ``signature``, base64), and the log's public key (base64 of the raw 32 bytes)."""

    origin: str
    size: int
    root: str
    timestamp: str
    note: str
    signature: str
    public_key: str


class RegisterEntriesOut(BaseModel):
    """Entries ``first`` … ``first + len(entries) - 1`` of the register, each as its exact
    canonical JSON text (the leaf data the tree hashes)."""

    first: int
    size: int
    entries: list[str]


class RegisterProofOut(BaseModel):
    """An inclusion proof of entry ``seq`` in the tree of ``size`` entries, or a consistency
    proof from ``size1`` to ``size`` (hex digests, RFC 9162 order)."""

    kind: Literal["inclusion", "consistency"]
    seq: int | None = None
    size1: int | None = None
    size: int
    root: str
    proof: list[str]


class RegisterBundleOut(BaseModel):
    """A month's register bundle: file name → text (write them into one directory and run
    ``onecluster export verify`` on it)."""

    month: str
    count: int
    files: dict[str, str]
