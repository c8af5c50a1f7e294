"""Link state and routing: the agents' probe reports in, circuit state with hysteresis, the
route table every site follows, and alerts.

Each end of a circuit has its own :class:`~onecluster.topology.LinkTracker`, fed in sequence
order with the probes that end's agent reports.  A probe's time is its send time on the
agent's monotonic clock plus that agent's *offset*: the smallest (server time − agent clock)
of its syncs over the last minute, i.e. the one least delayed in transit — so neither the
clocks nor the sync's latency need agree from one request to the next.  Resent samples (a
sync whose reply was lost) are recognised by sequence number and ignored; a new agent
(another ``agent_id``) starts its end afresh.

An end's *view* is ``unknown`` while it is stale (its newest probe older than ``stale_s``, or
lagging more than ``lag_s`` behind the other end's, whose agent still reports), ``warming``
during its first ``up_after_s`` of probes — and for ``up_after_s + lag_s`` after a new agent
replaced the one before, probes or not — else its tracker's state.  A circuit is:

- **down** when a fresh end sees it down and no fresh end sees it working.  A failure in
  either direction silences the round-trip probes of *both* ends, so a real cut is seen from
  both, the second end within a sync or two.  While one end sees silence and the other's
  probes flow, the circuit keeps its state for ``lag_s`` (the second report is on its way)
  or, while the working end's agent was just replaced, until its probes settle (a peer
  restarting is not a cut); after that, one end's silence is down;
- **degraded** when an end sees it degraded; **up** when a warm end sees it up;
- **unknown** otherwise — an agent whose probes stopped is never read as a healthy circuit.

Circuits that are down are routed around; ``unknown`` ones are assumed up (no evidence
against them, and a control plane that lost its agents must not blackhole the data plane).
Routing uses the fabric's RTTs, not measured ones, so measurement noise between two
near-equal paths cannot make routes flap; measured minimum RTTs feed ``links check`` and the
``rtt_shift`` alert instead.  Alerts wait in an outbox until the control plane stores them
(:meth:`LinkBoard.take_alerts`), in the order they happened.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
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

#: How far back the smallest clock offset of an agent's syncs is looked for.
_OFFSET_WINDOW_S = 60.0

State = Literal["up", "degraded", "down", "unknown"]
View = Literal["up", "degraded", "down", "warming", "unknown"]


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
        self.first_at: float | None = None
        self.newest_at: float | None = None
        self.changed_at: float | None = None  # when a new agent replaced the one before
        self.reported_at: float | None = None
        self.report: LinkReport | None = None
        self.detail = ""

    def reset(self, agent_id: str, now: float) -> None:
        if self.agent_id is not None:
            self.changed_at = now
        self.agent_id = agent_id
        self.tracker = None
        self.last_seq = -1
        self.first_at = self.newest_at = None


class _Circuit:
    def __init__(self, circuit: Circuit) -> None:
        self.circuit = circuit
        self.ends = {circuit.a: _End(circuit.a), circuit.b: _End(circuit.b)}
        self.state: State = "unknown"
        self.since: float | None = None
        self.split_since: float | None = None  # when its ends began to disagree (down vs up)


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
        """``stale_s`` and ``lag_s`` should be a few heartbeats (the server passes
        ``max(5, 3 × heartbeat)`` and ``max(3, 3 × heartbeat)``)."""
        self._fabric = fabric
        self._hysteresis = hysteresis or Hysteresis()
        self._stale_s = stale_s
        self._lag_s = lag_s
        self._lock = threading.Lock()
        self._circuits = {c.name: _Circuit(c) for c in fabric.circuits}
        self._addresses: dict[str, str] = {}
        # site → (agent id, recent (server time, server time − agent clock) of its syncs)
        self._offsets: dict[str, tuple[str, deque[tuple[float, float]]]] = {}
        self._outbox: list[LinkAlert] = []
        self._table = route_table(fabric)
        self._version = 1
        self._changed_at: float | None = None

    # -- input ------------------------------------------------------------------------------

    def refusals(
        self, site: str, links: Sequence[LinkReport], *, clocked: bool = True
    ) -> list[str]:
        """Why reports cannot be taken: a circuit the fabric lacks, one that does not reach
        ``site``, a circuit reported twice; and samples sent without the agent's clock
        (``clocked`` false), which cannot be placed in time.  Empty when all are fine."""
        found = self._sort(site, links)[1]
        if not clocked and any(link.samples for link in links):
            found.insert(
                0, f"site {site} sent probe samples without probe_clock_s; they are left out"
            )
        return found

    def _sort(self, site: str, links: Sequence[LinkReport]) -> tuple[list[LinkReport], list[str]]:
        """The reports that can be taken, and why each of the others cannot."""
        counts = Counter(link.circuit for link in links)
        usable: list[LinkReport] = []
        found: list[str] = []
        seen: set[str] = set()
        said: set[str] = set()
        for link in links:
            c = self._circuits.get(link.circuit)
            if c is None:
                found.append(
                    f"site {site} reported probes of circuit {link.circuit!r}, "
                    "which the fabric does not have"
                )
            elif site not in c.ends:
                found.append(
                    f"site {site} reported probes of circuit {link.circuit} "
                    f"({c.circuit.a}–{c.circuit.b}), which does not reach it"
                )
            elif counts[link.circuit] > 1:  # neither copy is taken; said once, at the second
                if link.circuit in seen and link.circuit not in said:
                    said.add(link.circuit)
                    found.append(f"site {site} reported circuit {link.circuit} twice in one sync")
            else:
                usable.append(link)
            seen.add(link.circuit)
        return usable, found

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
        links = self._sort(site, links)[0]
        if clock_s is None:
            links = [link.model_copy(update={"samples": []}) for link in links]
        alerts: list[LinkAlert] = []
        with self._lock:
            if service_address is not None:
                self._addresses[site] = service_address
            offset = 0.0 if clock_s is None else self._offset(site, agent_id, clock_s, now)
            for link in links:
                c = self._circuits[link.circuit]
                end = c.ends[site]
                if end.agent_id != agent_id:
                    end.reset(agent_id, now)
                end.report = link
                end.reported_at = now
                alerts += self._feed(c, end, link, offset)
            alerts += self._settle(now)
            self._outbox += alerts
        return alerts

    def _offset(self, site: str, agent_id: str, clock_s: float, now: float) -> float:
        """The agent's clock offset: the smallest (server time − agent clock) of its syncs
        over the last ``_OFFSET_WINDOW_S`` — the least delayed one — so that neither one
        slow request nor, for long, a clock that steps or drifts can move probe times."""
        known = self._offsets.get(site)
        history = known[1] if known is not None and known[0] == agent_id else deque()
        history.append((now, now - clock_s))
        while history and history[0][0] < now - _OFFSET_WINDOW_S:
            history.popleft()
        self._offsets[site] = (agent_id, history)
        return min(offset for _, offset in history)

    def _feed(self, c: _Circuit, end: _End, link: LinkReport, offset: float) -> list[LinkAlert]:
        alerts = []
        for sample in sorted(link.samples, key=lambda s: s.seq):
            if sample.seq <= end.last_seq:
                continue  # already fed (the agent resent it)
            at = sample.sent_s + offset
            if end.tracker is None:
                end.tracker = LinkTracker(self._hysteresis, now=at)
                end.first_at = at
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
        """Re-judge every circuit at ``now`` (ends go stale); the alerts that caused (also
        in the outbox)."""
        with self._lock:
            alerts = self._settle(now)
            self._outbox += alerts
            return alerts

    def take_alerts(self) -> list[LinkAlert]:
        """Every alert not yet taken, oldest first."""
        with self._lock:
            alerts, self._outbox = self._outbox, []
            return alerts

    def put_back(self, alerts: Sequence[LinkAlert]) -> None:
        """Return alerts that could not be stored, ahead of newer ones."""
        with self._lock:
            self._outbox[:0] = alerts

    # -- state and routes -------------------------------------------------------------------

    def _restarting(self, end: _End, now: float) -> bool:
        """Whether a new agent took this end over lately (its probes are still settling)."""
        grace = self._hysteresis.up_after_s + self._lag_s
        return end.changed_at is not None and now - end.changed_at < grace

    def _view(self, end: _End, other: _End, now: float) -> View:
        restarting = self._restarting(end, now)
        if end.tracker is None or end.newest_at is None or end.first_at is None:
            return "warming" if restarting else "unknown"
        if now - end.newest_at > self._stale_s or (
            other.newest_at is not None
            and now - other.newest_at <= self._stale_s
            and other.newest_at - end.newest_at > self._lag_s  # it stopped, the other goes on
        ):
            return "warming" if restarting else "unknown"
        state = end.tracker.state
        if state != "down" and (
            restarting or end.newest_at - end.first_at < self._hysteresis.up_after_s
        ):
            return "warming"
        return state

    def _views(self, c: _Circuit, now: float) -> dict[str, View]:
        a, b = c.ends[c.circuit.a], c.ends[c.circuit.b]
        return {a.site: self._view(a, b, now), b.site: self._view(b, a, now)}

    def _settle(self, now: float) -> list[LinkAlert]:
        alerts = []
        for c in self._circuits.values():
            views = self._views(c, now)
            state = _combine(views.values())
            working = [site for site, v in views.items() if v in ("up", "degraded", "warming")]
            if "down" in views.values() and working:
                # One end sees silence while the other's probes flow.  A peer agent that
                # restarted settles within its grace; the second end of a real cut reports
                # within a sync or two, and an end that stopped reporting is dropped after
                # ``lag_s``: until then keep the state, after that one end's silence is down.
                c.split_since = c.split_since if c.split_since is not None else now
                restarting = any(self._restarting(c.ends[site], now) for site in working)
                state = c.state if restarting or now - c.split_since < self._lag_s else "down"
            else:
                c.split_since = None
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

    def _state_alert(self, c: _Circuit, state: State, views: Mapping[str, View]) -> LinkAlert:
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
                views = self._views(c, now)
                values = [
                    e.report.rtt_min_ms
                    for e in c.ends.values()
                    if e.report is not None
                    and e.report.rtt_min_ms is not None
                    and views[e.site] not in ("unknown", "warming")
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
                    ends=[
                        _end_out(e, view)
                        for e, view in zip(
                            c.ends.values(), self._views(c, now).values(), strict=True
                        )
                    ],
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


def _combine(views: Iterable[View]) -> State:
    """A circuit's state from its ends' views (see the module docstring)."""
    seen = set(views)
    working = seen & {"up", "degraded", "warming"}
    if "down" in seen:
        return "degraded" if working else "down"
    if "degraded" in seen:
        return "degraded"
    if "up" in seen:
        return "up"
    return "unknown"


def _end_out(end: _End, state: View) -> LinkEndOut:
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
