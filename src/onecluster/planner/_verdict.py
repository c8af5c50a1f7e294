"""Which mode keeps the penalty under the target, and what it would take when none does.

The rule: the first mode, in the order hierarchical DDP, flat DDP, blocking DiLoCo,
streaming DiLoCo, whose penalty is at most the target.  Per-step DDP comes first because it
computes exactly what the co-located run computes; DiLoCo changes the optimiser, so its loss
must still be checked against the co-located run (``training.md`` §6.3, item 2), and the
streaming variant needs the most runtime machinery.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from onecluster.planner._modes import DILOCO, MODES, ModeResult

__all__ = ["Verdict", "choose", "min_h"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """The mode to use (``None`` when none meets the target) and why.

    ``closest`` is the mode with the lowest penalty; ``diloco_min_h`` and
    ``streaming_min_h`` are the smallest H at which DiLoCo at the plan's bits would meet
    the target, blocking and streaming.
    """

    mode: str | None
    target_penalty: float
    closest: str
    reason: str
    diloco_min_h: int
    streaming_min_h: int

    def to_json(self) -> dict[str, Any]:
        """The verdict as plain JSON values."""
        return {
            "mode": self.mode,
            "target_penalty": self.target_penalty,
            "closest": self.closest,
            "reason": self.reason,
            "diloco_min_h": self.diloco_min_h,
            "streaming_min_h": self.streaming_min_h,
        }


def min_h(sync_s: float, compute_s: float, target: float, *, streaming: bool) -> int:
    """The smallest interval H at which a sync of ``sync_s`` (independent of H) stalls at most
    ``target`` of H steps of ``compute_s``: H ≥ sync / (target · step) blocking, H ≥ sync /
    ((1 + target) · step) streaming."""
    per_step = (1 + target if streaming else target) * compute_s
    # Round away float noise before the ceiling: 2.0000000000000004 is H = 2.
    return max(1, math.ceil(round(sync_s / per_step, 9)))


def choose(modes: tuple[ModeResult, ...]) -> Verdict:
    """The verdict over ``modes`` (every mode of :data:`MODES`, any order)."""
    by_name = {m.mode: m for m in modes}
    ordered = [by_name[name] for name in MODES]
    closest = min(ordered, key=lambda m: m.penalty)
    blocking = by_name[DILOCO]
    target = blocking.target_penalty
    needs = {
        "diloco_min_h": min_h(blocking.sync_s, blocking.compute_s, target, streaming=False),
        "streaming_min_h": min_h(blocking.sync_s, blocking.compute_s, target, streaming=True),
    }
    chosen = next((m for m in ordered if m.meets_target), None)
    if chosen is None:
        reason = (
            f"no mode keeps the penalty at or under {target:.1%}; the closest is {closest.label} "
            f"at {closest.penalty:.1%}. At these bits DiLoCo would need H ≥ "
            f"{needs['diloco_min_h']} (blocking) or H ≥ {needs['streaming_min_h']} (streaming)"
        )
    elif chosen.interval_steps == 1:
        reason = (
            f"{chosen.label} keeps the penalty at {chosen.penalty:.1%} ≤ {target:.1%} and "
            "computes exactly what the co-located run computes"
        )
    else:
        reason = (
            f"{chosen.label} keeps the penalty at {chosen.penalty:.1%} ≤ {target:.1%}; per-step "
            "DDP does not. DiLoCo changes the optimiser: check loss at equal tokens against "
            "the co-located run"
        )
    return Verdict(
        mode=None if chosen is None else chosen.mode,
        target_penalty=target,
        closest=closest.mode,
        reason=reason,
        **needs,
    )
