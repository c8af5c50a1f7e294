"""Each team's decayed GPU usage, for the scheduler's fair share, read from the attempts on
record and kept for a minute (usage that decays over days does not move in seconds; the
GPUs a team holds right now reach the scheduler through the running allocations).

The first reading sums every attempt of the horizon; later ones read only the attempts
active or ended since the previous reading: what ended before it is kept as one decayed
total per team, which ages by multiplication.  So a refresh costs the attempts of a minute
and the ones running, not seventy days of history.
"""

from __future__ import annotations

import math
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
        self._ended: dict[str, float] = defaultdict(float)  # attempts ended by _read_at
        self._usage: dict[str, float] = {}

    def at(self, now: float) -> dict[str, float]:
        """The usage as of the last reading (at most :data:`REFRESH_S` before ``now``)."""
        with self._lock:
            if self._read_at is None or not 0 <= now - self._read_at < REFRESH_S:
                self._usage = self._read(now)
            return dict(self._usage)

    def _read(self, now: float) -> dict[str, float]:
        last = self._read_at
        if last is None or now < last:  # first reading, or a clock stepped back: start over
            last = None
            self._ended.clear()
            since = now - HORIZON_HALF_LIVES * self._half_life_s
        else:
            since = last
            aged = math.exp2(-(now - last) / self._half_life_s)
            for team in self._ended:
                self._ended[team] *= aged
        running: dict[str, float] = defaultdict(float)
        for attempt, job in self._store.usage(since, now):
            ended = attempt.finished_at
            if last is not None and ended is not None and ended <= last:
                continue  # counted in _ended by the previous reading
            start, end = attempt.billed_span(now)
            gpu_s = decayed_gpu_s(attempt.gpus, start, end, now=now, half_life_s=self._half_life_s)
            if ended is not None and ended <= now:
                self._ended[job.team] += gpu_s
            else:
                running[job.team] += gpu_s
        self._read_at = now
        teams = set(self._ended) | set(running)
        return {team: self._ended.get(team, 0.0) + running.get(team, 0.0) for team in teams}
