"""A new fabric in force keeps the state, probe history and flap damping of every circuit
that still joins the same two sites; circuits added or moved start afresh; routes follow."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from onecluster.fabric import load_fabric
from onecluster.model import Circuit, Fabric, GpuPool, Site
from onecluster.topology import LinkStates

if TYPE_CHECKING:
    from conftest import ProbingAgents

THREE = load_fabric(Path(__file__).resolve().parents[2] / "examples/fabrics/three-site.yaml")


def _onboarded() -> Fabric:
    """THREE with Osaka (one circuit to Tokyo) and a corrected RTT on sin-tyo."""
    osaka = Site(
        name="osaka", region="r", jurisdiction="JP", pools=(GpuPool(gpu_type="H200", count=8),)
    )
    return replace(
        THREE,
        sites=(*THREE.sites, osaka),
        circuits=(
            *(replace(c, rtt_ms=70.0) if c.name == "sin-tyo" else c for c in THREE.circuits),
            Circuit(name="tyo-osa", a="tokyo", b="osaka", capacity_gbps=10, rtt_ms=8),
        ),
    )


def test_circuits_that_stay_keep_their_state_and_damping_and_new_ones_start_unknown(
    agents: ProbingAgents,
) -> None:
    states = LinkStates(THREE)
    agents.feed(states, 0, 7)
    agents.cut = {"sha-tyo"}
    agents.feed(states, 7, 9)
    cut = states.circuits["sha-tyo"]
    assert (cut.state, states.down) == ("down", {"sha-tyo"})
    since, version = cut.since, states.version
    kinds = [a.kind for a in states.refit(_onboarded(), now=9.0)]
    assert kinds == []  # no pair of the old sites changed its primary path
    assert states.circuits["sha-tyo"] is cut and (cut.state, cut.since) == ("down", since)
    assert states.circuits["sin-tyo"].state == "up"
    assert states.circuits["sin-tyo"].circuit.rtt_ms == 70.0
    assert states.circuits["tyo-osa"].state == "unknown"
    assert states.version == version + 1  # routes to and from Osaka are new
    assert states.table.route("osaka", "shanghai").primary is not None
    assert states.down == {"sha-tyo"}
    # Damping held: probes answered again, the circuit stays down for its steady 5 s at least.
    agents.cut = set()
    assert "link_up" not in agents.feed(states, 9, 12)
    assert states.circuits["sha-tyo"].state == "down"


def test_a_circuit_moved_to_other_sites_starts_afresh_and_a_removed_one_is_forgotten(
    agents: ProbingAgents,
) -> None:
    states = LinkStates(THREE)
    agents.feed(states, 0, 7)
    assert set(states.circuits) == {c.name for c in THREE.circuits}
    moved = replace(
        THREE,
        circuits=tuple(
            replace(c, a="shanghai", b="tokyo") if c.name == "sha-sin-tw" else c
            for c in THREE.circuits
            if c.name != "sha-sin-hk"
        ),
    )
    kinds = [a.kind for a in states.refit(moved, now=7.0)]
    assert "sha-sin-hk" not in states.circuits
    assert states.circuits["sha-sin-tw"].state == "unknown"
    assert states.circuits["sha-tyo"].state == "up"
    # Shanghai–Singapore went over sha-sin-hk; now it has no direct circuit: a route change.
    assert kinds == ["route_changed"]
    alert = states.outbox.take()[-1]  # after the link_up alerts of the warm-up
    assert alert.message.startswith("route shanghai→singapore now ")


def test_the_same_fabric_again_changes_nothing(agents: ProbingAgents) -> None:
    states = LinkStates(THREE)
    agents.feed(states, 0, 7)
    before = {name: ends for name, ends in states.circuits.items()}
    version = states.version
    assert states.refit(THREE, now=7.0) == []
    assert states.circuits == before and states.version == version
