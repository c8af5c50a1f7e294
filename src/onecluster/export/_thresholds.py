"""Distinct individuals per year, and the legal route the count calls for (pure).

Since 22 March 2024 the route for sending personal information out of mainland China
depends on how many distinct individuals an exporting entity has sent abroad since
1 January of the current year (``../shared/notes/audit.md`` §1.2; not legal advice —
counsel confirms the lines and how exempt scenarios count):

* fewer than 100,000 individuals and no sensitive personal information: exempt;
* 100,000 to under 1,000,000, or sensitive information of under 10,000: a standard
  contract (filed) or a certification;
* 1,000,000 or more, sensitive information of 10,000 or more, any important data, or any
  export by a critical information infrastructure operator: a security assessment.

Splitting an export to stay under a line is prohibited, so the count is the union over
every export of the entity in the year, whatever the dataset: :class:`YearTally` keeps the
keyed digests of the individuals (:attr:`DeidReport.subjects`), never the identifiers.
A route is flagged at 80 % of its ceiling.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = [
    "ASSESSMENT_FROM",
    "EXEMPT_BELOW",
    "SENSITIVE_ASSESSMENT_FROM",
    "WARN_AT",
    "Route",
    "RouteRequirement",
    "YearTally",
    "required_route",
]

#: Fewer individuals than this (and none with sensitive information) is exempt.
EXEMPT_BELOW = 100_000
#: This many individuals or more needs a security assessment.
ASSESSMENT_FROM = 1_000_000
#: This many individuals with sensitive information or more needs a security assessment.
SENSITIVE_ASSESSMENT_FROM = 10_000
#: The share of a route's ceiling at which a warning is due.
WARN_AT = 0.8


class Route(enum.StrEnum):
    """The legal routes, weakest first (the register's ``mechanism``)."""

    EXEMPT = "EXEMPT"
    STANDARD_CONTRACT = "STANDARD_CONTRACT"  # or CERTIFICATION: the same ceiling
    SECURITY_ASSESSMENT = "SECURITY_ASSESSMENT"


@dataclass(frozen=True, slots=True)
class RouteRequirement:
    """The weakest route that covers a year's counts, why, and a warning near its ceiling."""

    route: Route
    reason: str
    warning: str | None = None


def required_route(
    individuals: int, sensitive: int, *, ciio: bool = False, important_data: bool = False
) -> RouteRequirement:
    """The route required for an entity that has, this year, exported the personal
    information of ``individuals`` distinct people, ``sensitive`` of them with sensitive
    personal information (counts after the export being decided, so the caller adds it
    first).  ``ValueError`` for negative counts or more sensitive individuals than
    individuals."""
    if individuals < 0 or sensitive < 0 or sensitive > individuals:
        msg = f"impossible counts: {individuals} individuals, {sensitive} with sensitive PI"
        raise ValueError(msg)
    if ciio:
        return RouteRequirement(Route.SECURITY_ASSESSMENT, "the exporter is a CIIO")
    if important_data:
        return RouteRequirement(Route.SECURITY_ASSESSMENT, "the export holds important data")
    if individuals >= ASSESSMENT_FROM:
        reason = f"{individuals:,} individuals this year (≥ {ASSESSMENT_FROM:,})"
        return RouteRequirement(Route.SECURITY_ASSESSMENT, reason)
    if sensitive >= SENSITIVE_ASSESSMENT_FROM:
        reason = f"{sensitive:,} individuals with sensitive PI (≥ {SENSITIVE_ASSESSMENT_FROM:,})"
        return RouteRequirement(Route.SECURITY_ASSESSMENT, reason)
    if individuals >= EXEMPT_BELOW or sensitive:
        reason = (
            f"{individuals:,} individuals this year (≥ {EXEMPT_BELOW:,})"
            if individuals >= EXEMPT_BELOW
            else f"{sensitive:,} individuals with sensitive PI"
        )
        near = []
        if individuals >= WARN_AT * ASSESSMENT_FROM:
            near.append(f"{individuals:,} of {ASSESSMENT_FROM:,} individuals")
        if sensitive >= WARN_AT * SENSITIVE_ASSESSMENT_FROM:
            near.append(f"{sensitive:,} of {SENSITIVE_ASSESSMENT_FROM:,} with sensitive PI")
        warning = f"near the security-assessment line: {'; '.join(near)}" if near else None
        return RouteRequirement(Route.STANDARD_CONTRACT, reason, warning)
    warning = None
    if individuals >= WARN_AT * EXEMPT_BELOW:
        warning = f"near the end of the exemption: {individuals:,} of {EXEMPT_BELOW:,} individuals"
    return RouteRequirement(
        Route.EXEMPT, f"{individuals:,} individuals, none with sensitive PI", warning
    )


@dataclass(slots=True)
class YearTally:
    """Distinct individuals per exporting entity and calendar year, by keyed digest.

    Not persistent: the register keeps what it is built from.  Digests from one key only —
    under another key the same person has another digest.
    """

    _all: dict[tuple[str, int], set[bytes]] = field(default_factory=dict)
    _sensitive: dict[tuple[str, int], set[bytes]] = field(default_factory=dict)

    def add(
        self, entity: str, year: int, subjects: Iterable[bytes], sensitive: Iterable[bytes] = ()
    ) -> tuple[int, int]:
        """Add one export's individuals; returns the year's ``(individuals, sensitive)``
        for the entity after it."""
        everyone = self._all.setdefault((entity, year), set())
        flagged = self._sensitive.setdefault((entity, year), set())
        flagged.update(sensitive)
        everyone.update(subjects)
        everyone.update(flagged)
        return len(everyone), len(flagged)

    def counts(self, entity: str, year: int) -> tuple[int, int]:
        """The year's ``(individuals, sensitive)`` for ``entity`` so far."""
        return (
            len(self._all.get((entity, year), ())),
            len(self._sensitive.get((entity, year), ())),
        )
