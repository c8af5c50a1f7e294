"""Admission: refuse at submit the jobs that no site of the fabric could ever run."""

from __future__ import annotations

from collections.abc import Collection

from onecluster.errors import ImpossibleJobError
from onecluster.model import Fabric, JobSpec

__all__ = ["admit", "largest_gang"]


def largest_gang(fabric: Fabric, gpu_type: str, max_sites: int) -> int:
    """The most GPUs of ``gpu_type`` one gang may get: the biggest pool, or the biggest
    ``max_sites`` pools at distinct sites added up."""
    sizes = sorted(
        (p.count for s in fabric.sites for p in s.pools if p.gpu_type == gpu_type), reverse=True
    )
    return sum(sizes[:max_sites])


def admit(
    fabric: Fabric,
    spec: JobSpec,
    *,
    home_only: bool = False,
    datasets: Collection[str] = (),
) -> None:
    """Raise :class:`ImpossibleJobError` naming the reason if ``spec`` can never run.

    Checked: the team exists; the dataset, if any, is declared in the fabric or is one of
    ``datasets`` (registered with ``onecluster dataset add``) — a typo must not place the
    job with no data locality; every GPU type named exists somewhere; some acceptable type
    has a pool (or, for multi-site gangs, ``max_sites`` pools) big enough; with
    ``home_only``, the team's home site itself can hold it.
    """
    team = fabric.team(spec.team)
    if team is None:
        known = ", ".join(t.name for t in fabric.teams) or "none"
        msg = f"team {spec.team!r} is not in the fabric"
        raise ImpossibleJobError(msg, hint=f"known teams: {known}")
    if (
        spec.dataset is not None
        and fabric.dataset(spec.dataset) is None
        and spec.dataset not in datasets
    ):
        known = ", ".join(sorted({d.name for d in fabric.datasets} | set(datasets))) or "none"
        what = "declared in the fabric nor registered" if datasets else "declared in the fabric"
        msg = f"dataset {spec.dataset!r} is not {what}"
        raise ImpossibleJobError(
            msg,
            hint=f"known datasets: {known}; declare a new one in the fabric file or register "
            "it with `onecluster dataset add` first",
        )
    known_types = fabric.gpu_types
    unknown = [t for t in spec.gpu_types if t not in known_types]
    if unknown:
        msg = f"GPU type {unknown[0]!r} exists at no site"
        raise ImpossibleJobError(msg, hint=f"known GPU types: {', '.join(sorted(known_types))}")
    types = spec.gpu_types or tuple(sorted(known_types))
    if home_only:
        home = fabric.site(team.home_site)
        best = max((p.count for p in home.pools if p.gpu_type in types), default=0)
        where = f"home site {home.name}"
    else:
        best = max(largest_gang(fabric, t, spec.max_sites) for t in types)
        where = "one site" if spec.max_sites == 1 else f"{spec.max_sites} sites"
    if spec.gpus > best:
        kinds = "/".join(types)
        msg = f"the job asks for {spec.gpus} GPUs but at most {best} {kinds} GPUs fit in {where}"
        hint = "ask for fewer GPUs, accept more GPU types" + (
            ", or allow the gang to span sites with max_sites" if spec.max_sites == 1 else ""
        )
        raise ImpossibleJobError(msg, hint=hint)
