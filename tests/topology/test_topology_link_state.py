"""Link state from probes: hysteresis, flap damping and protection-switch detection, on
virtual time (probes every 0.2 s)."""

from __future__ import annotations

from collections.abc import Callable

from onecluster.fabric import load_fabric
from onecluster.topology import Hysteresis, LinkEvent, LinkTracker, route

STEP = 0.2


def run(
    tracker: LinkTracker, start: float, end: float, rtt: Callable[[float], float | None]
) -> list[LinkEvent]:
    events: list[LinkEvent] = []
    t = start
    while t < end:
        events += tracker.observe(t, rtt(t))
        t = round(t + STEP, 6)
    return events


def test_a_cut_is_down_within_a_second_and_back_only_after_steady_replies() -> None:
    tracker = LinkTracker(now=0.0)
    run(tracker, 0.0, 10.0, lambda t: 68.0)
    assert tracker.state == "up"
    events = run(tracker, 10.0, 20.0, lambda t: None)
    # half a second of silence is a cut: straight to down, never "degraded" on the way
    assert [e.kind for e in events] == ["down"]
    assert events[0].at <= 10.0 + Hysteresis().down_after_s + STEP
    back = run(tracker, 20.0, 30.0, lambda t: 68.0)
    assert [e.kind for e in back] == ["up"]
    assert back[0].at >= 20.0 + Hysteresis().up_after_s


def flaps(period: float) -> Callable[[float], float | None]:
    """Down for 1 s in every ``period`` seconds."""
    return lambda t: None if t % period < 1 else 68.0


def changes(config: Hysteresis, period: float) -> list[LinkEvent]:
    tracker = LinkTracker(config, now=0.0)
    return [e for e in run(tracker, 0.0, 120.0, flaps(period)) if e.kind in ("down", "up")]


def test_flap_damping_is_what_stops_the_oscillation() -> None:
    # 7 s up between 1 s cuts outlasts the 5 s hysteresis: only damping keeps it down.
    assert len(changes(Hysteresis(suppress_at=float("inf")), 8)) > 20
    assert len(changes(Hysteresis(), 8)) <= 3


def test_a_flapping_circuit_is_taken_out_once_not_every_flap() -> None:
    # Down for 1 s in every 5 s, for two minutes.
    tracker = LinkTracker(now=0.0)
    events = run(tracker, 0.0, 120.0, flaps(5))
    taken = [e for e in events if e.kind in ("down", "up")]
    assert len(taken) <= 3, [(e.at, e.kind) for e in taken]
    assert tracker.state == "down"  # still held out while it keeps flapping
    # Once it is steady, the penalty decays and the circuit comes back.
    later = run(tracker, 120.0, 400.0, lambda t: 68.0)
    assert [e.kind for e in later] == ["up"]


def test_loss_and_a_longer_path_are_reported() -> None:
    tracker = LinkTracker(now=0.0)
    run(tracker, 0.0, 20.0, lambda t: 68.0)
    # every 10th probe lost: 10 % loss > 2 %
    lossy = run(tracker, 20.0, 40.0, lambda t: None if round(t / STEP) % 10 == 0 else 68.0)
    assert "degraded" in [e.kind for e in lossy]
    healed = run(tracker, 40.0, 60.0, lambda t: 68.0)
    assert "recovered" in [e.kind for e in healed]
    # a protection switch: the floor moves from 68 ms to 95 ms and stays there
    switched = run(tracker, 60.0, 90.0, lambda t: 95.0)
    shifts = [e for e in switched if e.kind == "rtt_shift"]
    assert len(shifts) == 1
    assert "68.0 ms to 95.0 ms" in shifts[0].detail


def test_route_table_is_stable_under_a_flapping_circuit() -> None:
    fabric = load_fabric("examples/fabrics/three-site.yaml")
    tracker = LinkTracker(now=0.0)
    primaries = []
    t = 0.0
    while t < 120.0:
        tracker.observe(t, None if t % 8 < 1 else 68.0)  # flaps slower than the hysteresis
        down = {"sha-sin-hk"} if tracker.state == "down" else set()
        r = route(fabric, "shanghai", "singapore", down=down)
        assert r.primary is not None
        if not primaries or primaries[-1] != r.primary.circuits:
            primaries.append(r.primary.circuits)
        t = round(t + STEP, 6)
    switches = len(primaries) - 1
    assert switches <= 3  # without damping: 26 switches in these two minutes
