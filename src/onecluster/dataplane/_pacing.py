"""A token bucket: what the etiquette caps, the sender enforces."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["Pacer"]


class Pacer:
    """Lets ``rate_bps`` bits per second through, with a burst of ``burst_s`` seconds' worth;
    shared by every stream of one path (thread-safe).  ``None``: no cap."""

    def __init__(
        self,
        rate_bps: float | None,
        *,
        burst_s: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._sleep = sleep
        self._burst_s = burst_s
        self._rate = 0.0
        self._tokens = 0.0
        self._at = clock()
        self.set_rate(rate_bps)

    @property
    def rate_bps(self) -> float | None:
        return self._rate * 8 if self._rate else None

    def set_rate(self, rate_bps: float | None) -> None:
        with self._lock:
            self._rate = 0.0 if rate_bps is None else max(rate_bps / 8, 1.0)
            self._tokens = min(self._tokens, self._rate * self._burst_s)

    def take(self, nbytes: int) -> None:
        """Block until ``nbytes`` may be sent."""
        with self._lock:
            if not self._rate:
                return
            now = self._clock()
            cap = max(self._rate * self._burst_s, nbytes)
            self._tokens = min(self._tokens + (now - self._at) * self._rate, cap)
            self._at = now
            self._tokens -= nbytes
            wait = -self._tokens / self._rate if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)
