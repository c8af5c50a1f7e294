"""Fitting a trace to a fabric: teams the fabric lacks, and where datasets start out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from onecluster.model import Dataset, Fabric, Team
from onecluster.workload import TraceJob

__all__ = ["with_trace_datasets", "with_trace_teams"]

_SHOWN = 5


def with_trace_teams(fabric: Fabric, jobs: Sequence[TraceJob]) -> tuple[Fabric, tuple[str, ...]]:
    """``fabric`` plus a team for every trace team it lacks, and the warnings to show.

    Such a team gets weight 1 and no quota (``Team(quota=None)``, so a derived guarantee:
    its home site shared by weight, :func:`onecluster.scheduler.guarantees`); its home site is the
    ``home_site`` of its first job when that names a site of the fabric, else the fabric's
    first site (a second warning says so).  Each warning is given once per run.
    """
    homes: dict[str, str | None] = {}
    for j in jobs:
        if fabric.team(j.team) is None and j.team not in homes:
            homes[j.team] = j.home_site
    if not homes:
        return fabric, ()
    fallback = fabric.sites[0].name
    strays = sorted(t for t, h in homes.items() if h is None or not fabric.has_site(h))
    extra = tuple(
        Team(
            name=t,
            home_site=h if h is not None and fabric.has_site(h) else fallback,
            weight=1.0,
            quota=None,
        )
        for t, h in sorted(homes.items())
    )
    names = sorted(homes)
    listed = ", ".join(names[:_SHOWN]) + (
        f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    )
    warnings = [
        f"{len(names)} team(s) of the trace are not in fabric {fabric.name} ({listed}); "
        "they are simulated with weight 1 and no quota (each is guaranteed its share of its "
        "home site)"
    ]
    if strays:
        shown = ", ".join(strays[:_SHOWN])
        warnings.append(
            f"{len(strays)} of those team(s) have no home site the fabric knows ({shown}); "
            f"they call {fallback} home"
        )
    return replace(fabric, teams=fabric.teams + extra), tuple(warnings)


def with_trace_datasets(fabric: Fabric, jobs: Sequence[TraceJob]) -> Fabric:
    """``fabric`` plus a dataset for every trace dataset it lacks, so that admission (which
    refuses undeclared datasets) takes the trace's jobs.

    Such a dataset has one complete copy, at the home site of the team of the first job that
    reads it (the data is born where its team works), and the largest size any job gives it.
    ``fabric`` must already hold every trace team (see :func:`with_trace_teams`).
    """
    sizes: dict[str, int] = {}
    homes: dict[str, str] = {}
    for j in jobs:
        if j.dataset is None or fabric.dataset(j.dataset) is not None:
            continue
        if j.dataset not in homes:
            team = fabric.team(j.team)
            homes[j.dataset] = team.home_site if team is not None else fabric.sites[0].name
        sizes[j.dataset] = max(sizes.get(j.dataset, 0), j.dataset_bytes)
    if not homes:
        return fabric
    extra = tuple(
        Dataset(name=name, size_bytes=sizes[name], sites=frozenset({home}))
        for name, home in homes.items()
    )
    return replace(fabric, datasets=fabric.datasets + extra)
