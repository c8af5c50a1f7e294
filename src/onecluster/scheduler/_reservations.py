"""Backfill reservations: a blocked job holds its place in one pool; later jobs may use that
pool only if they end before it could start, or fit in the GPUs it will not need."""

from __future__ import annotations

import math
from dataclasses import dataclass

from onecluster.scheduler._ledger import AllocationLedger, PoolKey

__all__ = ["Reservation"]


def shadow_time(
    ledger: AllocationLedger, pool: PoolKey, *, free_now: int, need: int, now: float
) -> tuple[float, int]:
    """When ``need`` GPUs will be free in ``pool`` as running jobs end at their expected
    ends, and how many spare GPUs there will be then: ``(inf, 0)`` if never.

    Jobs started earlier in the same pass are not in the ledger yet and ``free_now`` is net of
    them: treating them as never ending can only make the shadow later (safe).
    """
    free = free_now
    shadow = now
    for end, _, gpus in ledger.ends_in_pool(pool):
        if free >= need:
            break
        free += gpus
        shadow = max(end, now)
    if free < need:
        return math.inf, 0
    return shadow, free - need


@dataclass(slots=True)
class Reservation:
    """The place of the first blocked job in a pool (EASY backfill, one per pool)."""

    pool: PoolKey
    gpus: int
    shadow: float
    extra: int
    #: Whether the holder waits within its guarantee, and its team.  A borrower's place never
    #: holds back another team's owner: guarantees come first, as in the order of service.
    guaranteed: bool = True
    team: str = ""

    def holds_back(self, *, now: float, gpus: int, duration: float, owner: bool, team: str) -> bool:
        """Whether this reservation keeps out a job of ``team`` (``owner``: within its
        guarantee)."""
        if owner and not self.guaranteed and team != self.team:
            return False
        return not self.allows(now=now, gpus=gpus, duration=duration)

    def allows(self, *, now: float, gpus: int, duration: float) -> bool:
        """Whether a job of ``gpus`` × ``duration`` may start now without delaying the holder."""
        return now + duration <= self.shadow or gpus <= self.extra

    def consume(self, *, now: float, gpus: int, duration: float) -> None:
        """Record that an allowed job started: one that outlives the shadow uses spare GPUs."""
        if now + duration > self.shadow:
            self.extra -= gpus
