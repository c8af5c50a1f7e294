"""Export routes: approvals (members ask, compliance approves or revokes), exports (members
start them under an approval), and the register (compliance and auditors read it: its
signed head, entries, proofs and a month's bundle).

Admins and members ask for approvals and start exports; only ``compliance`` tokens approve
or revoke; every role but ``agent`` reads.
"""

from __future__ import annotations

import base64
import tempfile
from dataclasses import asdict
from pathlib import Path as FilePath
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from onecluster.errors import ValidationError
from onecluster.register import write_bundle
from onecluster.schema import (
    MAX_ID,
    ApprovalIn,
    ApprovalOut,
    ErrorOut,
    ExportIn,
    ExportOut,
    RegisterBundleOut,
    RegisterEntriesOut,
    RegisterHeadOut,
    RegisterProofOut,
    RevokeIn,
)
from onecluster.server._auth import Principal
from onecluster.server._deps import Caller, Control
from onecluster.store import ApprovalRecord, ExportRecord

__all__ = ["router"]

router = APIRouter(prefix="/api/v1", tags=["exports"])

ApprovalId = Annotated[str, Path(max_length=MAX_ID)]
ExportId = Annotated[str, Path(max_length=MAX_ID)]
Month = Annotated[
    str, Query(pattern=r"^2\d{3}-(0[1-9]|1[0-2])$", description="YYYY-MM, from 2000 to 2999")
]
_READERS = ("admin", "member", "compliance", "auditor")
_MAX_SEQ = 2**53 - 1


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorOut, "description": description}


def _read(caller: Principal) -> None:
    caller.require_role(_READERS, "read exports")


# -- approvals ---------------------------------------------------------------------------------


@router.post(
    "/exports/approvals",
    status_code=201,
    responses={404: _error("A destination is no site."), 422: _error("The profile is invalid.")},
)
def request_approval(body: ApprovalIn, control: Control, caller: Caller) -> ApprovalOut:
    """Ask for an approval to export a dataset (or a family, ``name*``); a compliance
    officer other than you approves it."""
    caller.require_member("exports")
    return approval_out(control.exports.request(body, caller))


@router.get("/exports/approvals")
def list_approvals(
    control: Control,
    caller: Caller,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> list[ApprovalOut]:
    """Approvals, newest first."""
    _read(caller)
    return [approval_out(a) for a in control.store.approvals(limit=limit)]


@router.get("/exports/approvals/{approval_id}", responses={404: _error("No such approval.")})
def show_approval(approval_id: ApprovalId, control: Control, caller: Caller) -> ApprovalOut:
    """One approval."""
    _read(caller)
    return approval_out(control.store.approval(approval_id))


@router.post(
    "/exports/approvals/{approval_id}/approve",
    responses={
        404: _error("No such approval."),
        409: _error("It is not requested any more, or it expired."),
    },
)
def approve(approval_id: ApprovalId, control: Control, caller: Caller) -> ApprovalOut:
    """Approve a requested approval (compliance only; 403 for your own request)."""
    caller.require_role(("compliance",), "approve exports")
    return approval_out(control.exports.approve(approval_id, caller))


@router.post(
    "/exports/approvals/{approval_id}/revoke",
    responses={404: _error("No such approval."), 409: _error("It is revoked already.")},
)
def revoke(
    approval_id: ApprovalId, body: RevokeIn, control: Control, caller: Caller
) -> ApprovalOut:
    """Revoke an approval (compliance only); exports under it still sending are stopped."""
    caller.require_role(("compliance",), "revoke approvals")
    return approval_out(control.exports.revoke(approval_id, caller, body.reason))


# -- exports -----------------------------------------------------------------------------------


@router.post(
    "/exports",
    status_code=202,
    responses={
        403: _error(
            "Refused (written to the register): the approval is missing, not approved, "
            "revoked, expired, for another dataset, destination or requester, or used up."
        ),
        404: _error("No such dataset, version or site."),
        409: _error("It is no export: no source would take it out of a jurisdiction."),
        503: _error("The export register cannot be written: every export is refused."),
    },
)
def start_export(body: ExportIn, control: Control, caller: Caller) -> ExportOut:
    """Export a version of a dataset to a site under an approval: it is de-identified at its
    source, written to the register, then sent.  Follow it with ``GET /exports/{id}``."""
    caller.require_member("exports")
    return export_out(control.exports.start(body, caller))


@router.get("/exports")
def list_exports(
    control: Control,
    caller: Caller,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> list[ExportOut]:
    """Exports, newest first."""
    _read(caller)
    return [export_out(x) for x in control.store.exports(limit=limit)]


@router.get("/exports/{export_id}", responses={404: _error("No such export.")})
def show_export(export_id: ExportId, control: Control, caller: Caller) -> ExportOut:
    """One export."""
    _read(caller)
    return export_out(control.store.export(export_id))


# -- the register ------------------------------------------------------------------------------


@router.get("/register/head", responses={503: _error("The register cannot be read.")})
def register_head(control: Control, caller: Caller) -> RegisterHeadOut:
    """The register's latest signed tree head and its public key."""
    _read(caller)
    register = control.exports.readable()
    head = register.head()
    return RegisterHeadOut(
        origin=head.origin,
        size=head.size,
        root=head.root.hex(),
        timestamp=head.timestamp,
        note=head.note(),
        signature=base64.b64encode(head.signature).decode(),
        public_key=base64.b64encode(register.public_key()).decode(),
    )


@router.get("/register/entries", responses={503: _error("The register cannot be read.")})
def register_entries(
    control: Control,
    caller: Caller,
    first: Annotated[int, Query(ge=0, le=_MAX_SEQ)] = 0,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> RegisterEntriesOut:
    """Entries from ``first``, as their exact canonical JSON text."""
    _read(caller)
    register = control.exports.readable()
    size = register.size
    last = min(size, first + limit)
    texts = [register.entry_bytes(i).decode() for i in range(first, last)] if first < size else []
    return RegisterEntriesOut(first=first, size=size, entries=texts)


@router.get(
    "/register/proof",
    responses={
        422: _error("No such entry or tree size."),
        503: _error("The register cannot be read."),
    },
)
def register_proof(
    control: Control,
    caller: Caller,
    seq: Annotated[int | None, Query(ge=0, le=_MAX_SEQ)] = None,
    size1: Annotated[int | None, Query(ge=1, le=_MAX_SEQ)] = None,
    size: Annotated[int | None, Query(ge=1, le=_MAX_SEQ)] = None,
) -> RegisterProofOut:
    """The inclusion proof of entry ``seq``, or the consistency proof from tree size
    ``size1``, in the tree of ``size`` entries (default: the signed head's)."""
    _read(caller)
    register = control.exports.readable()
    head = register.head()
    size = head.size if size is None else size
    if (seq is None) == (size1 is None):
        msg = "give either seq (an inclusion proof) or size1 (a consistency proof)"
        raise ValidationError(msg)
    if size > head.size:
        msg = f"the register's signed head covers {head.size} entries, not {size}"
        raise ValidationError(msg)
    try:
        if seq is not None:
            if seq >= size:
                msg = f"there is no entry {seq} in a tree of {size}"
                raise ValidationError(msg)
            proof = register.inclusion_proof(seq, size)
        else:
            assert size1 is not None
            if size1 > size:
                msg = f"size1 ({size1}) is larger than size ({size})"
                raise ValidationError(msg)
            proof = register.consistency_proof(size1, size)
    except ValueError as exc:
        raise ValidationError(str(exc)) from exc
    root = register.root(size).hex()
    return RegisterProofOut(
        kind="inclusion" if seq is not None else "consistency",
        seq=seq,
        size1=size1,
        size=size,
        root=root,
        proof=[p.hex() for p in proof],
    )


@router.get(
    "/register/bundle",
    responses={503: _error("The register cannot be read.")},
)
def register_bundle(month: Month, control: Control, caller: Caller) -> RegisterBundleOut:
    """The month's register bundle for regulators (entries, proofs, signed heads, public
    key, CSV, JSON and printable HTML), as file name → text."""
    _read(caller)
    register = control.exports.readable()
    with tempfile.TemporaryDirectory() as scratch:
        out = FilePath(scratch) / "bundle"
        summary = write_bundle(register, month, out)
        files = {
            str(p.relative_to(out)): p.read_bytes().decode("utf-8")
            for p in sorted(out.rglob("*"))
            if p.is_file()
        }
    return RegisterBundleOut(month=month, count=summary.count, files=files)


# -- views -------------------------------------------------------------------------------------


def approval_out(a: ApprovalRecord) -> ApprovalOut:
    """An approval on the wire (its requester's token id stays inside)."""
    return ApprovalOut.model_validate(asdict(a))


def export_out(x: ExportRecord) -> ExportOut:
    """An export on the wire."""
    fields = asdict(x)
    renamed = {"approval_id": "approval", "root": "version", "transfer_id": "transfer"}
    return ExportOut.model_validate({renamed.get(k, k): v for k, v in fields.items()})
