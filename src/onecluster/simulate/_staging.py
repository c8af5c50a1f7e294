"""Datasets staged over the circuits during a run: in-flight transfers and circuit load.

A start whose dataset is missing at its site holds its GPUs for the staging time the
scheduler gave (``Start.staging_s``: missing bytes ÷ the free capacity of the widest path).
While the transfer runs, its rate (bytes ÷ seconds) loads the direct circuits between the
best replica site and the destination, shared in proportion to their capacity; the
scheduler sees that load in ``ClusterView.circuit_load`` and prices it into placement.  When
the transfer ends the destination holds a complete replica.  A transfer that must relay
through a third site loads nothing (its path is the scheduler's choice, not recorded here).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from types import MappingProxyType

from onecluster.model import Circuit, Fabric
from onecluster.scheduler import Start

__all__ = ["Circuits"]


class Circuits:
    """Load on each circuit from in-flight stagings, as a fraction of its capacity."""

    def __init__(self, fabric: Fabric) -> None:
        pairs: dict[frozenset[str], list[Circuit]] = defaultdict(list)
        for c in fabric.circuits:
            pairs[frozenset((c.a, c.b))].append(c)
        self._pairs = {k: (tuple(v), sum(c.bytes_per_second for c in v)) for k, v in pairs.items()}
        self._raw: dict[str, float] = {}
        self._load: dict[str, float] = {}
        self._inflight: dict[str, tuple[str, frozenset[str], list[tuple[str, float]]]] = {}
        self._count = 0
        self.load_view: Mapping[str, float] = MappingProxyType(self._load)

    def begin(
        self, dataset: str, start: Start, replicas: Mapping[str, frozenset[str]], staging_s: float
    ) -> str:
        """Record a transfer of ``start.missing_bytes`` of ``dataset`` taking ``staging_s``;
        returns the key to pass to :meth:`staged` when it ends."""
        sources = replicas.get(dataset, frozenset())
        dests = frozenset(p.site for p in start.parts) - sources
        rate = start.missing_bytes / staging_s if staging_s > 0 else 0.0
        deltas: list[tuple[str, float]] = []
        for dst in dests:
            best = max(
                (self._pairs.get(frozenset((src, dst)), ((), 0.0)) for src in sources),
                key=lambda pair: pair[1],
                default=((), 0.0),
            )
            circuits, total = best
            for c in circuits:
                deltas.append((c.name, rate / len(dests) / total))
        for name, delta in deltas:
            self._set(name, self._raw.get(name, 0.0) + delta)
        self._count += 1
        key = f"staging-{self._count}"
        self._inflight[key] = (dataset, dests, deltas)
        return key

    def staged(self, key: str, replicas: dict[str, frozenset[str]]) -> None:
        """The transfer ``key`` is complete: its destinations now hold a replica."""
        dataset, dests, deltas = self._inflight.pop(key)
        replicas[dataset] = replicas.get(dataset, frozenset()) | dests
        for name, delta in deltas:
            self._set(name, self._raw.get(name, 0.0) - delta)

    def _set(self, name: str, raw: float) -> None:
        if raw <= 1e-9:
            self._raw.pop(name, None)
            self._load.pop(name, None)
        else:
            self._raw[name] = raw
            self._load[name] = min(raw, 1.0)
