"""Injected time: the live system uses :class:`SystemClock`, tests and the simulator a
:class:`ManualClock`, so the same scheduling code runs in both and no test sleeps."""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "MonotonicClock", "SystemClock"]


class Clock(Protocol):
    """A source of the current time in seconds (wall-clock epoch for the live system)."""

    def now(self) -> float:
        """The current time in seconds."""
        ...


class SystemClock:
    """The real wall clock."""

    def now(self) -> float:
        """Seconds since the Unix epoch."""
        return time.time()


class MonotonicClock:
    """A clock that never jumps: seconds from an arbitrary origin (``time.monotonic``).

    For durations that must hold whatever NTP does to the wall clock, such as an agent's lease.
    """

    def now(self) -> float:
        """Seconds since an arbitrary, fixed origin."""
        return time.monotonic()


class ManualClock:
    """A clock that moves only when told to; never goes backwards."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        """The current virtual time."""
        return self._now

    def advance(self, seconds: float) -> None:
        """Move forward by ``seconds`` (must not be negative)."""
        if seconds < 0:
            msg = f"a clock cannot go backwards (asked to advance by {seconds})"
            raise ValueError(msg)
        self._now += seconds

    def set(self, when: float) -> None:
        """Jump to ``when``; it must not be earlier than now."""
        self.advance(when - self._now)
