"""Policy settings: which world is simulated and how placement weighs its terms."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from onecluster.errors import ValidationError

__all__ = ["POLICY_KINDS", "FairShare", "PlacementWeights", "PolicyConfig", "PolicyKind"]

PolicyKind = Literal["unified", "separate", "fifo"]

#: ``unified`` is onecluster; ``separate`` is today's world (each team only at its home site);
#: ``fifo`` is one global first-come queue with no quotas, priorities or backfill.
POLICY_KINDS: tuple[PolicyKind, ...] = ("unified", "separate", "fifo")


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacementWeights:
    """How a site's score (in seconds of delay; lower is better) is made.

    ``score = expected_start + staging_s + cost_s_per_unit × job cost
    + borrowed_penalty_s (if borrowed) + packing_s × free fraction left``.

    Staging time is the dataset's missing bytes ÷ the free capacity of the widest path into
    the site, so circuit load is priced in.  Cost (GPU-hours × price) is converted to
    seconds with ``cost_s_per_unit``: 10 s per currency unit means a $100 cheaper site is worth
    waiting ~17 minutes for.  ``packing_s`` breaks ties towards fuller pools (less
    fragmentation).
    """

    cost_s_per_unit: float = 10.0
    borrowed_penalty_s: float = 3600.0
    packing_s: float = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class FairShare:
    """How the order of service among teams of one priority class is made (Slurm's
    multifactor priority is the anchor).

    A team's *usage* is its GPU-seconds decayed with ``half_life_s`` (divided by the mean
    life, half_life ÷ ln 2, that is the GPUs it held on average lately) plus the GPUs it holds
    now.  Its fair-share factor is ``F = 2^(-U/S)``, ``U`` its part of every team's usage and
    ``S`` its part of every team's weight: 1 for a team that used nothing, ½ for one that used
    exactly its share, less the more it used beyond.  A waiting job's priority is
    ``usage_weight × F + age_weight × min(its wait ÷ max_age_s, 1)``; the team whose oldest
    job has the highest priority goes next.  The defaults are Slurm's: a 7-day half-life and
    a 7-day maximum age, fair share weighing ten times age.
    """

    half_life_s: float = 7 * 86400.0
    max_age_s: float = 7 * 86400.0
    usage_weight: float = 10_000.0
    age_weight: float = 1_000.0

    def __post_init__(self) -> None:
        for name in ("half_life_s", "max_age_s"):
            value = getattr(self, name)
            if not value > 0 or math.isinf(value):
                msg = f"fair share {name} must be a finite number greater than 0 (got {value})"
                raise ValidationError(msg)
        for name in ("usage_weight", "age_weight"):
            value = getattr(self, name)
            if not value >= 0 or math.isinf(value):
                msg = f"fair share {name} must be a finite number, not negative (got {value})"
                raise ValidationError(msg)


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyConfig:
    """Which scheduling world to run and its knobs."""

    kind: PolicyKind = "unified"
    weights: PlacementWeights = field(default_factory=PlacementWeights)
    fair_share: FairShare = field(default_factory=FairShare)
    backfill: bool = True
    #: The preemption grace: how long a preempted job has to exit.  A job preempts only
    #: where the GPUs it needs would not free up by themselves sooner (running jobs' expected
    #: ends), so no work is thrown away to save less waiting than the grace costs.
    grace_s: float = 30.0

    def __post_init__(self) -> None:
        if not self.grace_s >= 0 or math.isinf(self.grace_s):
            msg = f"the preemption grace must be a finite number, not negative (got {self.grace_s})"
            raise ValidationError(msg)
        if self.kind not in POLICY_KINDS:
            msg = f"unknown policy {self.kind!r}; use one of {', '.join(POLICY_KINDS)}"
            raise ValidationError(msg)

    @property
    def quotas(self) -> bool:
        """Quotas, borrowing and preemption apply only in the unified world."""
        return self.kind == "unified"

    @property
    def home_only(self) -> bool:
        """Whether jobs may run only at their team's home site."""
        return self.kind == "separate"
