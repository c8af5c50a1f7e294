"""Properties of one circuit judged from its two ends (``LinkEnds``), for any sequence of
syncs: what each end's agent measured (answered, silent, lossy), whether its sync got
through, was held (the agent kept its probes for the next one) or came from a new agent, and
how late it arrived.  The rules are those of ``docs/links.md``, "Link state"."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from onecluster.model import Circuit, CircuitState, EndView
from onecluster.topology import Hysteresis, LinkEnds, Probe

CIRCUIT = Circuit(name="a-b", a="a", b="b", capacity_gbps=10.0, rtt_ms=20.0)
SITES = ("a", "b")
HYSTERESIS = Hysteresis()
STALE_S, LAG_S = 5.0, 3.0
WORKING = {"up", "degraded", "warming"}
EPS = 1e-9


@dataclass(frozen=True)
class Move:
    """What one end does in one second: its probes' fate, its sync's, and the sync's delay."""

    outcome: str  # "ok", "lost" or "lossy"
    sync: str  # "send", "hold" or "restart"
    delay: float


@dataclass(frozen=True)
class Seen:
    """The circuit after one settle."""

    now: float
    before: CircuitState
    state: CircuitState
    views: dict[str, EndView]
    fed: dict[str, int]  # probes fed to each end so far
    probing: dict[str, float]  # how long each end's current agent's probes span
    replaced: dict[str, float | None]  # when a new agent took each end over


@dataclass
class Agent:
    site: str
    generation: int = 0
    seq: int = 0
    pending: list[Probe] = field(default_factory=list)

    @property
    def agent_id(self) -> str:
        return f"{self.site}-{self.generation}"


class Harness:
    """Both ends probing ten times a second; each second's syncs fed and settled in the order
    they arrive, then the reconcile loop's refresh."""

    def __init__(self) -> None:
        self.ends = LinkEnds(CIRCUIT, hysteresis=HYSTERESIS, stale_s=STALE_S, lag_s=LAG_S)
        self.agents = {site: Agent(site) for site in SITES}
        self.fed: dict[str, list[Probe]] = {site: [] for site in SITES}
        self.seen: list[Seen] = []
        self.t = 0
        self.agent_ids: dict[str, str | None] = dict.fromkeys(SITES)
        self.first: dict[str, Probe | None] = dict.fromkeys(SITES)  # of the current agent
        self.replaced: dict[str, float | None] = dict.fromkeys(SITES)

    def step(self, moves: dict[str, Move]) -> None:
        arrivals = []
        for site, move in moves.items():
            agent = self.agents[site]
            if move.sync == "restart":  # a new agent: it learns its peers before it probes
                self.agents[site] = agent = Agent(site, agent.generation + 1)
            else:
                for i in range(10):
                    lost = move.outcome == "lost" or (move.outcome == "lossy" and i % 3 == 0)
                    sent = self.t + i * 0.1
                    agent.pending.append(Probe(agent.seq, sent, None if lost else 20.0))
                    agent.seq += 1
            if move.sync != "hold":
                arrivals.append((self.t + 1 + move.delay, site))
        for now, site in sorted(arrivals):
            agent = self.agents[site]
            if self.agent_ids[site] != agent.agent_id:
                if self.agent_ids[site] is not None:
                    self.replaced[site] = now
                self.agent_ids[site], self.first[site] = agent.agent_id, None
            if self.first[site] is None and agent.pending:
                self.first[site] = agent.pending[0]
            self.ends.feed(site, agent.agent_id, agent.pending, offset=0.0, now=now)
            self.fed[site] += agent.pending
            agent.pending = []
            self.settle(now)
        self.settle(self.t + 1.75)
        self.t += 1

    def settle(self, now: float) -> None:
        before = self.ends.state
        self.ends.settle(now)
        fed = {site: len(probes) for site, probes in self.fed.items()}
        probing = {}
        for site in SITES:
            first = self.first[site]
            probing[site] = self.fed[site][-1].sent_s - first.sent_s if first else 0.0
        views = self.ends.views(now)
        self.seen.append(
            Seen(now, before, self.ends.state, views, fed, probing, dict(self.replaced))
        )


def moves(outcomes: list[str], syncs: list[str]) -> st.SearchStrategy[dict[str, Move]]:
    move = st.builds(
        Move, st.sampled_from(outcomes), st.sampled_from(syncs), st.sampled_from([0.0, 0.2, 0.6])
    )
    return st.fixed_dictionaries({site: move for site in SITES})


ANY = moves(["ok", "lost", "lossy"], ["send", "send", "send", "hold", "restart"])
STEADY_AGENTS = moves(["ok", "lost", "lossy"], ["send"])


def run(steps: list[dict[str, Move]]) -> Harness:
    harness = Harness()
    for step in steps:
        harness.step(step)
    return harness


@settings(max_examples=200, deadline=None)
@given(st.lists(ANY, min_size=1, max_size=40))
def test_a_circuit_is_down_only_while_an_end_sees_it_down(steps: list[dict[str, Move]]) -> None:
    for seen in run(steps).seen:
        if seen.state == "down":
            assert "down" in seen.views.values(), seen


@st.composite
def comebacks(draw: st.DrawFn) -> list[dict[str, Move]]:
    """Anything, then one end's agent replaced while the other's is away, then probing."""
    back = draw(st.sampled_from(SITES))
    away = next(site for site in SITES if site != back)
    delay = draw(st.sampled_from([0.0, 0.2, 0.6]))
    tail = [{back: Move("ok", "restart", delay), away: Move("ok", "hold", 0.0)}]
    tail += [{back: Move("ok", "send", delay), away: Move("ok", "hold", 0.0)}] * draw(
        st.integers(1, 12)
    )
    return draw(st.lists(ANY, min_size=1, max_size=20)) + tail


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.lists(ANY, min_size=1, max_size=40), comebacks()))
def test_an_end_vouches_for_a_circuit_only_once_its_agent_has_probed_a_while(
    steps: list[dict[str, Move]],
) -> None:
    # A new agent (or a restarted server) does not vouch for a circuit on its first reply,
    # nor one that just replaced another while the probes settle.
    grace = HYSTERESIS.up_after_s + LAG_S
    for s in run(steps).seen:
        if s.before != "up" and s.state == "up":
            assert any(
                s.views[site] == "up"
                and s.probing[site] >= HYSTERESIS.up_after_s - EPS
                and ((r := s.replaced[site]) is None or s.now - r >= grace - EPS)
                for site in SITES
            ), s


@settings(max_examples=100, deadline=None)
@given(st.lists(moves(["ok"], ["send", "hold", "restart"]), min_size=1, max_size=40))
def test_a_circuit_whose_probes_are_all_answered_is_never_down(
    steps: list[dict[str, Move]],
) -> None:
    # Agents come and go, syncs are held and late: none of that is evidence of a cut.
    assert all(seen.state != "down" for seen in run(steps).seen)


@settings(max_examples=200, deadline=None)
@given(st.lists(ANY, min_size=1, max_size=40))
def test_one_ends_silence_is_down_only_once_it_lasted_the_lag(
    steps: list[dict[str, Move]],
) -> None:
    seen = run(steps).seen
    split_since: float | None = None
    for s in seen:
        split = "down" in s.views.values() and bool(WORKING & set(s.views.values()))
        split_since = (split_since if split_since is not None else s.now) if split else None
        if split and s.before != "down" and s.state == "down":
            assert split_since is not None and s.now - split_since >= LAG_S - EPS, s


@settings(max_examples=200, deadline=None)
@given(st.lists(ANY, min_size=1, max_size=30), st.sampled_from([0.0, 0.2, 0.6]))
def test_both_ends_reporting_silence_is_down_at_once(
    steps: list[dict[str, Move]], delay: float
) -> None:
    # A cut silences the round-trip probes of both ends: a second of that, reported by both,
    # is down by the end of that second, whatever happened before.
    harness = run(steps)
    harness.step({site: Move("lost", "send", delay) for site in SITES})
    assert harness.seen[-1].state == "down"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(STEADY_AGENTS, min_size=0, max_size=25),
    st.sampled_from(SITES),
    st.sampled_from([0.0, 0.2, 0.6]),
)
def test_one_ends_silence_that_lasts_is_down(
    steps: list[dict[str, Move]], silent: str, delay: float
) -> None:
    # One end's probes fail while the other's pass (a one-way filter): once that has lasted
    # the lag and a second, the circuit is routed around.
    harness = run(steps)
    talking = next(site for site in SITES if site != silent)
    for _ in range(math.ceil(LAG_S) + 1):
        harness.step({silent: Move("lost", "send", delay), talking: Move("ok", "send", 0.0)})
    assert harness.seen[-1].state == "down"


@settings(max_examples=200, deadline=None)
@given(st.lists(STEADY_AGENTS, min_size=1, max_size=60))
def test_a_circuit_leaves_down_only_after_steady_replies_from_an_end(
    steps: list[dict[str, Move]],
) -> None:
    harness = run(steps)
    went_down: dict[str, int] | None = None
    for s in harness.seen:
        if s.before != "down" and s.state == "down":
            went_down = s.fed
        if s.before == "down" and s.state in ("up", "degraded"):
            assert went_down is not None
            assert any(
                _steady_run_after(harness.fed[site][: s.fed[site]], went_down[site])
                for site in SITES
            ), s


def _steady_run_after(probes: list[Probe], index: int) -> bool:
    """Whether an unbroken run of replies of ``up_after_s`` ends at a probe from ``index`` on."""
    start: float | None = probes[0].sent_s if probes else None  # a tracker's start counts
    for i, p in enumerate(probes):
        if p.rtt_ms is None:
            start = None
            continue
        start = p.sent_s if start is None else start
        if i >= index and p.sent_s - start >= HYSTERESIS.up_after_s - EPS:
            return True
    return False


@settings(max_examples=100, deadline=None)
@given(
    st.integers(0, 2),
    st.sampled_from([0.0, 0.2, 0.6]),
    st.sampled_from([0.0, 0.2, 0.6]),
    st.sampled_from(SITES),
)
def test_a_peer_agent_restarting_within_the_lag_is_not_a_cut(
    away: int, delay: float, peer_delay: float, peer: str
) -> None:
    # The peer's agent dies (its probes stop; ours to it go unanswered), and a new one takes
    # over ``away`` seconds later: it first learns its peers, then probes.
    me = next(site for site in SITES if site != peer)
    harness = run([{site: Move("ok", "send", 0.0) for site in SITES}] * 7)
    warm = len(harness.seen)
    assert harness.seen[-1].state == "up"
    for _ in range(away):
        harness.step({me: Move("lost", "send", delay)})
    harness.step({me: Move("ok", "send", delay), peer: Move("ok", "restart", peer_delay)})
    for _ in range(15):
        harness.step({me: Move("ok", "send", delay), peer: Move("ok", "send", peer_delay)})
    assert {s.state for s in harness.seen[warm:]} == {"up"}, harness.seen[warm:]
