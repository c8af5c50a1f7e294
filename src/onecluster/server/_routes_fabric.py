"""Fabric routes: the fabric in force, a change of it (diff, dry run, apply), and drains.

A change goes to the database; every replica swaps to it at its next
:meth:`~onecluster.server.ControlPlane.refresh_fabric` (the one that applied it, at once).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from onecluster.schema import (
    DrainIn,
    DrainOut,
    ErrorOut,
    FabricApply,
    FabricApplyOut,
    FabricOut,
    UndrainIn,
)
from onecluster.server._deps import Caller, Control

__all__ = ["router"]

router = APIRouter(prefix="/api/v1")

_NO_SITE: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "There is no such site or pool."}
}


@router.get("/fabric", tags=["fabric"])
def fabric(control: Control, _caller: Caller) -> FabricOut:
    """The fabric in force: its version, its YAML as applied, who applied it and when, what
    it changed, and the drained sites and pools."""
    return control.fabric_in_force()


@router.post(
    "/fabric",
    tags=["admin"],
    responses={
        400: {"model": ErrorOut, "description": "The file is not a valid fabric."},
        409: {
            "model": ErrorOut,
            "description": "The change would strand work (named), or base_version is no "
            "longer in force; nothing changed.",
        },
    },
)
def apply_fabric(body: FabricApply, control: Control, caller: Caller) -> FabricApplyOut:
    """Put a fabric in force (admin): the diff against the version in force and, unless
    ``dry_run``, the new version, with an event per change.  A dry run also lists what the
    change would strand; a real apply that would strand anything is refused."""
    caller.require_admin()
    return control.apply_fabric(body, by=caller.identity)


@router.post("/sites/{site}/drain", tags=["admin"], responses=_NO_SITE)
def drain(site: str, body: DrainIn, control: Control, caller: Caller) -> DrainOut:
    """Drain a site, or one pool of it (admin): nothing new is placed there, what runs
    there finishes.  Draining again changes nothing."""
    caller.require_admin()
    return control.drain(site, body.gpu_type, by=caller.identity, reason=body.reason)


@router.post("/sites/{site}/undrain", tags=["admin"], responses=_NO_SITE)
def undrain(site: str, body: UndrainIn, control: Control, caller: Caller) -> list[DrainOut]:
    """Lift the drain of a pool, or every drain at the site (admin); the drains lifted."""
    caller.require_admin()
    return control.undrain(site, body.gpu_type, by=caller.identity)
