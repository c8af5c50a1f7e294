"""Agents on virtual time for the topology tests: every end of every circuit probing."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from onecluster.fabric import load_fabric
from onecluster.model import Circuit
from onecluster.topology import EndReport, LinkStates, Probe

THREE = load_fabric(Path(__file__).resolve().parents[2] / "examples/fabrics/three-site.yaml")


class ProbingAgents:
    """Every end of every circuit probing ten times a second (virtual time, no skew); the
    circuits in :attr:`cut` answer nothing."""

    def __init__(self) -> None:
        self.seq: dict[tuple[str, str], int] = {}
        self.cut: set[str] = set()

    def feed(self, states: LinkStates, start: int, end: int) -> list[str]:
        """Each agent's report of each second from ``start`` to ``end``; the alerts' kinds."""
        kinds = []
        for t in range(start, end):
            for site in states.fabric.site_names:
                reports = [
                    EndReport(c.name, tuple(self._probes(c, site, t)))
                    for c in states.fabric.circuits_of(site)
                ]
                alerts = states.report(site, f"agent-{site}", reports, clock_s=t + 1.0, now=t + 1.0)
                kinds += [a.kind for a in alerts]
        return kinds

    def _probes(self, c: Circuit, site: str, t: int) -> Iterable[Probe]:
        for i in range(10):
            seq = self.seq.get((c.name, site), 0)
            self.seq[(c.name, site)] = seq + 1
            yield Probe(seq, t + i / 10, None if c.name in self.cut else c.rtt_ms)


@pytest.fixture
def agents() -> ProbingAgents:
    return ProbingAgents()
