"""Fabric bodies: the fabric in force (``GET /fabric``), a change of it (``POST /fabric``)
and its diff, and drains (``POST /sites/{site}/drain`` and ``…/undrain``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from onecluster.schema._bounds import MAX_INT, STRICT, WHOLE, GpuType, Text

__all__ = [
    "MAX_FABRIC_CHARS",
    "ChangeOut",
    "DrainIn",
    "DrainOut",
    "FabricApply",
    "FabricApplyOut",
    "FabricOut",
    "FieldChangeOut",
    "UndrainIn",
]

#: Longest fabric file a request may carry: 512 KiB of text (a fabric of a thousand sites
#: is under a tenth of that; the body limit of 1 MiB allows for JSON's escapes).
MAX_FABRIC_CHARS = 512 * 1024


class FabricApply(BaseModel):
    """A fabric file to put in force.

    ``dry_run``: only say what would change and what it would strand.  ``base_version``:
    apply only if this version is still in force (409 otherwise) — the version whose diff
    the caller reviewed, so that a change made meanwhile by someone else is not overwritten
    unseen.
    """

    model_config = STRICT

    yaml: Annotated[str, Field(min_length=1, max_length=MAX_FABRIC_CHARS)]
    dry_run: bool = False
    base_version: Annotated[int, Field(ge=1, le=MAX_INT), WHOLE] | None = None


class FieldChangeOut(BaseModel):
    """One field of a changed thing, as the fabric file writes it (``None``: absent)."""

    field: str
    old: str | None
    new: str | None


class ChangeOut(BaseModel):
    """One change: ``kind`` (fabric, site, pool, circuit, team, quota, dataset, objective),
    ``action`` (added, removed, changed), ``name`` (``site/GPU type`` for a pool,
    ``team/GPU type`` for a quota, ``a-b`` for an objective), its fields and one line
    saying it all (``text``); ``event`` is the kind of the event recorded for it."""

    kind: str
    action: Literal["added", "removed", "changed"]
    name: str
    fields: list[FieldChangeOut]
    text: str
    event: str


class DrainOut(BaseModel):
    """A drained site (``gpu_type`` None: all its pools) or pool, since when, by whom."""

    site: str
    gpu_type: str | None
    since: float
    by: str
    reason: str | None = None


class FabricOut(BaseModel):
    """The fabric in force: its version, its YAML as applied, who applied it and when, what
    that version changed (one line each), and the drains."""

    version: int
    name: str
    yaml: str
    applied_at: float
    applied_by: str
    changes: list[str]
    drains: list[DrainOut]


class FabricApplyOut(BaseModel):
    """What ``POST /fabric`` did.

    ``base_version``: the version the diff is against; ``version``: the version in force
    afterwards (the new one when ``applied``).  ``applied`` is false for a dry run and for a
    fabric equal to the one in force.  ``strands``: what the change would strand (a dry run
    only: a real apply that would strand anything is refused with 409 and nothing changes).
    """

    base_version: int
    version: int
    applied: bool
    dry_run: bool
    changes: list[ChangeOut]
    strands: list[str]


class DrainIn(BaseModel):
    """Drain one pool (``gpu_type``) or the whole site; ``reason`` goes in the event."""

    model_config = STRICT

    gpu_type: GpuType | None = None
    reason: Text | None = None


class UndrainIn(BaseModel):
    """Lift the drain of one pool (``gpu_type``) or every drain at the site."""

    model_config = STRICT

    gpu_type: GpuType | None = None
