"""Planning checks: for every site pair, the RTT of the primary and of the backup route
against the fabric's latency objectives.  A plan that only holds while nothing fails is
flagged ``primary-only``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from onecluster.model import Fabric
from onecluster.topology._paths import route

__all__ = ["ObjectiveCheck", "PairCheck", "check_objectives", "check_pairs"]

Verdict = Literal["ok", "primary-only", "violated", "unreachable"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectiveCheck:
    """One objective against the routes: RTTs of primary and backup and the verdict.

    ``ok``: both routes meet it.  ``primary-only``: it holds only until one circuit (or risk
    group) fails — there is no disjoint backup, or the backup is too slow.  ``violated``: even
    the primary misses it.  ``unreachable``: the sites have no path at all.
    """

    a: str
    b: str
    max_rtt_ms: float
    primary_rtt_ms: float | None
    backup_rtt_ms: float | None
    verdict: Verdict
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PairCheck:
    """One unordered site pair: its routes, and the verdict of its objective if it has one
    (``objective`` is ``None`` for a pair without; ``verdict`` then says only whether a
    disjoint backup exists: ``ok`` or ``primary-only``)."""

    a: str
    b: str
    primary_sites: tuple[str, ...]
    primary_rtt_ms: float | None
    backup_sites: tuple[str, ...]
    backup_rtt_ms: float | None
    objective: ObjectiveCheck | None
    verdict: Verdict


def check_objectives(
    fabric: Fabric, *, rtt_ms: Mapping[str, float] | None = None
) -> list[ObjectiveCheck]:
    """Check every latency objective of ``fabric`` (in file order).

    ``rtt_ms`` replaces the fabric's RTT of the circuits it names (measured minimum RTTs).
    """
    checks = []
    for o in fabric.objectives:
        r = route(fabric, o.a, o.b, rtt_ms=rtt_ms)
        primary = r.primary.rtt_ms if r.primary else None
        backup = r.backup.rtt_ms if r.backup else None
        verdict: Verdict
        if primary is None:
            verdict = "unreachable"
        elif primary > o.max_rtt_ms:
            verdict = "violated"
        elif backup is None or backup > o.max_rtt_ms:
            verdict = "primary-only"
        else:
            verdict = "ok"
        checks.append(
            ObjectiveCheck(
                a=o.a,
                b=o.b,
                max_rtt_ms=o.max_rtt_ms,
                primary_rtt_ms=primary,
                backup_rtt_ms=backup,
                verdict=verdict,
                reason=o.reason,
            )
        )
    return checks


def check_pairs(fabric: Fabric, *, rtt_ms: Mapping[str, float] | None = None) -> list[PairCheck]:
    """Every unordered pair of sites (fabric order) with its routes and objective verdict."""
    objectives = {frozenset((c.a, c.b)): c for c in check_objectives(fabric, rtt_ms=rtt_ms)}
    names = fabric.site_names
    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            r = route(fabric, a, b, rtt_ms=rtt_ms)
            objective = objectives.get(frozenset((a, b)))
            verdict: Verdict
            if objective is not None:
                verdict = objective.verdict
            elif r.primary is None:
                verdict = "unreachable"
            else:
                verdict = "ok" if r.backup is not None else "primary-only"
            pairs.append(
                PairCheck(
                    a=a,
                    b=b,
                    primary_sites=r.primary.sites if r.primary else (),
                    primary_rtt_ms=r.primary.rtt_ms if r.primary else None,
                    backup_sites=r.backup.sites if r.backup else (),
                    backup_rtt_ms=r.backup.rtt_ms if r.backup else None,
                    objective=objective,
                    verdict=verdict,
                )
            )
    return pairs
