"""One circuit seen from its two ends: each end's view from its own agent's probes, and the
circuit's state from the two views (pure, injected time).

Each end has its own :class:`~onecluster.topology.LinkTracker`, fed in sequence order with
the probes its agent reports (resent ones, recognised by sequence number, are ignored; a new
agent, another ``agent_id``, starts its end afresh).  An end's *view* is ``unknown`` while it
is stale (its newest probe older than ``stale_s``, or lagging more than ``lag_s`` behind the
other end's, whose agent still reports), ``warming`` during its first ``up_after_s`` of probes
— and for ``up_after_s + lag_s`` after a new agent replaced the one before, probes or not —
else its tracker's state.  A circuit is:

- **down** when a fresh end sees it down and no fresh end sees it working.  A failure in
  either direction silences the round-trip probes of *both* ends, so a real cut is seen from
  both, the second end within a sync or two.  While one end sees silence and the other's
  probes flow, the circuit keeps its state for ``lag_s`` (the second report is on its way)
  or, while the working end's agent was just replaced, until its probes settle (a peer
  restarting is not a cut); after that, one end's silence is down;
- **degraded** when an end sees it degraded; **up** when a warm end sees it up;
- **unknown** otherwise — an agent whose probes stopped is never read as a healthy circuit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from onecluster.model import Circuit, CircuitState, EndView
from onecluster.topology._alerts import AlertKind, LinkAlert
from onecluster.topology._carry import CircuitCarry, EndCarry
from onecluster.topology._link_state import Hysteresis, LinkTracker

__all__ = ["LinkEnds", "Probe"]

_WORKING = frozenset({"up", "degraded", "warming"})
_KINDS: dict[CircuitState, AlertKind] = {
    "down": "link_down",
    "degraded": "link_degraded",
    "up": "link_up",
    "unknown": "link_unknown",
}


@dataclass(frozen=True, slots=True)
class Probe:
    """One finished probe as its sender reports it: its sequence number, when it was sent
    (on the sender's clock) and its RTT (``None``: no reply)."""

    seq: int
    sent_s: float
    rtt_ms: float | None


@dataclass(frozen=True, slots=True)
class _Carried:
    """An end's tracker as the leader before left it, placed on this server's clock."""

    down: bool
    penalty: float
    penalty_at: float
    min_rtt_ms: float | None


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
        self.detail = ""
        #: From the leader before, until this end's first tracker (another agent drops it).
        self.carried: _Carried | None = None

    def reset(self, agent_id: str, now: float) -> None:
        if self.agent_id is not None:
            self.changed_at = now
        self.agent_id = agent_id
        self.carried = None  # the leader before's tracker followed another agent
        self.tracker = None
        self.last_seq = -1
        self.first_at = self.newest_at = None


class LinkEnds:
    """The state of one circuit from both ends' probes (see the module docstring)."""

    def __init__(
        self,
        circuit: Circuit,
        *,
        hysteresis: Hysteresis | None = None,
        stale_s: float = 5.0,
        lag_s: float = 3.0,
    ) -> None:
        self.circuit = circuit
        self._hysteresis = hysteresis or Hysteresis()
        self._stale_s = stale_s
        self._lag_s = lag_s
        self._ends = {circuit.a: _End(circuit.a), circuit.b: _End(circuit.b)}
        self.state: CircuitState = "unknown"
        self.since: float | None = None
        self._split_since: float | None = None  # when its ends began to disagree (down vs up)
        self._held_until: float | None = None  # a carried state holds until evidence, or then

    def feed(
        self, site: str, agent_id: str, probes: Iterable[Probe], *, offset: float, now: float
    ) -> list[LinkAlert]:
        """Take ``site``'s agent's probes (each placed at ``sent_s + offset`` in server time);
        the ``link_rtt_shift`` alerts they caused.  Call :meth:`settle` after."""
        end = self._ends[site]
        if end.agent_id != agent_id:
            end.reset(agent_id, now)
        alerts = []
        for probe in sorted(probes, key=lambda p: p.seq):
            if probe.seq <= end.last_seq:
                continue  # already fed (the agent resent it)
            at = probe.sent_s + offset
            if end.tracker is None:
                end.tracker = self._tracker(end, at)
                end.first_at = at
            for event in end.tracker.observe(at, probe.rtt_ms):
                end.detail = event.detail
                if event.kind == "rtt_shift":
                    alerts.append(
                        LinkAlert(
                            "link_rtt_shift",
                            f"circuit {self.circuit.name}, seen from {site}: {event.detail}",
                        )
                    )
            end.last_seq = probe.seq
            end.newest_at = at if end.newest_at is None else max(end.newest_at, at)
        return alerts

    def carry(self, now: float) -> CircuitCarry:
        """What the next leader needs of this circuit at ``now`` (:mod:`._carry`)."""
        ends: list[EndCarry] = []
        for end in self._ends.values():
            if end.tracker is not None:
                down = end.tracker.state == "down"
                penalty, at = end.tracker.damping()
                floor = end.tracker.min_rtt_ms
            elif end.carried is not None:  # not heard from since this leader took over
                kept = end.carried
                down, penalty, at, floor = kept.down, kept.penalty, kept.penalty_at, kept.min_rtt_ms
            else:
                continue
            ends.append(
                EndCarry(
                    site=end.site,
                    down=down,
                    penalty=penalty,
                    penalty_age_s=max(now - at, 0.0),
                    agent_id=end.agent_id,
                    min_rtt_ms=floor,
                )
            )
        c = self.circuit
        return CircuitCarry(name=c.name, a=c.a, b=c.b, state=self.state, ends=tuple(ends))

    def resume(self, carried: CircuitCarry, *, now: float) -> None:
        """Take over ``carried`` (the leader before's carry of this circuit, aged to ``now``):
        its state holds until both ends' probes say otherwise, or for ``up_after_s`` +
        ``stale_s`` + ``lag_s`` (enough for a first report and a warm tracker) if they say
        nothing; each end's first tracker starts down or up as it was, with its penalty and
        RTT floor — unless another agent than the carried one reports first (a restarted
        agent: the end starts afresh, with the restart's grace)."""
        self.state, self.since = carried.state, now
        self._held_until = now + self._hysteresis.up_after_s + self._stale_s + self._lag_s
        for e in carried.ends:
            end = self._ends.get(e.site)
            if end is not None:
                end.agent_id = e.agent_id
                end.carried = _Carried(e.down, e.penalty, now - e.penalty_age_s, e.min_rtt_ms)

    def _tracker(self, end: _End, at: float) -> LinkTracker:
        """The end's first tracker: as the leader before left it, if it carried one."""
        carried, end.carried = end.carried, None
        if carried is None:
            return LinkTracker(self._hysteresis, now=at)
        return LinkTracker(
            self._hysteresis,
            now=at,
            down=carried.down,
            penalty=carried.penalty,
            penalty_at=carried.penalty_at,
            min_rtt_ms=carried.min_rtt_ms,
        )

    def views(self, now: float) -> dict[str, EndView]:
        """Each end's view at ``now``, end ``a`` first."""
        a, b = self._ends[self.circuit.a], self._ends[self.circuit.b]
        return {a.site: self._view(a, b, now), b.site: self._view(b, a, now)}

    def settle(self, now: float) -> LinkAlert | None:
        """Re-judge the circuit at ``now``; the alert of its change of state, if it changed."""
        views = self.views(now)
        state = _combine(views.values())
        working = [site for site, v in views.items() if v in _WORKING]
        if "down" in views.values() and working:
            # One end sees silence while the other's probes flow.  A peer agent that
            # restarted settles within its grace; the second end of a real cut reports
            # within a sync or two, and an end that stopped reporting is dropped after
            # ``lag_s``: until then keep the state, after that one end's silence is down.
            self._split_since = self._split_since if self._split_since is not None else now
            restarting = any(self._restarting(self._ends[site], now) for site in working)
            split_for = now - self._split_since
            state = self.state if restarting or split_for < self._lag_s else "down"
        else:
            self._split_since = None
        if self._held_until is not None:
            if state == "unknown" and now < self._held_until:
                state = self.state  # carried from the leader before: no evidence against it yet
            else:
                self._held_until = None
        if state == self.state:
            return None
        alert = self._state_alert(state, views)
        self.state, self.since = state, now
        return alert

    def _restarting(self, end: _End, now: float) -> bool:
        """Whether a new agent took this end over lately (its probes are still settling)."""
        grace = self._hysteresis.up_after_s + self._lag_s
        return end.changed_at is not None and now - end.changed_at < grace

    def _view(self, end: _End, other: _End, now: float) -> EndView:
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

    def _state_alert(self, state: CircuitState, views: dict[str, EndView]) -> LinkAlert:
        c = self.circuit
        name = f"circuit {c.name} ({c.a}–{c.b})"
        seen = [site for site, v in views.items() if v == state]
        details = "; ".join(
            f"{site}: {self._ends[site].detail}" for site in seen if self._ends[site].detail
        )
        if state == "unknown":
            return LinkAlert(
                "link_unknown", f"{name}: no fresh probe results from either end", warning=True
            )
        if state == "up" and self.state in ("unknown", "degraded"):
            if self.state == "unknown":
                return LinkAlert("link_up", f"{name} is measured up", warning=False)
            return LinkAlert("link_recovered", f"{name} recovered", warning=False)
        suffix = f" ({details})" if details else ""
        return LinkAlert(_KINDS[state], f"{name} is {state}{suffix}", warning=state != "up")


def _combine(views: Iterable[EndView]) -> CircuitState:
    """A circuit's state from its ends' views (see the module docstring)."""
    seen = set(views)
    if "down" in seen:
        return "down"  # with a working end too, :meth:`LinkEnds.settle` judges the split
    if "degraded" in seen:
        return "degraded"
    if "up" in seen:
        return "up"
    return "unknown"
