"""Every circuit of a fabric from its ends' probe reports, and the route table that follows
(pure, injected time; the server's ``LinkBoard`` adds the lock and the wire format).

A probe's time is its send time on the agent's clock plus that agent's offset
(:class:`~onecluster.topology.ClockOffsets`).  Each circuit is judged by
:class:`~onecluster.topology.LinkEnds`; circuits that are down are routed around, ``unknown``
ones are assumed up (no evidence against them, and a control plane that lost its agents must
not blackhole the data plane).  Routing uses the fabric's RTTs, not measured ones, so
measurement noise between two near-equal paths cannot make routes flap.  Alerts wait in the
:attr:`LinkStates.outbox` in the order they happened.

A new leader goes on from where the one before stopped (:meth:`LinkStates.carry`,
:meth:`LinkStates.resume`): states, damping and the route table's version, not probe history.

A new fabric (:meth:`LinkStates.refit`) keeps every circuit that still joins the same two
sites as it was — its state, both ends' probe history and flap damping — under its new
figures; only circuits added (or moved to other sites) start afresh.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from onecluster.model import Circuit, Fabric
from onecluster.topology._alerts import LinkAlert, Outbox, route_alerts
from onecluster.topology._carry import LinkCarry
from onecluster.topology._ends import LinkEnds, Probe
from onecluster.topology._link_state import Hysteresis
from onecluster.topology._offsets import ClockOffsets
from onecluster.topology._table import RouteTable, route_table

__all__ = ["EndReport", "LinkStates"]


@dataclass(frozen=True, slots=True)
class EndReport:
    """The probes of one circuit that one end's agent finished since its last report."""

    circuit: str
    probes: tuple[Probe, ...] = ()


class LinkStates:
    """The state of every circuit of ``fabric``, the route table and the alerts' outbox.

    ``stale_s`` and ``lag_s`` should be a few heartbeats (the server passes
    ``max(5, 3 × heartbeat)`` and ``max(3, 3 × heartbeat)``).
    """

    def __init__(
        self,
        fabric: Fabric,
        *,
        hysteresis: Hysteresis | None = None,
        stale_s: float = 5.0,
        lag_s: float = 3.0,
        offset_window_s: float = 60.0,
    ) -> None:
        self.fabric = fabric
        self._hysteresis = hysteresis
        self._stale_s = stale_s
        self._lag_s = lag_s
        self.circuits: Mapping[str, LinkEnds] = {c.name: self._ends(c) for c in fabric.circuits}
        self.outbox = Outbox()
        self.table: RouteTable = route_table(fabric)
        self.version = 1
        self.changed_at: float | None = None
        self._offsets = ClockOffsets(offset_window_s)

    def sort(self, site: str, circuits: Sequence[str]) -> tuple[frozenset[str], list[str]]:
        """Which of the circuits ``site`` reported on can be taken, and why each of the others
        cannot: one the fabric lacks, one that does not reach ``site``, one reported twice
        (neither copy is taken)."""
        counts = Counter(circuits)
        usable: set[str] = set()
        found: list[str] = []
        seen: set[str] = set()
        said: set[str] = set()
        for name in circuits:
            ends = self.circuits.get(name)
            if ends is None:
                found.append(
                    f"site {site} reported probes of circuit {name!r}, "
                    "which the fabric does not have"
                )
            elif site not in (ends.circuit.a, ends.circuit.b):
                found.append(
                    f"site {site} reported probes of circuit {name} "
                    f"({ends.circuit.a}–{ends.circuit.b}), which does not reach it"
                )
            elif counts[name] > 1:  # said once, at the second copy
                if name in seen and name not in said:
                    said.add(name)
                    found.append(f"site {site} reported circuit {name} twice in one sync")
            else:
                usable.add(name)
            seen.add(name)
        return frozenset(usable), found

    def report(
        self,
        site: str,
        agent_id: str,
        reports: Sequence[EndReport],
        *,
        clock_s: float | None,
        now: float,
    ) -> list[LinkAlert]:
        """Take one agent's reports; the alerts they caused (also in the outbox).

        Reports that :meth:`sort` refuses are left out and change nothing.  ``clock_s`` is the
        agent's clock when it sent them; without it no probe can be placed in time, and
        probes sent after it (which no agent can have finished) are left out too.
        """
        usable = self.sort(site, [r.circuit for r in reports])[0]
        offset = 0.0 if clock_s is None else self._offsets.offset(site, agent_id, clock_s, now)
        alerts: list[LinkAlert] = []
        for r in reports:
            if r.circuit not in usable:
                continue
            placed = [p for p in r.probes if clock_s is not None and p.sent_s <= clock_s]
            ends = self.circuits[r.circuit]
            alerts += ends.feed(site, agent_id, placed, offset=offset, now=now)
        alerts += self._settle(now)
        self.outbox.add(alerts)
        return alerts

    def refresh(self, now: float) -> list[LinkAlert]:
        """Re-judge every circuit at ``now`` (ends go stale); the alerts that caused (also in
        the outbox)."""
        alerts = self._settle(now)
        self.outbox.add(alerts)
        return alerts

    def refit(self, fabric: Fabric, now: float) -> list[LinkAlert]:
        """Take ``fabric`` as the fabric in force; the alerts that caused (also in the outbox).

        A circuit that still joins the same two sites keeps its :class:`LinkEnds` — state,
        both ends' trackers, flap penalty — with its new figures (capacity, RTT, risk group);
        one added, or moved to other sites, starts ``unknown``; one removed is forgotten.  The
        route table is recomputed with the circuits down now: where the paths changed its
        version moves, with a ``route_changed`` alert for each pair of sites in both fabrics
        whose primary path changed.
        """
        kept: dict[str, LinkEnds] = {}
        for c in fabric.circuits:
            ends = self.circuits.get(c.name)
            if ends is not None and {ends.circuit.a, ends.circuit.b} == {c.a, c.b}:
                ends.circuit = c
                kept[c.name] = ends
            else:
                kept[c.name] = self._ends(c)
        self.circuits = kept
        self.fabric = fabric
        before = self.table
        down = frozenset(name for name, ends in kept.items() if ends.state == "down")
        table = route_table(fabric, down=down)
        alerts: list[LinkAlert] = []
        if not table.same_paths(before):
            # Pairs of sites new in this fabric have no route before: compare only the others.
            common = {k: before.routes[k] for k in table.routes if k in before.routes}
            padded = RouteTable(down=before.down, routes={**table.routes, **common})
            alerts = route_alerts(fabric, padded, table)
            self.version += 1
            self.changed_at = now
        self.table = table
        self.outbox.add(alerts)
        return alerts

    def carry(self, now: float) -> LinkCarry:
        """What the next leader needs to go on where this one stops (:mod:`._carry`)."""
        return LinkCarry(
            version=self.version,
            down=self.table.down,
            circuits=tuple(ends.carry(now) for ends in self.circuits.values()),
        )

    def resume(self, carried: LinkCarry, now: float) -> None:
        """Go on from ``carried`` (the leader before's :meth:`carry`, aged to ``now``) on a
        board that has taken no reports yet: each circuit that still joins the same two sites
        takes its state and its ends' damping; the route table routes around the circuits
        carried down, under the carried version — the table every site follows now — so
        neither an alert nor a route change is repeated.  The outbox is left as it is."""
        for c in carried.circuits:
            ends = self.circuits.get(c.name)
            if ends is not None and {ends.circuit.a, ends.circuit.b} == {c.a, c.b}:
                ends.resume(c, now=now)
        down = frozenset(n for n, ends in self.circuits.items() if ends.state == "down")
        self.table = route_table(self.fabric, down=down)
        self.version = max(self.version, carried.version)
        if down != carried.down:  # the fabric changed between the two: a new table
            self.version += 1
            self.changed_at = now

    def _ends(self, circuit: Circuit) -> LinkEnds:
        return LinkEnds(
            circuit, hysteresis=self._hysteresis, stale_s=self._stale_s, lag_s=self._lag_s
        )

    @property
    def down(self) -> frozenset[str]:
        """Circuits routed around now."""
        return self.table.down

    def _settle(self, now: float) -> list[LinkAlert]:
        alerts = [a for ends in self.circuits.values() if (a := ends.settle(now)) is not None]
        down = frozenset(name for name, ends in self.circuits.items() if ends.state == "down")
        if down != self.table.down:
            table = route_table(self.fabric, down=down)
            if not table.same_paths(self.table):
                alerts += route_alerts(self.fabric, self.table, table)
                self.version += 1
                self.changed_at = now
            self.table = table
        return alerts
