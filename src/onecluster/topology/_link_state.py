"""Circuit state from probe results, with hysteresis and flap damping (pure, injected time).

A circuit is *down* after ``down_after_s`` without a probe reply, and comes back *up* only
after ``up_after_s`` of unbroken replies; while it is up it is *degraded* when its recent
loss or RTT is out of line.  Every fall adds a penalty that halves every ``half_life_s``;
while the penalty is above ``suppress_at`` the circuit is held down even if probes succeed,
until it decays below ``reuse_at`` (the damping BGP uses for flapping routes).  So a circuit
that drops for a second every few seconds is taken out once and stays out, instead of making
every route through it switch back and forth.  A shift of the *minimum* RTT by more than
``rtt_shift`` is reported: it is the signature of a protection switch onto a longer path.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Literal

from onecluster.model import LinkState

__all__ = ["Hysteresis", "LinkEvent", "LinkTracker"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Hysteresis:
    """The thresholds of :class:`LinkTracker`.

    The defaults suit probes ten times a second: down after 0.5 s without a reply (five
    probes in a row; at 1 % random loss each way that happens by chance about once a year —
    computed, 0.02⁵ × 10 probes/s), so an outage of a second is always seen, and up only
    after 5 s of unbroken replies.
    """

    down_after_s: float = 0.5
    up_after_s: float = 5.0
    window_s: float = 10.0
    degraded_loss: float = 0.02
    degraded_rtt_factor: float = 1.5
    rtt_shift: float = 0.2
    penalty: float = 1000.0
    suppress_at: float = 1500.0
    reuse_at: float = 750.0
    half_life_s: float = 30.0


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkEvent:
    """Something an operator should hear about (also an API event and a log line)."""

    at: float
    kind: Literal["down", "up", "degraded", "recovered", "rtt_shift"]
    detail: str


class LinkTracker:
    """The state of one circuit, fed with probe outcomes in time order."""

    def __init__(
        self,
        config: Hysteresis | None = None,
        *,
        now: float = 0.0,
        down: bool = False,
        penalty: float = 0.0,
        penalty_at: float | None = None,
        min_rtt_ms: float | None = None,
    ) -> None:
        """A tracker whose circuit is up at ``now`` — or, with ``down``, down (it comes up
        only after ``up_after_s`` of replies, damping permitting) — with a flap penalty of
        ``penalty`` as of ``penalty_at`` (default ``now``) and an RTT floor of ``min_rtt_ms``:
        how a new leader takes over a circuit from the one before."""
        self.config = config or Hysteresis()
        self._state: LinkState = "down" if down else "up"
        self._last_reply = now
        self._good_since: float | None = None if down else now
        self._samples: deque[tuple[float, float | None]] = deque()  # (time, rtt or None)
        self._penalty = penalty
        self._penalty_at = now if penalty_at is None else penalty_at
        self._min_rtt: float | None = min_rtt_ms

    @property
    def state(self) -> LinkState:
        """The state after the last :meth:`observe` or :meth:`tick`."""
        return self._state

    @property
    def min_rtt_ms(self) -> float | None:
        """The RTT floor the circuit is judged against (None before a reply)."""
        return self._min_rtt

    def damping(self) -> tuple[float, float]:
        """The flap penalty as of its last change, and when that was (to hand over)."""
        return self._penalty, self._penalty_at

    def penalty(self, now: float) -> float:
        """The flap penalty, decayed to ``now``."""
        elapsed = max(now - self._penalty_at, 0.0)
        return self._penalty * math.pow(0.5, elapsed / self.config.half_life_s)

    def observe(self, now: float, rtt_ms: float | None) -> list[LinkEvent]:
        """Record one probe: ``rtt_ms``, or ``None`` for a probe that got no reply."""
        self._samples.append((now, rtt_ms))
        while self._samples and self._samples[0][0] < now - self.config.window_s:
            self._samples.popleft()
        events: list[LinkEvent] = []
        if rtt_ms is None:
            if self._state == "down" and self._good_since is not None:
                # It flapped again while held down: that counts too (as in BGP damping), so
                # a circuit that keeps flapping stays out until it stops.
                self._penalty = self.penalty(now) + self.config.penalty
                self._penalty_at = now
            self._good_since = None
        else:
            self._last_reply = now
            if self._good_since is None:
                self._good_since = now
            events += self._watch_min_rtt(now)
        return events + self.tick(now)

    def tick(self, now: float) -> list[LinkEvent]:
        """Re-evaluate the state at ``now`` (probes may have stopped arriving altogether)."""
        c = self.config
        events: list[LinkEvent] = []
        if self._state != "down" and now - self._last_reply >= c.down_after_s:
            self._penalty = self.penalty(now) + c.penalty
            self._penalty_at = now
            self._state = "down"
            self._good_since = None
            silent = now - self._last_reply
            events.append(
                LinkEvent(at=now, kind="down", detail=f"no probe reply for {silent:.1f} s")
            )
            return events
        if self._state == "down":
            steady = self._good_since is not None and now - self._good_since >= c.up_after_s
            # A circuit that fell often recently stays down until its penalty has decayed.
            damped = self._penalty >= c.suppress_at and self.penalty(now) > c.reuse_at
            if not steady or damped:
                return events
            self._penalty = self.penalty(now)
            self._penalty_at = now
            self._state = "up"
            # The outage is not loss of an up circuit: judge it on what came after.
            since = self._good_since
            self._samples = deque(x for x in self._samples if since is not None and x[0] >= since)
            events.append(LinkEvent(at=now, kind="up", detail="probes answered again"))
        degraded = self._degraded()
        if degraded and self._state == "up":
            self._state = "degraded"
            events.append(LinkEvent(at=now, kind="degraded", detail=degraded))
        elif not degraded and self._state == "degraded":
            self._state = "up"
            events.append(LinkEvent(at=now, kind="recovered", detail="loss and RTT back in line"))
        return events

    def _degraded(self) -> str:
        c = self.config
        # The losses at the end form a run that may be an outage beginning: the down rule
        # judges those, so that a cut circuit goes straight to down, not through degraded.
        samples = list(self._samples)
        while samples and samples[-1][1] is None:
            samples.pop()
        if not samples:
            return ""
        lost = sum(1 for _, rtt in samples if rtt is None)
        loss = lost / len(samples)
        if loss > c.degraded_loss:
            return f"loss {loss:.1%} over the last {c.window_s:g} s"
        rtts = sorted(rtt for _, rtt in samples if rtt is not None)
        median = rtts[len(rtts) // 2] if rtts else None
        if median and self._min_rtt and median > self._min_rtt * c.degraded_rtt_factor:
            return f"median RTT {median:.1f} ms against a floor of {self._min_rtt:.1f} ms"
        return ""

    def _watch_min_rtt(self, now: float) -> list[LinkEvent]:
        """The floor RTT over the window; a lasting move of it is a path change."""
        window = [rtt for _, rtt in self._samples if rtt is not None]
        floor = min(window)
        if self._min_rtt is None:
            self._min_rtt = floor
            return []
        full = self._samples[0][0] <= now - self.config.window_s * 0.9
        moved = abs(floor - self._min_rtt) > self.config.rtt_shift * self._min_rtt
        if full and moved:
            before, self._min_rtt = self._min_rtt, floor
            return [
                LinkEvent(
                    at=now,
                    kind="rtt_shift",
                    detail=f"minimum RTT moved from {before:.1f} ms to {floor:.1f} ms "
                    "(a protection switch onto another path?)",
                )
            ]
        return []
