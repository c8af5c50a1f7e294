"""How busy the data plane keeps each circuit, from the byte counters agents report.

Each sync's data part carries, per circuit of the site, the bytes its data plane moved over
it so far (a counter).  The board keeps each site's last two samples, in memory, and derives
bytes per second per circuit from them; both ends count the same traffic, so a circuit's
rate is the larger of its ends' figures.  A counter that went down (an agent restarted)
gives no rate until the next sample; a site silent for ``stale_s`` gives none at all.

Nothing is stored: after a restart of the server the rates are back two syncs later.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from onecluster.model import Fabric

__all__ = ["CircuitRates"]


@dataclass(frozen=True, slots=True)
class _Sample:
    at: float
    counters: Mapping[str, int]


class CircuitRates:
    """Data-plane bytes per second per circuit (thread-safe)."""

    def __init__(self, fabric: Fabric, *, stale_s: float) -> None:
        self._fabric = fabric
        self._stale_s = stale_s
        self._lock = threading.Lock()
        self._samples: dict[str, tuple[_Sample | None, _Sample]] = {}

    def observe(self, site: str, counters: Mapping[str, int], now: float) -> None:
        """Take ``site``'s counters at ``now``: only its own circuits' are kept, and a sample
        not later than the last one is ignored."""
        mine = {c.name for c in self._fabric.circuits_of(site)}
        sample = _Sample(now, {name: n for name, n in counters.items() if name in mine})
        with self._lock:
            last = self._samples.get(site)
            if last is not None and now <= last[1].at:
                return
            self._samples[site] = (None if last is None else last[1], sample)

    def rates(self, now: float) -> dict[str, float]:
        """Bytes per second per circuit that has a fresh figure."""
        found: dict[str, float] = {}
        with self._lock:
            pairs = list(self._samples.values())
        for older, newer in pairs:
            if older is None or now - newer.at > self._stale_s:
                continue
            span = newer.at - older.at
            for name, count in newer.counters.items():
                before = older.counters.get(name)
                if before is None or count < before:
                    continue
                found[name] = max(found.get(name, 0.0), (count - before) / span)
        return found

    def load(self, now: float) -> dict[str, float]:
        """The share of each circuit's capacity the data plane uses, from 0 to 1."""
        capacity = {c.name: c.bytes_per_second for c in self._fabric.circuits}
        return {
            name: min(1.0, rate / capacity[name])
            for name, rate in self.rates(now).items()
            if capacity.get(name, 0) > 0
        }
