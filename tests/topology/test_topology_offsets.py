"""Properties of the agents' clock offsets: no probe is ever placed after the sync that
reported it arrived, the least delayed sync sets the offset, and a new agent starts afresh."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from onecluster.topology import ClockOffsets

_time = st.floats(-1e6, 1e6, allow_nan=False)
_delay = st.floats(0.0, 5.0)

#: Syncs of one site: (agent, the agent's clock reading, seconds since the previous sync).
_syncs = st.lists(
    st.tuples(st.sampled_from(["agent-1", "agent-2"]), _time, st.floats(0.0, 30.0)),
    min_size=1,
    max_size=50,
)


@given(_syncs, st.floats(0.0, 1e4))
def test_no_probe_is_placed_after_its_sync_arrived(
    syncs: list[tuple[str, float, float]], age: float
) -> None:
    # Whatever the agents' clocks read (skewed, stepping, going backwards): a probe sent
    # ``age`` seconds before the agent built its sync is placed no later than its arrival.
    offsets = ClockOffsets()
    now = 0.0
    for agent, clock_s, gap in syncs:
        now += gap
        offset = offsets.offset("tokyo", agent, clock_s, now)
        assert (clock_s - age) + offset <= now + 1e-6 * max(1.0, abs(now), abs(clock_s))


@given(_time, st.lists(st.tuples(_delay, st.floats(0.5, 5.0)), min_size=1, max_size=40))
def test_the_least_delayed_sync_of_the_window_sets_the_offset(
    skew: float, syncs: list[tuple[float, float]]
) -> None:
    # The agent's clock reads the server's time less ``skew``; each sync spends its delay in
    # transit.  The offset is the skew plus the smallest delay of the last minute.
    offsets = ClockOffsets(window_s=60.0)
    sent, history = 1000.0, []
    for delay, gap in syncs:
        sent += gap
        now = sent + delay
        history.append((now, delay))
        offset = offsets.offset("tokyo", "agent", sent - skew, now)
        recent = min(d for at, d in history if at >= now - 60.0)
        assert abs(offset - (skew + recent)) <= 1e-6 * max(1.0, abs(skew), now)


@given(_time, _time, st.floats(0.0, 100.0))
def test_a_new_agent_starts_afresh(first: float, second: float, now: float) -> None:
    offsets = ClockOffsets()
    offsets.offset("tokyo", "agent-1", first, now)
    assert offsets.offset("tokyo", "agent-2", second, now + 1.0) == now + 1.0 - second
    assert offsets.offset("osaka", "agent-1", second, now) == now - second  # sites apart
