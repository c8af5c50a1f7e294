"""A new leader goes on from the carry of the one before: no circuit is judged again from
nothing, so no false ``down`` or ``up``, no route flap, no alert sent twice, and flap damping
holds.  Each test runs the same reports through a board without the carry, to show what it
prevents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from onecluster.errors import ValidationError
from onecluster.fabric import load_fabric
from onecluster.topology import EndReport, LinkCarry, LinkStates, Probe

if TYPE_CHECKING:
    from conftest import ProbingAgents

THREE = load_fabric(Path(__file__).resolve().parents[2] / "examples/fabrics/three-site.yaml")


def _cut(agents: ProbingAgents) -> LinkStates:
    """A board that saw sha-tyo cut at t = 7 s after 7 s of healthy probes (now t = 9)."""
    states = LinkStates(THREE)
    agents.feed(states, 0, 7)
    agents.cut = {"sha-tyo"}
    agents.feed(states, 7, 9)
    assert states.down == {"sha-tyo"}
    return states


def _kept(carry: LinkCarry) -> LinkCarry:
    """``carry`` as a new leader reads it back from the database's JSON."""
    return LinkCarry.from_dict(json.loads(json.dumps(carry.as_dict())))


def _next_leader(carry: LinkCarry | None, now: float) -> LinkStates:
    states = LinkStates(THREE)
    if carry is not None:
        states.resume(_kept(carry), now)
    return states


@pytest.mark.parametrize("carried", [True, False])
def test_a_cut_circuit_stays_down_under_the_same_table_with_no_alert_twice(
    agents: ProbingAgents, carried: bool
) -> None:
    before = _cut(agents)
    version = before.version
    after = _next_leader(before.carry(9.0) if carried else None, 9.0)
    # The table it sends the agents at once, before any report reached it.
    at_once = after.table.same_paths(before.table)
    # The agents' reports go on, the circuit still cut; and time passes with no report.
    kinds = agents.feed(after, 9, 12) + [a.kind for a in after.refresh(12.5)]
    if carried:
        assert at_once
        assert kinds == []
        assert after.circuits["sha-tyo"].state == "down"
        assert (after.down, after.version) == ({"sha-tyo"}, version)
    else:  # what a new leader did before the carry: routes onto the cut circuit, then back
        assert not at_once
        assert kinds.count("link_down") == 1  # sent a second time
        assert "route_changed" in kinds


def test_a_circuit_that_healed_meanwhile_comes_up_once(agents: ProbingAgents) -> None:
    before = _cut(agents)
    after = _next_leader(before.carry(9.0), 9.0)
    agents.cut = set()
    # Up after up_after_s (5 s) of replies — flap damping permitting: one fall is not enough.
    kinds = agents.feed(after, 9, 20)
    assert kinds.count("link_up") == 1
    assert after.down == frozenset()
    assert after.version == before.version + 1


@pytest.mark.parametrize("carried", [True, False])
def test_flap_damping_holds_across_a_change_of_leader(agents: ProbingAgents, carried: bool) -> None:
    before = LinkStates(THREE)
    agents.feed(before, 0, 7)
    for start in range(7, 25, 6):  # down 2 s of every 6: the penalty passes suppress_at
        agents.cut = {"sha-tyo"}
        agents.feed(before, start, start + 2)
        agents.cut = set()
        agents.feed(before, start + 2, start + 6)
    agents.cut = {"sha-tyo"}
    agents.feed(before, 25, 27)
    assert before.circuits["sha-tyo"].state == "down"
    after = _next_leader(before.carry(27.0) if carried else None, 27.0)
    agents.cut = set()
    kinds = agents.feed(after, 27, 40)  # 13 s of replies: steady, but still damped
    if carried:
        assert "link_up" not in kinds
        assert after.circuits["sha-tyo"].state == "down"
    else:
        assert after.circuits["sha-tyo"].state == "up"


def test_a_carried_state_holds_until_the_first_reports_and_no_longer(
    agents: ProbingAgents,
) -> None:
    before = LinkStates(THREE)
    agents.feed(before, 0, 7)
    after = _next_leader(before.carry(7.0), 7.0)
    assert all(ends.state == "up" for ends in after.circuits.values())
    assert after.refresh(8.0) == []  # no report yet: not "unknown"
    # No agent ever reports to this leader: after the hold, nothing vouches for the circuits.
    kinds = [a.kind for a in after.refresh(7.0 + 5.0 + 5.0 + 3.0 + 0.1)]
    assert kinds == ["link_unknown"] * len(THREE.circuits)


def test_a_carry_ages_its_penalties_and_keeps_its_endpoints(agents: ProbingAgents) -> None:
    carry = _cut(agents).carry(9.0)
    carry = LinkCarry(
        version=carry.version,
        down=carry.down,
        circuits=carry.circuits,
        endpoints=(("sha-tyo", "tokyo", "10.0.0.3:7000"),),
    )
    older = _kept(carry.aged(30.0))
    assert older.endpoints == carry.endpoints
    assert older.shape() == carry.shape()
    ages = [e.penalty_age_s for c in carry.circuits for e in c.ends]
    assert [e.penalty_age_s for c in older.circuits for e in c.ends] == [a + 30.0 for a in ages]


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '{"version": 1}',
        '{"version": 1, "down": [], "circuits": [{"name": "x"}]}',
        '{"version": 1e400, "down": [], "circuits": []}',
        '{"version": 1, "down": "sha-tyo", "circuits": []}',
        '{"version": -1, "down": [], "circuits": []}',
    ],
)
def test_a_carry_that_cannot_be_read_is_refused(text: str) -> None:
    with pytest.raises(ValidationError, match="cannot be read"):
        LinkCarry.from_dict(json.loads(text))


def test_a_carry_with_an_unknown_state_is_refused(agents: ProbingAgents) -> None:
    carry = _cut(agents).carry(9.0)
    with pytest.raises(ValidationError, match="unknown circuit state"):
        text = json.dumps(carry.as_dict()).replace('"state": "down"', '"state": "sideways"')
        LinkCarry.from_dict(json.loads(text))


def test_an_agent_restarted_during_the_change_of_leader_starts_its_end_afresh(
    agents: ProbingAgents,
) -> None:
    # Held down by its damping at the old leader; the new agent at Tokyo is another process,
    # whose end starts afresh (as the old leader would have done), with the restart's grace.
    before = _cut(agents)
    carry = before.carry(9.0)
    cut = next(c for c in carry.circuits if c.name == "sha-tyo")
    tokyo = next(e for e in cut.ends if e.site == "tokyo")
    assert tokyo.agent_id == "agent-tokyo" and tokyo.down
    after = _next_leader(carry, 9.0)
    ends = after.circuits["sha-tyo"]
    agents.cut = set()
    ends.feed("tokyo", "agent-tokyo-2", [], offset=0.0, now=9.5)
    assert ends._ends["tokyo"].carried is None and ends._ends["tokyo"].changed_at == 9.5
    assert ends._ends["shanghai"].carried is not None  # the same agent: carried on


def test_the_rtt_floor_is_carried_so_a_degraded_circuit_is_judged_as_before() -> None:
    # The path grew longer: degraded against the old floor.  The new leader must judge it as
    # the old one would have gone on to (an rtt_shift, then the new floor), not as a fresh
    # tracker whose floor is the longer path (an early, false "recovered", no rtt_shift).
    old = LinkStates(THREE)
    rtt = old.circuits["sha-tyo"].circuit.rtt_ms
    seqs = {"shanghai": 0, "tokyo": 0}

    def feed(boards: list[LinkStates], start: int, end: int, rtt: float) -> list[list[str]]:
        kinds: list[list[str]] = [[] for _ in boards]
        for t in range(start, end):
            for site in ("shanghai", "tokyo"):
                probes = [Probe(seqs[site] + i, t + i / 10, rtt) for i in range(10)]
                seqs[site] += 10
                report = [EndReport("sha-tyo", tuple(probes))]
                for n, board in enumerate(boards):
                    at = t + 1.0
                    alerts = board.report(site, f"agent-{site}", report, clock_s=at, now=at)
                    kinds[n] += [a.kind for a in alerts]
        return kinds

    feed([old], 0, 12, rtt)
    feed([old], 12, 18, rtt * 2)
    assert old.circuits["sha-tyo"].state == "degraded"
    new = LinkStates(THREE)
    new.resume(_kept(old.carry(18.0)), 18.0)
    kept_on, taken_over = feed([old, new], 18, 34, rtt * 2)
    assert "link_rtt_shift" in kept_on
    assert taken_over == kept_on
