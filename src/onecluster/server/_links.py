"""Link state and routing: the agents' probe reports in, circuit state with hysteresis, the
route table every site follows, and alerts.

Each end of a circuit has its own :class:`~onecluster.topology.LinkTracker`, fed in sequence
order with the probes that end's agent reports.  A sample's time is the server's receipt time
minus the sample's age on the agent's clock, so agent and server clocks need not agree.
Resent samples (a sync whose reply was lost) are recognised by sequence number and ignored;
a new agent (another ``agent_id``) starts its end afresh.

A circuit's state is the worst of its *fresh* ends (newest sample at most ``stale_s`` old):
down if either end sees it down, since one-way failure breaks a circuit too; ``unknown`` when
neither end has fresh results — an agent whose probes stopped is never read as a healthy
circuit.  Circuits that are down are routed around; ``unknown`` ones are assumed up (no
evidence against them, and a control plane that lost its agents must not blackhole the data
plane).  Routing uses the fabric's RTTs, not measured ones, so measurement noise between two
near-equal paths cannot make routes flap; measured minimum RTTs feed ``links check`` and
the ``rtt_shift`` alert instead.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from onecluster.errors import ValidationError
from onecluster.model import Circuit, Fabric
from onecluster.schema import (
    LinkEndOut,
    LinkOut,
    LinkReport,
    PeerOut,
    RouteOut,
    RouteTableOut,
)
from onecluster.topology import Hysteresis, LinkTracker, Path, RouteTable, route_table

__all__ = ["LinkAlert", "LinkBoard", "LinkBoardStats"]

State = Literal["up", "degraded", "down", "unknown"]

_SEVERITY: dict[State, int] = {"down": 3, "degraded": 2, "up": 1, "unknown": 0}


@dataclass(frozen=True, slots=True)
class LinkAlert:
    """An alert: an API event (``kind``) and a log line (``message``)."""

    kind: str
    message: str
    warning: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkBoardStats:
    """A snapshot for dashboards: the route table's version and the circuits per state."""

    route_version: int
    states: Mapping[str, str]


class _End:
    """One end of a circuit as its agent reports it."""

    def __init__(self, site: str) -> None:
        self.site = site
        self.agent_id: str | None = None
        self.tracker: LinkTracker | None = None
        self.last_seq = -1
        self.newest_at: float | None = None
        self.reported_at: float | None = None
        self.report: LinkReport | None = None
        self.detail = ""

    def reset(self, agent_id: str) -> None:
        self.agent_id = agent_id
        self.tracker = None
        self.last_seq = -1
        self.newest_at = None


class _Circuit:
    def __init__(self, circuit: Circuit) -> None:
        self.circuit = circuit
        self.ends = {circuit.a: _End(circuit.a), circuit.b: _End(circuit.b)}
        self.state: State = "unknown"
        self.since: float | None = None


class LinkBoard:
    """The server's view of every circuit and the route table derived from it (thread-safe)."""

    def __init__(
        self, fabric: Fabric, *, hysteresis: Hysteresis | None = None, stale_s: float = 5.0
    ) -> None:
        self._fabric = fabric
        self._hysteresis = hysteresis or Hysteresis()
        self._stale_s = stale_s
        self._lock = threading.Lock()
        self._circuits = {c.name: _Circuit(c) for c in fabric.circuits}
        self._addresses: dict[str, str] = {}
        self._table = route_table(fabric)
        self._version = 1
        self._changed_at: float | None = None

    # -- input ------------------------------------------------------------------------------

    def check(self, site: str, links: Sequence[LinkReport]) -> None:
        """:class:`ValidationError` unless every report names a circuit of ``site``, once."""
        seen: set[str] = set()
        for link in links:
            c = self._circuits.get(link.circuit)
            if c is None:
                msg = (
                    f"site {site} reported probes of circuit {link.circuit!r}, "
                    "which the fabric does not have"
                )
                raise ValidationError(msg, hint="is the agent running with this fabric's circuits?")
            if site not in c.ends:
                ends = f"{c.circuit.a}–{c.circuit.b}"
                msg = (
                    f"site {site} reported probes of circuit {link.circuit} ({ends}), "
                    "which does not reach it"
                )
                raise ValidationError(msg, hint="an agent probes only its own site's circuits")
            if link.circuit in seen:
                msg = f"site {site} reported circuit {link.circuit} twice in one sync"
                raise ValidationError(msg)
            seen.add(link.circuit)

    def report(
        self,
        site: str,
        agent_id: str,
        links: Sequence[LinkReport],
        *,
        service_address: str | None,
        now: float,
    ) -> list[LinkAlert]:
        """Take one agent's probe reports (checked as by :meth:`check` first, so a bad report
        changes nothing); the alerts it caused."""
        self.check(site, links)
        alerts: list[LinkAlert] = []
        with self._lock:
            if service_address is not None:
                self._addresses[site] = service_address
            for link in links:
                c = self._circuits[link.circuit]
                end = c.ends[site]
                if end.agent_id != agent_id:
                    end.reset(agent_id)
                end.report = link
                end.reported_at = now
                alerts += self._feed(c, end, link, now)
            alerts += self._settle(now)
        return alerts

    def _feed(self, c: _Circuit, end: _End, link: LinkReport, now: float) -> list[LinkAlert]:
        alerts = []
        for sample in sorted(link.samples, key=lambda s: s.seq):
            if sample.seq <= end.last_seq:
                continue  # already fed (the agent resent it)
            at = now - sample.age_s
            if end.tracker is None:
                end.tracker = LinkTracker(self._hysteresis, now=at)
            for event in end.tracker.observe(at, sample.rtt_ms):
                end.detail = event.detail
                if event.kind == "rtt_shift":
                    alerts.append(
                        LinkAlert(
                            "link_rtt_shift",
                            f"circuit {c.circuit.name}, seen from {end.site}: {event.detail}",
                        )
                    )
            end.last_seq = sample.seq
            end.newest_at = at if end.newest_at is None else max(end.newest_at, at)
        return alerts

    def refresh(self, now: float) -> list[LinkAlert]:
        """Re-judge every circuit at ``now`` (ends go stale); the alerts that caused."""
        with self._lock:
            return self._settle(now)

    # -- state and routes -------------------------------------------------------------------

    def _end_state(self, end: _End, now: float) -> State:
        if end.tracker is None or end.newest_at is None or now - end.newest_at > self._stale_s:
            return "unknown"
        return end.tracker.state

    def _settle(self, now: float) -> list[LinkAlert]:
        alerts = []
        for c in self._circuits.values():
            views = {site: self._end_state(end, now) for site, end in c.ends.items()}
            state: State = max(views.values(), key=_SEVERITY.__getitem__)
            if state != c.state:
                alerts.append(self._state_alert(c, state, views))
                c.state, c.since = state, now
        down = frozenset(name for name, c in self._circuits.items() if c.state == "down")
        if down != self._table.down:
            table = route_table(self._fabric, down=down)
            if not table.same_paths(self._table):
                alerts += self._route_alerts(self._table, table)
                self._version += 1
                self._changed_at = now
            self._table = table
        return alerts

    def _state_alert(self, c: _Circuit, state: State, views: Mapping[str, State]) -> LinkAlert:
        name = f"circuit {c.circuit.name} ({c.circuit.a}–{c.circuit.b})"
        seen = [site for site, v in views.items() if v == state]
        details = "; ".join(
            f"{site}: {c.ends[site].detail}" for site in seen if c.ends[site].detail
        )
        if state == "unknown":
            return LinkAlert(
                "link_unknown", f"{name}: no fresh probe results from either end", warning=True
            )
        if state == "up" and c.state in ("unknown", "degraded"):
            verb = "is measured up" if c.state == "unknown" else "recovered"
            kind = "link_up" if c.state == "unknown" else "link_recovered"
            return LinkAlert(kind, f"{name} {verb}", warning=False)
        kind = {"down": "link_down", "degraded": "link_degraded", "up": "link_up"}[state]
        suffix = f" ({details})" if details else ""
        return LinkAlert(kind, f"{name} is {state}{suffix}", warning=state != "up")

    def _route_alerts(self, old: RouteTable, new: RouteTable) -> list[LinkAlert]:
        alerts = []
        names = self._fabric.site_names
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                before, after = old.route(a, b).primary, new.route(a, b).primary
                if _circuits(before) == _circuits(after):
                    continue
                alerts.append(
                    LinkAlert(
                        "route_changed",
                        f"route {a}→{b} now {_describe(after)} (was {_describe(before)})",
                    )
                )
        return alerts

    # -- output -----------------------------------------------------------------------------

    def down_circuits(self) -> frozenset[str]:
        """Circuits routed around now."""
        with self._lock:
            return self._table.down

    def circuit_load(self) -> dict[str, float]:
        """For the scheduler: a circuit that is down carries nothing (load 1.0)."""
        return dict.fromkeys(self.down_circuits(), 1.0)

    def routes(self, site: str | None = None) -> RouteTableOut:
        """The route table of ``site`` (every site's when ``None``)."""
        with self._lock:
            table, addresses = self._table, dict(self._addresses)
            version, changed_at = self._version, self._changed_at
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
            for c in self._circuits.values():
                if site not in c.ends:
                    continue
                far = c.ends[c.circuit.other_end(site)]
                if far.report is not None:
                    found.append(
                        PeerOut(circuit=c.circuit.name, site=far.site, endpoint=far.report.endpoint)
                    )
            return found

    def measured_rtt_ms(self, now: float) -> dict[str, float]:
        """The lowest minimum RTT either fresh end measured, per circuit that has one."""
        with self._lock:
            found: dict[str, float] = {}
            for name, c in self._circuits.items():
                values = [
                    e.report.rtt_min_ms
                    for e in c.ends.values()
                    if e.report is not None
                    and e.report.rtt_min_ms is not None
                    and self._end_state(e, now) != "unknown"
                ]
                if values:
                    found[name] = min(values)
            return found

    def links(self, now: float) -> list[LinkOut]:
        """Every circuit with its state and both ends' measurements."""
        with self._lock:
            return [
                LinkOut(
                    circuit=c.circuit.name,
                    a=c.circuit.a,
                    b=c.circuit.b,
                    state=c.state,
                    since=c.since,
                    rtt_ms=c.circuit.rtt_ms,
                    loss=c.circuit.loss,
                    capacity_gbps=c.circuit.total_gbps,
                    risk_group=c.circuit.risk_group,
                    ends=[_end_out(e, self._end_state(e, now)) for e in c.ends.values()],
                )
                for c in self._circuits.values()
            ]

    def statistics(self) -> LinkBoardStats:
        """The route table's version and every circuit's state."""
        with self._lock:
            return LinkBoardStats(
                route_version=self._version,
                states={name: c.state for name, c in self._circuits.items()},
            )


def _circuits(path: Path | None) -> tuple[str, ...] | None:
    return path.circuits if path is not None else None


def _describe(path: Path | None) -> str:
    if path is None:
        return "unreachable"
    via = f" via {', '.join(path.sites[1:-1])}" if path.relayed else ""
    return f"{' + '.join(path.circuits)}{via}, {path.rtt_ms:g} ms"


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


def _end_out(end: _End, state: State) -> LinkEndOut:
    r = end.report
    return LinkEndOut(
        site=end.site,
        state=state,
        endpoint=r.endpoint if r else None,
        reported_at=end.reported_at,
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
