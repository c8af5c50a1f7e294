"""Policy settings: which world is simulated and how placement weighs its terms."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from onecluster.errors import ValidationError

__all__ = ["POLICY_KINDS", "PlacementWeights", "PolicyConfig", "PolicyKind"]

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
class PolicyConfig:
    """Which scheduling world to run and its knobs."""

    kind: PolicyKind = "unified"
    weights: PlacementWeights = field(default_factory=PlacementWeights)
    backfill: bool = True

    def __post_init__(self) -> None:
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
