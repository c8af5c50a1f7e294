"""Dataset routes: register a directory as a dataset (a scan), list and show datasets, follow
a scan; push a version to a site (a transfer), list, show and cancel transfers.

Any role reads; admins and members register, push and cancel (datasets belong to no team).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Response

from onecluster.model import MAX_LABEL
from onecluster.schema import (
    MAX_ID,
    DatasetAdd,
    DatasetOut,
    ErrorOut,
    PushIn,
    ScanOut,
    TransferOut,
)
from onecluster.server._deps import Caller, Control

__all__ = ["router"]

router = APIRouter(prefix="/api/v1", tags=["data"])

DatasetName = Annotated[str, Path(max_length=MAX_LABEL)]
ScanId = Annotated[str, Path(max_length=MAX_ID)]
TransferId = Annotated[str, Path(max_length=MAX_ID)]

_DATA = "datasets and transfers"


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorOut, "description": description}


@router.post(
    "/datasets",
    status_code=202,
    responses={404: _error("There is no such site.")},
)
def add_dataset(body: DatasetAdd, control: Control, caller: Caller) -> ScanOut:
    """Register the directory ``path`` at ``site`` as dataset ``name`` (new, or a new version
    of it): its agent scans it in place.  The answer is the queued scan; follow it with
    ``GET /scans/{id}``.  Asking again while that scan runs answers the same scan.  A name
    the fabric declares is fine: it gets real versions."""
    caller.require_member(_DATA)
    return control.data.add(body)


@router.get("/datasets")
def list_datasets(control: Control, _caller: Caller) -> list[DatasetOut]:
    """Every registered dataset and every one the fabric declares, by name, with their
    versions (newest first) and the replicas of each."""
    return control.data.datasets()


@router.get("/datasets/{name}", responses={404: _error("There is no such dataset.")})
def show_dataset(name: DatasetName, control: Control, _caller: Caller) -> DatasetOut:
    """One dataset (404 names the known ones)."""
    return control.data.dataset(name)


@router.get("/scans/{scan_id}", responses={404: _error("There is no such scan.")})
def show_scan(scan_id: ScanId, control: Control, _caller: Caller) -> ScanOut:
    """A scan: its progress and, once done, the version it found."""
    return control.data.scan(scan_id)


@router.post(
    "/transfers",
    status_code=201,
    responses={
        200: {
            "model": TransferOut,
            "description": "The same version is already on its way to that site (that "
            "transfer), or the site holds all of it already (a transfer done at once).",
        },
        404: _error("There is no such dataset, site or version."),
        403: _error(
            "Every site it could be sent from would take it out of a jurisdiction that "
            "controls exports: that needs an approved export (`POST /exports`).  The refusal "
            "is written to the export register."
        ),
        409: _error(
            "Nothing to send from: the dataset has no scanned version yet, the site named "
            "in `from` holds no complete replica of it, or no site does."
        ),
    },
)
def push(body: PushIn, control: Control, caller: Caller, response: Response) -> TransferOut:
    """Send a version of a dataset (default: its latest) to site ``to``, from ``from`` or
    else from the site holding all of it with the most direct circuit capacity to ``to``.
    201 with a new transfer; 200 when nothing new was needed (see that answer)."""
    caller.require_member(_DATA)
    transfer, created = control.data.push(body, caller.identity)
    if not created:
        response.status_code = 200
    return transfer


@router.get("/transfers")
def list_transfers(
    *,
    control: Control,
    _caller: Caller,
    state: Literal["active", "all"] = "active",
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> list[TransferOut]:
    """Transfers, newest first: those not ended (``state=active``), or every one."""
    return control.data.transfers(active_only=state == "active", limit=limit)


@router.get("/transfers/{transfer_id}", responses={404: _error("There is no such transfer.")})
def show_transfer(transfer_id: TransferId, control: Control, _caller: Caller) -> TransferOut:
    """One transfer: its progress, the paths it uses and what each carries."""
    return control.data.transfer(transfer_id)


@router.post(
    "/transfers/{transfer_id}/cancel",
    responses={
        404: _error("There is no such transfer."),
        409: _error("The transfer has already ended."),
    },
)
def cancel_transfer(transfer_id: TransferId, control: Control, caller: Caller) -> TransferOut:
    """Cancel a transfer; its agents stop it at their next sync (409 if it already ended).
    What the destination verified so far stays there, as a partial replica."""
    caller.require_member(_DATA)
    return control.data.cancel(transfer_id)
