"""Planning checks: does each latency objective of the fabric hold on the primary route *and*
on the backup?  A plan that only holds while nothing fails is flagged."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from onecluster.model import Fabric
from onecluster.topology._paths import route

__all__ = ["ObjectiveCheck", "check_objectives"]

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


def check_objectives(fabric: Fabric) -> list[ObjectiveCheck]:
    """Check every latency objective of ``fabric`` (in file order)."""
    checks = []
    for o in fabric.objectives:
        r = route(fabric, o.a, o.b)
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
