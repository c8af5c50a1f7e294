"""Statistics of one circuit's probes (pure): a sliding window of outcomes, the RFC 3550
interarrival jitter, PDV percentiles (RFC 5481: delay minus the window's minimum delay), loss,
and the cumulative RTT histogram Prometheus exposes."""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass

__all__ = ["RTT_BUCKETS_S", "LinkFigures", "Outcome", "ProbeWindow"]

#: Upper bounds of the RTT histogram buckets, seconds: from 50 µs (metro) to 2.5 s.
RTT_BUCKETS_S = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Outcome:
    """One finished probe: sent at ``sent_at`` (monotonic s); ``rtt_s`` is ``None`` if lost."""

    seq: int
    sent_at: float
    rtt_s: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkFigures:
    """The window's figures, seconds; ``None`` where no reply came back in the window."""

    samples: int
    loss: float
    rtt_min_s: float | None
    rtt_p50_s: float | None
    rtt_p99_s: float | None
    pdv_p50_s: float | None
    pdv_p99_s: float | None
    jitter_s: float | None


def percentile(values: list[float], q: float) -> float:
    """The ``q``-quantile (0–1) of sorted ``values`` by the nearest-rank method."""
    rank = max(math.ceil(q * len(values)) - 1, 0)
    return values[min(rank, len(values) - 1)]


class ProbeWindow:
    """Outcomes of the last ``window_s`` seconds, plus running totals that never reset."""

    def __init__(self, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self._outcomes: deque[Outcome] = deque()
        self.sent = 0
        self.lost = 0
        self.received = 0
        self.rtt_sum_s = 0.0
        self.bucket_counts = [0] * len(RTT_BUCKETS_S)  # per bucket, not cumulative
        self._jitter_s: float | None = None
        self._last_transit_ns: int | None = None
        # the window's minimum RTT, kept as outcomes come and go (the prober asks for it on
        # every turn: at 50 probes a second a scan of the window each time adds up)
        self._floor: float | None = None
        self._floor_stale = False

    def add(self, outcome: Outcome) -> None:
        """Record a finished probe (outcomes arrive in sequence order)."""
        self._outcomes.append(outcome)
        self.sent += 1
        if outcome.rtt_s is None:
            self.lost += 1
        else:
            self.received += 1
            self.rtt_sum_s += outcome.rtt_s
            if not self._floor_stale and (self._floor is None or outcome.rtt_s < self._floor):
                self._floor = outcome.rtt_s
            index = bisect.bisect_left(RTT_BUCKETS_S, outcome.rtt_s)
            if index < len(self.bucket_counts):
                self.bucket_counts[index] += 1
        self._trim(outcome.sent_at)

    def transit(self, sent_ns: int, reflected_ns: int) -> None:
        """Feed the RFC 3550 §6.4.1 estimator with one reply's one-way transit:
        ``D = transit_i − transit_{i−1}``; ``J += (|D| − J) / 16``."""
        transit = reflected_ns - sent_ns
        if self._last_transit_ns is not None:
            d = abs(transit - self._last_transit_ns) / 1e9
            j = self._jitter_s or 0.0
            self._jitter_s = j + (d - j) / 16
        self._last_transit_ns = transit

    def _trim(self, now: float) -> None:
        while self._outcomes and self._outcomes[0].sent_at < now - self.window_s:
            gone = self._outcomes.popleft()
            if gone.rtt_s is not None and gone.rtt_s == self._floor:
                self._floor_stale = True

    def consecutive_losses(self) -> int:
        """How many of the newest outcomes in a row were lost."""
        count = 0
        for o in reversed(self._outcomes):
            if o.rtt_s is not None:
                break
            count += 1
        return count

    def rtt_floor(self) -> float | None:
        """The window's minimum RTT (what the probe timeout follows; cheaper than
        :meth:`figures`, which sorts: kept up to date, recomputed only when the minimum
        left the window)."""
        if self._floor_stale:
            rtts = (o.rtt_s for o in self._outcomes if o.rtt_s is not None)
            self._floor = min(rtts, default=None)
            self._floor_stale = False
        return self._floor

    def figures(self) -> LinkFigures:
        """Loss, RTT and PDV percentiles over the window, and the running jitter."""
        outcomes = list(self._outcomes)
        rtts = sorted(o.rtt_s for o in outcomes if o.rtt_s is not None)
        loss = (len(outcomes) - len(rtts)) / len(outcomes) if outcomes else 0.0
        if not rtts:
            return LinkFigures(
                samples=len(outcomes),
                loss=loss,
                rtt_min_s=None,
                rtt_p50_s=None,
                rtt_p99_s=None,
                pdv_p50_s=None,
                pdv_p99_s=None,
                jitter_s=self._jitter_s,
            )
        floor = rtts[0]
        return LinkFigures(
            samples=len(outcomes),
            loss=loss,
            rtt_min_s=floor,
            rtt_p50_s=percentile(rtts, 0.5),
            rtt_p99_s=percentile(rtts, 0.99),
            pdv_p50_s=percentile(rtts, 0.5) - floor,
            pdv_p99_s=percentile(rtts, 0.99) - floor,
            jitter_s=self._jitter_s,
        )
