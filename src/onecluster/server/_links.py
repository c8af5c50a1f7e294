"""The server's link board: the agents' probe reports in, circuit state, the route table
every site follows and alerts out — the pure :class:`~onecluster.topology.LinkStates` behind
a lock, speaking the wire format (``docs/links.md``).

The board converts wire bodies to plain values at its edge and keeps the latest report of
each end for display (its endpoint and window figures).  Alerts wait in an outbox until the
control plane stores them (:meth:`LinkBoard.take_alerts`), in the order they happened.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from onecluster.errors import ValidationError
from onecluster.model import EndView, Fabric
from onecluster.schema import (
    LinkEndOut,
    LinkOut,
    LinkReport,
    PeerOut,
    RouteOut,
    RouteTableOut,
)
from onecluster.topology import (
    EndReport,
    Hysteresis,
    LinkAlert,
    LinkCarry,
    LinkStates,
    Probe,
    RouteTable,
)

__all__ = ["LinkAlert", "LinkBoard", "LinkBoardStats"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkBoardStats:
    """A snapshot for dashboards: the route table's version and the circuits per state."""

    route_version: int
    states: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class _Said:
    """The latest report of one end, and when the server received it."""

    report: LinkReport
    at: float


class LinkBoard:
    """The server's view of every circuit and the route table derived from it (thread-safe)."""

    def __init__(
        self,
        fabric: Fabric,
        *,
        hysteresis: Hysteresis | None = None,
        stale_s: float = 5.0,
        lag_s: float = 3.0,
    ) -> None:
        """The arguments are :class:`~onecluster.topology.LinkStates`'s."""
        self._fabric = fabric
        self._lock = threading.Lock()
        self._tuning = (hysteresis, stale_s, lag_s)
        self._states = LinkStates(fabric, hysteresis=hysteresis, stale_s=stale_s, lag_s=lag_s)
        self._addresses: dict[str, str] = {}
        self._said: dict[tuple[str, str], _Said] = {}  # (circuit, site) → its latest report
        self._endpoints: dict[tuple[str, str], str] = {}  # (circuit, site) → its probe socket
        self._standing_by = False
        self._office: int | None = None  # the term this board was resumed for, while it leads
        self._last_office: int | None = None  # the last such term, kept when standing by

    # -- input ------------------------------------------------------------------------------

    def refusals(
        self, site: str, links: Sequence[LinkReport], *, clocked: bool = True
    ) -> list[str]:
        """Why reports cannot be taken: a circuit the fabric lacks, one that does not reach
        ``site``, a circuit reported twice; and samples sent without the agent's clock
        (``clocked`` false), which cannot be placed in time.  Empty when all are fine."""
        found = self._states.sort(site, [link.circuit for link in links])[1]
        if not clocked and any(link.samples for link in links):
            found.insert(
                0, f"site {site} sent probe samples without probe_clock_s; they are left out"
            )
        return found

    def check(self, site: str, links: Sequence[LinkReport]) -> None:
        """:class:`ValidationError` for the first of :meth:`refusals`."""
        found = self.refusals(site, links)
        if found:
            raise ValidationError(found[0], hint="an agent probes only its own site's circuits")

    def report(
        self,
        site: str,
        agent_id: str,
        links: Sequence[LinkReport],
        *,
        service_address: str | None,
        clock_s: float | None,
        now: float,
    ) -> list[LinkAlert]:
        """Take one agent's probe reports; the alerts they caused (also in the outbox).

        Reports that :meth:`refusals` names are left out and change nothing; the caller says
        why to the agent.  ``clock_s`` is the agent's clock when it sent them; without it the
        samples are left out (the endpoints are still taken).
        """
        usable = self._states.sort(site, [link.circuit for link in links])[0]
        reports = [
            EndReport(link.circuit, tuple(Probe(s.seq, s.sent_s, s.rtt_ms) for s in link.samples))
            for link in links
            if link.circuit in usable
        ]
        with self._lock:
            if self._standing_by:  # the sync route refuses syncs meanwhile; this is a guard
                return []
            if service_address is not None:
                self._addresses[site] = service_address
            for link in links:
                if link.circuit in usable:
                    self._said[(link.circuit, site)] = _Said(link, now)
                    self._endpoints[(link.circuit, site)] = link.endpoint
            return self._states.report(site, agent_id, reports, clock_s=clock_s, now=now)

    def refit(self, fabric: Fabric, now: float) -> list[LinkAlert]:
        """Take a new fabric in force (:meth:`LinkStates.refit`): circuits that still join
        the same sites keep their state and flap damping; the latest reports and addresses of
        circuits and sites that are gone are forgotten.  The alerts it caused (also in the
        outbox)."""
        circuits = {c.name for c in fabric.circuits}
        with self._lock:
            self._fabric = fabric
            self._said = {k: v for k, v in self._said.items() if k[0] in circuits}
            self._endpoints = {k: v for k, v in self._endpoints.items() if k[0] in circuits}
            self._addresses = {s: a for s, a in self._addresses.items() if fabric.has_site(s)}
            return self._states.refit(fabric, now)

    def refresh(self, now: float) -> list[LinkAlert]:
        """Re-judge every circuit at ``now`` (ends go stale); the alerts that caused (also
        in the outbox)."""
        with self._lock:
            return self._states.refresh(now)

    def carry(self, now: float) -> LinkCarry:
        """What the next leader needs to go on where this board stands
        (:meth:`LinkStates.carry`, with the probe endpoints)."""
        with self._lock:
            return self._carry(now)

    def _carry(self, now: float) -> LinkCarry:
        endpoints = tuple(sorted((c, s, e) for (c, s), e in self._endpoints.items()))
        term = self._office or 0
        return replace(self._states.carry(now), endpoints=endpoints, term=term)

    @property
    def standing_by(self) -> bool:
        """Whether this board waits to be resumed: it takes no reports."""
        return self._standing_by

    @property
    def office(self) -> int | None:
        """The leader's term this board was resumed for (None while standing by): a sync
        fenced with another term must not be taken on it, and no carry is written from it."""
        return self._office

    @property
    def last_office(self) -> int | None:
        """The last term this board was resumed for, also after it stood by."""
        return self._last_office

    def stand_by(self) -> None:
        """Take no reports and write no carry until :meth:`resume` or :meth:`reinstate`:
        this replica does not lead, or leads but has not yet read the carry of the leader
        before (a report taken now would be judged on a board that the carry is about to
        replace).  What it shows (``/links``, ``/routes``) is its last state meanwhile."""
        self._standing_by = True
        self._office = None

    def reinstate(self, term: int) -> None:
        """Lead again in ``term`` on this board as it stands, pending alerts included: this
        replica led the term before, so nobody else changed the links meanwhile."""
        with self._lock:
            self._office = self._last_office = term
            self._standing_by = False

    def resume(self, carried: LinkCarry | None, now: float, *, term: int) -> None:
        """Start afresh as the leader of ``term`` — no probe history, no pending alerts, no
        reports kept for display — and go on from ``carried`` if there is one
        (:meth:`LinkStates.resume`; its probe endpoints too)."""
        hysteresis, stale_s, lag_s = self._tuning
        with self._lock:
            states = LinkStates(self._fabric, hysteresis=hysteresis, stale_s=stale_s, lag_s=lag_s)
            self._said = {}
            self._endpoints = {}
            if carried is not None:
                states.resume(carried, now)
                names = {c.name for c in self._fabric.circuits}
                self._endpoints = {
                    (circuit, site): endpoint
                    for circuit, site, endpoint in carried.endpoints
                    if circuit in names
                }
            self._states = states
            self._office = self._last_office = term
            self._standing_by = False

    def take_alerts(self) -> list[LinkAlert]:
        """Every alert not yet taken, oldest first."""
        with self._lock:
            return self._states.outbox.take()

    def take_alerts_with_carry(self, now: float) -> tuple[list[LinkAlert], LinkCarry]:
        """:meth:`take_alerts` and :meth:`carry` at one moment: the carry is the state those
        alerts, and no later one, lead to."""
        with self._lock:
            return self._states.outbox.take(), self._carry(now)

    def put_back(self, alerts: Sequence[LinkAlert]) -> None:
        """Return alerts that could not be stored, ahead of newer ones."""
        with self._lock:
            self._states.outbox.put_back(alerts)

    # -- output -----------------------------------------------------------------------------

    def down_circuits(self) -> frozenset[str]:
        """Circuits routed around now."""
        with self._lock:
            return self._states.down

    def circuit_load(self) -> dict[str, float]:
        """For the scheduler: a circuit that is down carries nothing (load 1.0)."""
        return dict.fromkeys(self.down_circuits(), 1.0)

    def routes(self, site: str | None = None) -> RouteTableOut:
        """The route table of ``site`` (every site's when ``None``)."""
        with self._lock:
            table, addresses = self._states.table, dict(self._addresses)
            version, changed_at = self._states.version, self._states.changed_at
        sources = [site] if site is not None else self._fabric.site_names
        return RouteTableOut(
            version=version,
            changed_at=changed_at,
            down=sorted(table.down),
            routes=[
                _route_out(table, src, dst, addresses.get(dst))
                for src in sources
                for dst in self._fabric.site_names
                if dst != src
            ],
        )

    def peers(self, site: str) -> list[PeerOut]:
        """Probe endpoints of the far ends of ``site``'s circuits (those announced)."""
        with self._lock:
            found = []
            for c in self._fabric.circuits:
                if site not in (c.a, c.b):
                    continue
                far = c.other_end(site)
                endpoint = self._endpoints.get((c.name, far))
                if endpoint is not None:
                    found.append(PeerOut(circuit=c.name, site=far, endpoint=endpoint))
            return found

    def end_addresses(self) -> dict[tuple[str, str], str]:
        """``(site, circuit)`` → the site's address on that circuit: the address of the probe
        endpoint its agent announced there (the data plane takes connections on the same
        addresses)."""
        with self._lock:
            return {
                (site, circuit): said.report.endpoint.rpartition(":")[0]
                for (circuit, site), said in self._said.items()
                if said.report.endpoint
            }

    def measured_rtt_ms(self, now: float) -> dict[str, float]:
        """The lowest minimum RTT either fresh end measured, per circuit that has one."""
        with self._lock:
            found: dict[str, float] = {}
            for name, ends in self._states.circuits.items():
                values = [
                    said.report.rtt_min_ms
                    for site, view in ends.views(now).items()
                    if (said := self._said.get((name, site))) is not None
                    and said.report.rtt_min_ms is not None
                    and view not in ("unknown", "warming")
                ]
                if values:
                    found[name] = min(values)
            return found

    def links(self, now: float) -> list[LinkOut]:
        """Every circuit with its state and both ends' measurements."""
        with self._lock:
            return [
                LinkOut(
                    circuit=name,
                    a=ends.circuit.a,
                    b=ends.circuit.b,
                    state=ends.state,
                    since=ends.since,
                    rtt_ms=ends.circuit.rtt_ms,
                    loss=ends.circuit.loss,
                    capacity_gbps=ends.circuit.total_gbps,
                    risk_group=ends.circuit.risk_group,
                    ends=[
                        _end_out(site, self._said.get((name, site)), view)
                        for site, view in ends.views(now).items()
                    ],
                )
                for name, ends in self._states.circuits.items()
            ]

    def statistics(self) -> LinkBoardStats:
        """The route table's version and every circuit's state."""
        with self._lock:
            return LinkBoardStats(
                route_version=self._states.version,
                states={name: ends.state for name, ends in self._states.circuits.items()},
            )


def _route_out(table: RouteTable, src: str, dst: str, address: str | None) -> RouteOut:
    r = table.route(src, dst)
    hop = table.next_hop(src, dst)
    return RouteOut(
        src=src,
        dst=dst,
        next_circuit=hop.circuit if hop else None,
        next_site=hop.site if hop else None,
        sites=list(r.primary.sites) if r.primary else [],
        circuits=list(r.primary.circuits) if r.primary else [],
        rtt_ms=r.primary.rtt_ms if r.primary else None,
        backup_sites=list(r.backup.sites) if r.backup else [],
        backup_circuits=list(r.backup.circuits) if r.backup else [],
        backup_rtt_ms=r.backup.rtt_ms if r.backup else None,
        dst_address=address,
    )


def _end_out(site: str, said: _Said | None, view: EndView) -> LinkEndOut:
    r = said.report if said is not None else None
    return LinkEndOut(
        site=site,
        state=view,
        endpoint=r.endpoint if r else None,
        reported_at=said.at if said is not None else None,
        sent=r.sent if r else 0,
        lost=r.lost if r else 0,
        loss=r.loss if r else 0.0,
        rtt_min_ms=r.rtt_min_ms if r else None,
        rtt_p50_ms=r.rtt_p50_ms if r else None,
        rtt_p99_ms=r.rtt_p99_ms if r else None,
        pdv_p50_ms=r.pdv_p50_ms if r else None,
        pdv_p99_ms=r.pdv_p99_ms if r else None,
        jitter_ms=r.jitter_ms if r else None,
    )
