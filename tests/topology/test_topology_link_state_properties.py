"""Properties of one end's link tracker for any sequence of probe outcomes: a fall only after
``down_after_s`` of silence, a return only after ``up_after_s`` of unbroken replies, flap
damping that bounds how often a circuit can fall, and a consistent sequence of events."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from onecluster.topology import Hysteresis, LinkEvent, LinkTracker

STEP = 0.1  # probes ten times a second, as the agents send them
EPS = 1e-9


@dataclass(frozen=True)
class Probe:
    at: float
    rtt_ms: float | None


#: A stretch of probes: answered (at a given RTT), all lost, or one in ``every`` lost.
_segment = st.one_of(
    st.tuples(st.just("ok"), st.floats(0.1, 12.0), st.sampled_from([68.0, 71.0, 95.0])),
    st.tuples(st.just("silent"), st.floats(0.1, 12.0), st.just(0.0)),
    st.tuples(st.just("lossy"), st.floats(0.1, 12.0), st.sampled_from([2.0, 5.0, 10.0])),
)


@st.composite
def probes(draw: st.DrawFn) -> list[Probe]:
    """Probes every 0.1 s (sometimes a longer gap: a stalled prober) over up to ~3 minutes."""
    out: list[Probe] = []
    t = draw(st.floats(0.0, 1000.0))
    for kind, length, value in draw(st.lists(_segment, min_size=1, max_size=15)):
        n = max(1, round(length / STEP))
        for i in range(n):
            if kind == "ok":
                rtt: float | None = value
            elif kind == "silent":
                rtt = None
            else:
                rtt = None if i % int(value) == 0 else 68.0
            out.append(Probe(t, rtt))
            t += STEP
        t += draw(st.sampled_from([0.0, 0.0, 0.0, 0.3, 2.0]))  # a stall between stretches
    return out


def replay(sequence: list[Probe], config: Hysteresis | None = None) -> list[LinkEvent]:
    tracker = LinkTracker(config, now=sequence[0].at)
    return [e for p in sequence for e in tracker.observe(p.at, p.rtt_ms)]


@settings(max_examples=150, deadline=None)
@given(probes())
def test_a_tracker_falls_only_after_silence_and_rises_only_after_steady_replies(
    sequence: list[Probe],
) -> None:
    config = Hysteresis()
    tracker = LinkTracker(config, now=sequence[0].at)
    last_reply = sequence[0].at  # the tracker counts its start as a reply
    steady_since: float | None = sequence[0].at
    for p in sequence:
        if p.rtt_ms is None:
            steady_since = None
        else:
            last_reply = p.at
            steady_since = p.at if steady_since is None else steady_since
        for event in tracker.observe(p.at, p.rtt_ms):
            if event.kind == "down":
                assert event.at - last_reply >= config.down_after_s - EPS
            if event.kind == "up":
                assert steady_since is not None
                assert event.at - steady_since >= config.up_after_s - EPS


@settings(max_examples=150, deadline=None)
@given(probes())
def test_events_follow_the_state_machine(sequence: list[Probe]) -> None:
    allowed = {
        "down": {"up", "degraded"},
        "up": {"down"},
        "degraded": {"up"},
        "recovered": {"degraded"},
    }
    after = {"down": "down", "up": "up", "degraded": "degraded", "recovered": "up"}
    tracker = LinkTracker(now=sequence[0].at)
    state = "up"
    for p in sequence:
        for event in tracker.observe(p.at, p.rtt_ms):
            if event.kind == "rtt_shift":
                continue
            assert state in allowed[event.kind], (state, event)
            state = after[event.kind]
        assert tracker.state == state


def flapping(draw: st.DrawFn) -> list[Probe]:
    """A circuit that keeps falling: cuts of 0.5-3 s between answered stretches of 5-15 s."""
    out: list[Probe] = []
    t = 0.0
    for _ in range(draw(st.integers(3, 12))):
        for _ in range(round(draw(st.floats(5.0, 15.0)) / STEP)):
            out.append(Probe(t, 68.0))
            t += STEP
        for _ in range(round(draw(st.floats(0.5, 3.0)) / STEP)):
            out.append(Probe(t, None))
            t += STEP
    return out


@settings(max_examples=100, deadline=None)
@given(st.one_of(probes(), st.composite(flapping)()))
def test_flap_damping_allows_no_three_falls_within_thirty_seconds(
    sequence: list[Probe],
) -> None:
    # With the defaults a second fall within 30 s lifts the penalty to at least
    # 1,000 × 0.5 + 1,000 = 1,500 (suppress), and it takes another 30 s to decay to 750
    # (reuse): so of any three falls, the last is more than 30 s after the first.
    c = Hysteresis()
    assert c.penalty * 0.5 + c.penalty >= c.suppress_at and c.suppress_at / 2 <= c.reuse_at
    falls = [e.at for e in replay(sequence) if e.kind == "down"]
    for first, third in zip(falls, falls[2:], strict=False):
        assert third - first > c.half_life_s, falls


def test_without_damping_the_same_flaps_fall_every_time() -> None:
    # The property above is damping's doing: with suppression off, a circuit cut for 1 s in
    # every 7 falls four times in 30 s.
    sequence = [Probe(i * STEP, None if (i * STEP) % 7 < 1 else 68.0) for i in range(400)]
    undamped = Hysteresis(suppress_at=float("inf"))
    falls = [e.at for e in replay(sequence, undamped) if e.kind == "down"]
    assert len([t for t in falls if t < 30]) >= 4
    assert len([e for e in replay(sequence) if e.kind == "down" and e.at < 30]) <= 2
