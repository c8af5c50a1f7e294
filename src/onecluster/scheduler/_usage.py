"""Decayed usage: each team's GPU-seconds, older seconds counting less (half-life decay).

Usage at time ``now`` of ``g`` GPUs held from ``a`` to ``b`` is
``g × ∫ₐᵇ 2^(-(now - t)/H) dt = g × τ × (2^(-(now - b)/H) - 2^(-(now - a)/H))`` with
``τ = H / ln 2``.  The simulator keeps a :class:`UsageHistory` up to date as jobs start and
end; the live server sums :func:`decayed_gpu_s` over the attempts it has on record.
"""

from __future__ import annotations

import math
from collections import defaultdict

__all__ = ["UsageHistory", "decayed_gpu_s"]


def decayed_gpu_s(gpus: int, start: float, end: float, *, now: float, half_life_s: float) -> float:
    """The decayed GPU-seconds, seen at ``now``, of ``gpus`` GPUs held from ``start`` to
    ``end`` (clipped to ``now``)."""
    end = min(end, now)
    if end <= start:
        return 0.0
    tau = half_life_s / math.log(2)
    late, early = (now - end) / half_life_s, (now - start) / half_life_s
    return gpus * tau * (math.exp2(-late) - math.exp2(-early))


class UsageHistory:
    """Every team's decayed GPU-seconds, updated as allocations come and go (O(1) each)."""

    def __init__(self, half_life_s: float) -> None:
        self.half_life_s = half_life_s
        self._tau = half_life_s / math.log(2)
        self._value: dict[str, float] = defaultdict(float)  # decayed GPU-s at _since
        self._held: dict[str, int] = defaultdict(int)  # GPUs held since _since
        self._since: dict[str, float] = defaultdict(float)

    def change(self, team: str, gpus: int, now: float) -> None:
        """``team`` starts (``gpus`` > 0) or stops (< 0) holding ``gpus`` GPUs at ``now``."""
        self._value[team] = self._at(team, now)
        self._since[team] = now
        self._held[team] += gpus

    def at(self, now: float) -> dict[str, float]:
        """Team → decayed GPU-seconds at ``now`` (``now`` no earlier than the last change)."""
        return {team: self._at(team, now) for team in self._value}

    def _at(self, team: str, now: float) -> float:
        elapsed = max(now - self._since[team], 0.0)
        d = math.exp2(-elapsed / self.half_life_s)
        return self._value[team] * d + self._held[team] * self._tau * (1.0 - d)
