"""Each team's decayed GPU usage, for the scheduler's fair share, read from the attempts on
record and kept for a minute (usage that decays over days does not move in seconds; the
GPUs a team holds right now reach the scheduler through the running allocations)."""

from __future__ import annotations

import threading
from collections import defaultdict

from onecluster.scheduler import decayed_gpu_s
from onecluster.store import Store

__all__ = ["TeamUsage"]

#: How long one reading of the attempts serves the reconcile passes.
REFRESH_S = 60.0
#: Attempts that ended more than this many half-lives ago weigh under 0.1 %: not read.
HORIZON_HALF_LIVES = 10


class TeamUsage:
    """Team → decayed GPU-seconds (thread-safe; refreshed at most every :data:`REFRESH_S`)."""

    def __init__(self, store: Store, half_life_s: float) -> None:
        self._store = store
        self._half_life_s = half_life_s
        self._lock = threading.Lock()
        self._read_at: float | None = None
        self._usage: dict[str, float] = {}

    def at(self, now: float) -> dict[str, float]:
        """The usage as of the last reading (at most :data:`REFRESH_S` before ``now``)."""
        with self._lock:
            if self._read_at is None or not 0 <= now - self._read_at < REFRESH_S:
                self._usage = self._read(now)
                self._read_at = now
            return dict(self._usage)

    def _read(self, now: float) -> dict[str, float]:
        usage: dict[str, float] = defaultdict(float)
        since = now - HORIZON_HALF_LIVES * self._half_life_s
        for attempt, job in self._store.usage(since, now):
            start, end = attempt.billed_span(now)
            usage[job.team] += decayed_gpu_s(
                attempt.gpus, start, end, now=now, half_life_s=self._half_life_s
            )
        return dict(usage)
