"""Backfill reservations: a blocked job holds its place in one pool; later jobs may use that
pool only if they end before it could start, or fit in the GPUs it will not need."""

from __future__ import annotations

import math
from dataclasses import dataclass

from onecluster.scheduler._ledger import AllocationLedger, PoolKey

__all__ = ["Reservation"]


@dataclass(slots=True)
class Reservation:
    """The place of the first blocked job in a pool (EASY backfill, one per pool).

    The shadow time (when enough GPUs will have freed for it) is computed only when a later
    job asks to use the pool, since in a full cluster most reservations are never consulted.
    """

    pool: PoolKey
    gpus: int
    _shadow: float | None = None
    _extra: int = 0

    def allows(
        self, *, ledger: AllocationLedger, free_now: int, now: float, gpus: int, duration: float
    ) -> bool:
        """Whether a job of ``gpus`` × ``duration`` may start now without delaying the holder."""
        if self._shadow is None:
            self._compute(ledger, free_now, now)
        assert self._shadow is not None
        if math.isinf(self._shadow):
            # The holder cannot start from completions alone (it waits on preemption or
            # never fits): reserving would only idle GPUs, so let others use them.
            return True
        return now + duration <= self._shadow or gpus <= self._extra

    @property
    def shadow(self) -> float:
        """When the holder can start (``inf``: not from completions alone); after ``allows``."""
        assert self._shadow is not None
        return self._shadow

    def consume(self, *, now: float, gpus: int, duration: float) -> None:
        """Record that an allowed job started: one that outlives the shadow uses spare GPUs."""
        assert self._shadow is not None
        if not math.isinf(self._shadow) and now + duration > self._shadow:
            self._extra -= gpus

    def _compute(self, ledger: AllocationLedger, free_now: int, now: float) -> None:
        # Jobs started earlier in this pass are not in the ledger yet and ``free_now`` is net
        # of them: treating them as never ending can only make the shadow later (safe).
        free = free_now
        shadow = now
        for end, _, gpus in ledger.ends_in_pool(self.pool):
            if free >= self.gpus:
                break
            free += gpus
            shadow = max(end, now)
        if free < self.gpus:
            self._shadow = math.inf
            return
        self._shadow = shadow
        self._extra = free - self.gpus
