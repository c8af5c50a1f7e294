"""The fabric in force turned into API bodies, drains into the scheduler's closed pools, and
a diff into the version the store writes (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from onecluster.fabric import Change, FabricDiff, Strand
from onecluster.model import Fabric
from onecluster.schema import (
    ChangeOut,
    DrainOut,
    FabricApplyOut,
    FabricOut,
    FieldChangeOut,
    PoolOut,
    SiteOut,
)
from onecluster.store import DrainRecord, FabricRecord, NewFabric

__all__ = [
    "apply_out",
    "closed_pools",
    "drain_out",
    "fabric_out",
    "mark_draining",
    "new_version",
]


def closed_pools(fabric: Fabric, drains: Iterable[DrainRecord]) -> frozenset[tuple[str, str]]:
    """The pools the drains close: a drained site's every pool, a drained pool itself;
    drains of sites or pools ``fabric`` lacks close nothing."""
    closed: set[tuple[str, str]] = set()
    for d in drains:
        if not fabric.has_site(d.site):
            continue
        site = fabric.site(d.site)
        if d.gpu_type is None:
            closed.update((site.name, p.gpu_type) for p in site.pools)
        elif site.pool(d.gpu_type) is not None:
            closed.add((site.name, d.gpu_type))
    return frozenset(closed)


def mark_draining(sites: Sequence[SiteOut], drains: Sequence[DrainRecord]) -> list[SiteOut]:
    """``sites`` with ``draining`` set on drained sites and on every pool they close."""
    whole = {d.site for d in drains if d.gpu_type is None}
    pools = {(d.site, d.gpu_type) for d in drains if d.gpu_type is not None}
    if not whole and not pools:
        return list(sites)
    out = []
    for s in sites:
        marked: list[PoolOut] = [
            p.model_copy(update={"draining": s.name in whole or (s.name, p.gpu_type) in pools})
            for p in s.pools
        ]
        out.append(s.model_copy(update={"draining": s.name in whole, "pools": marked}))
    return out


def drain_out(d: DrainRecord) -> DrainOut:
    """The API body of a drain."""
    return DrainOut(site=d.site, gpu_type=d.gpu_type, since=d.since, by=d.by, reason=d.reason)


def fabric_out(record: FabricRecord, drains: Sequence[DrainRecord]) -> FabricOut:
    """The API body of the fabric in force."""
    return FabricOut(
        version=record.version,
        name=record.name,
        yaml=record.text,
        applied_at=record.applied_at,
        applied_by=record.applied_by,
        changes=list(record.summary),
        drains=[drain_out(d) for d in drains],
    )


def _change_out(c: Change) -> ChangeOut:
    return ChangeOut(
        kind=c.kind,
        action=c.action,
        name=c.name,
        fields=[FieldChangeOut(field=f.field, old=f.old, new=f.new) for f in c.fields],
        text=c.describe(),
        event=c.event_kind,
    )


def apply_out(
    *,
    base: int,
    version: int,
    applied: bool,
    dry_run: bool,
    diff: FabricDiff,
    strands: Sequence[Strand] = (),
) -> FabricApplyOut:
    """The API body of ``POST /fabric``."""
    return FabricApplyOut(
        base_version=base,
        version=version,
        applied=applied,
        dry_run=dry_run,
        changes=[_change_out(c) for c in diff.changes],
        strands=[s.reason for s in strands],
    )


def new_version(text: str, fabric: Fabric, diff: FabricDiff, *, version: int, by: str) -> NewFabric:
    """Version ``version`` of the fabric (``fabric``, read from ``text``), with one event
    per change of ``diff`` after a ``fabric_applied`` event that sums it up."""
    said = f"fabric {fabric.name} version {version} is in force ({by}): {diff.summary()}"
    return NewFabric(
        text=text,
        name=fabric.name,
        by=by,
        summary=tuple(c.describe() for c in diff.changes),
        events=(
            ("fabric_applied", said),
            *((c.event_kind, f"fabric version {version}: {c.describe()}") for c in diff.changes),
        ),
        pools=frozenset((s.name, p.gpu_type) for s in fabric.sites for p in s.pools),
    )
