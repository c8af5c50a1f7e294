"""Properties of every circuit of a fabric together (``LinkStates``) and of the alerts'
outbox: each change of a circuit's state makes one alert of its kind, route alerts come with
a new version of the route table, the table routes around exactly the circuits that are
down, every alert is stored once and in order even when storing fails, and an agent's probes
never vouch for a circuit after they have gone stale (not even probes stamped in the
future)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from onecluster.fabric import load_fabric
from onecluster.model import CircuitState
from onecluster.topology import EndReport, LinkAlert, LinkStates, Outbox, Probe

FABRIC = load_fabric(Path(__file__).resolve().parents[2] / "examples/fabrics/three-site.yaml")
SITES = FABRIC.site_names
CIRCUITS = [c.name for c in FABRIC.circuits]
BY_NAME = {c.name: c for c in FABRIC.circuits}
KIND = {"down": {"link_down"}, "degraded": {"link_degraded"}, "unknown": {"link_unknown"}}
KIND["up"] = {"link_up", "link_recovered"}
STATE_KINDS = {"link_up", "link_recovered", "link_down", "link_degraded", "link_unknown"}


@dataclass(frozen=True)
class Sync:
    """One site's sync of one second: sent or not, its delay, each circuit's probe fate."""

    sent: bool
    delay: float
    outcomes: tuple[str, ...]  # per circuit of the fabric: "ok", "lost", "lossy"
    future: bool  # a broken agent: probes stamped after its clock's reading


_sync = st.builds(
    Sync,
    st.sampled_from([True, True, True, False]),
    st.sampled_from([0.0, 0.3, 0.8]),
    st.tuples(*[st.sampled_from(["ok", "ok", "lost", "lossy"]) for _ in CIRCUITS]),
    st.sampled_from([False] * 9 + [True]),
)
_second = st.fixed_dictionaries({site: _sync for site in SITES})
_skews = st.fixed_dictionaries({site: st.sampled_from([0.0, -500.0, 1e4]) for site in SITES})


@dataclass(frozen=True)
class Call:
    """One report or refresh: the circuits' states and the table's version around it."""

    before: dict[str, CircuitState]
    after: dict[str, CircuitState]
    alerts: list[LinkAlert]
    version_before: int
    version_after: int


class Fleet:
    """Every site's agent probing its circuits ten times a second on virtual time, its clock
    ``skew`` seconds behind the server's."""

    def __init__(self, skews: dict[str, float]) -> None:
        self.states = LinkStates(FABRIC)
        self.skews = skews
        self.seq = dict.fromkeys(SITES, 0)
        self.pending: dict[str, dict[str, list[Probe]]] = {s: {} for s in SITES}
        self.returned: list[LinkAlert] = []
        self.calls: list[Call] = []
        self.t = 0

    def step(self, second: dict[str, Sync]) -> None:
        arrivals = []
        for site, sync in second.items():
            skew = self.skews[site]
            for name, outcome in zip(CIRCUITS, sync.outcomes, strict=True):
                circuit = BY_NAME[name]
                if site not in (circuit.a, circuit.b):
                    continue
                for i in range(10):
                    lost = outcome == "lost" or (outcome == "lossy" and i % 4 == 0)
                    sent = self.t + i * 0.1 - skew + (3600.0 if sync.future else 0.0)
                    probe = Probe(self.seq[site], sent, None if lost else circuit.rtt_ms)
                    self.pending[site].setdefault(name, []).append(probe)
                    self.seq[site] += 1
            if sync.sent:
                arrivals.append((self.t + 1 + sync.delay, site))
        for now, site in sorted(arrivals):
            reports = [EndReport(c, tuple(p)) for c, p in self.pending[site].items()]
            self.pending[site] = {}
            clock_s = self.t + 1 - self.skews[site]
            report = self.states.report
            self.record(partial(report, site, f"agent-{site}", reports, clock_s=clock_s, now=now))
        self.record(partial(self.states.refresh, self.t + 1.9))
        self.t += 1

    def run(self, seconds: list[dict[str, Sync]]) -> Fleet:
        for second in seconds:
            self.step(second)
        return self

    def record(self, call: Callable[[], list[LinkAlert]]) -> None:
        before, version = self.circuit_states(), self.states.version
        alerts = call()
        self.returned += alerts
        self.calls.append(Call(before, self.circuit_states(), alerts, version, self.states.version))

    def circuit_states(self) -> dict[str, CircuitState]:
        return {name: ends.state for name, ends in self.states.circuits.items()}


@settings(max_examples=100, deadline=None)
@given(_skews, st.lists(_second, min_size=1, max_size=25))
def test_each_change_of_state_is_one_alert_and_routes_follow_the_circuits_down(
    skews: dict[str, float], seconds: list[dict[str, Sync]]
) -> None:
    fleet = Fleet(skews).run(seconds)
    for call in fleet.calls:
        for name in CIRCUITS:
            mine = [
                a.kind
                for a in call.alerts
                if a.kind in STATE_KINDS and a.message.startswith(f"circuit {name} (")
            ]
            if call.after[name] == call.before[name]:
                assert mine == [], (call, name)
            else:
                assert len(mine) == 1 and mine[0] in KIND[call.after[name]], (call, name)
        # a route alert comes with a new version of the table, one version per change
        assert call.version_after - call.version_before in (0, 1)
        if any(a.kind == "route_changed" for a in call.alerts):
            assert call.version_after == call.version_before + 1, call
    down = {name for name, ends in fleet.states.circuits.items() if ends.state == "down"}
    assert fleet.states.table.down == fleet.states.down == down


@settings(max_examples=100, deadline=None)
@given(
    _skews,
    st.lists(_second, min_size=1, max_size=25),
    st.lists(st.booleans(), min_size=1, max_size=60),
)
def test_every_alert_is_stored_once_and_in_order_though_storing_fails(
    skews: dict[str, float], seconds: list[dict[str, Sync]], store_ok: list[bool]
) -> None:
    fleet = Fleet(skews)
    stored: list[LinkAlert] = []
    for i, second in enumerate(seconds):
        taken = fleet.states.outbox.take()
        fleet.step(second)  # more alerts come while those are being stored
        if store_ok[i % len(store_ok)]:
            stored += taken
        else:  # the database refused them: they wait for the next try, ahead of newer ones
            fleet.states.outbox.put_back(taken)
    stored += fleet.states.outbox.take()
    assert stored == fleet.returned
    assert len(fleet.states.outbox) == 0


@settings(max_examples=100, deadline=None)
@given(_skews, st.lists(_second, min_size=1, max_size=20))
def test_agents_that_fall_silent_leave_every_circuit_unknown(
    skews: dict[str, float], seconds: list[dict[str, Sync]]
) -> None:
    # Once no agent reports, probes stop vouching after stale_s: whatever they claimed,
    # including probes a broken agent stamped after its own clock's reading.
    fleet = Fleet(skews).run(seconds)
    fleet.states.refresh(fleet.t + 1.0 + 5.0)  # past the last sync and stale_s
    assert {ends.state for ends in fleet.states.circuits.values()} == {"unknown"}


@given(st.lists(st.tuples(st.integers(0, 4), st.booleans(), st.integers(0, 3)), max_size=40))
def test_the_outbox_gives_every_alert_once_in_order(ops: list[tuple[int, bool, int]]) -> None:
    # Each round: some alerts come, the control plane takes all, more come while it stores
    # them, and the store takes them or refuses them (they are put back).
    outbox = Outbox()
    added: list[LinkAlert] = []
    stored: list[LinkAlert] = []

    def add(count: int) -> None:
        batch = [LinkAlert("link_up", f"alert {len(added) + i}") for i in range(count)]
        added.extend(batch)
        outbox.add(batch)

    for before, ok, meanwhile in ops:
        add(before)
        taken = outbox.take()
        add(meanwhile)
        if ok:
            stored += taken
        else:
            outbox.put_back(taken)
    stored += outbox.take()
    assert stored == added
