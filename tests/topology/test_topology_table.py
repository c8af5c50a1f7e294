"""The route table: next hops, reroutes around cut circuits, hop-by-hop consistency, and the
all-pairs planning check."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onecluster.fabric import load_fabric
from onecluster.model import Fabric
from onecluster.topology import RouteTable, check_pairs, route_table

ROOT = Path(__file__).resolve().parents[2]
THREE = load_fabric(ROOT / "examples/fabrics/three-site.yaml")
METRO = load_fabric(ROOT / "examples/fabrics/four-site-metro.yaml")


def test_next_hops_follow_the_lowest_rtt_circuits() -> None:
    table = route_table(THREE)
    hop = table.next_hop("shanghai", "singapore")
    assert hop is not None and (hop.circuit, hop.site) == ("sha-sin-hk", "singapore")
    assert {r.dst for r in table.of_site("tokyo")} == {"shanghai", "singapore"}
    assert table.down == frozenset()


def test_cutting_shanghai_singapore_relays_through_tokyo() -> None:
    table = route_table(THREE, down={"sha-sin-hk", "sha-sin-tw"})
    there = table.next_hop("shanghai", "singapore")
    back = table.next_hop("singapore", "shanghai")
    assert there is not None and (there.circuit, there.site) == ("sha-tyo", "tokyo")
    assert back is not None and (back.circuit, back.site) == ("sin-tyo", "tokyo")
    # the relay's own entries carry the traffic on: Tokyo sends it straight on
    onward = table.next_hop("tokyo", "singapore")
    assert onward is not None and onward.circuit == "sin-tyo"
    assert not table.same_paths(route_table(THREE))


def test_a_site_cut_off_has_no_next_hop() -> None:
    table = route_table(THREE, down={"sha-tyo", "sin-tyo"})
    assert table.next_hop("shanghai", "tokyo") is None
    assert table.route("tokyo", "singapore").primary is None


def test_measured_rtts_can_replace_the_fabrics() -> None:
    # a protection switch made sha-sin-hk slower than sha-sin-tw
    table = route_table(THREE, rtt_ms={"sha-sin-hk": 90.0})
    hop = table.next_hop("shanghai", "singapore")
    assert hop is not None and hop.circuit == "sha-sin-tw"


def follow(table: RouteTable, src: str, dst: str) -> list[str] | None:
    """The sites a packet crosses when every site forwards by its own entry."""
    here, seen = src, [src]
    while here != dst:
        hop = table.next_hop(here, dst)
        if hop is None:
            return None
        here = hop.site
        if here in seen:
            pytest.fail(f"routing loop {[*seen, here]}")
        seen.append(here)
    return seen


@pytest.mark.parametrize("fabric", [THREE, METRO], ids=["three-site", "metro"])
@given(data=st.data())
def test_hop_by_hop_forwarding_follows_each_sources_primary(
    fabric: Fabric, data: st.DataObject
) -> None:
    names = [c.name for c in fabric.circuits]
    down = data.draw(st.sets(st.sampled_from(names)))
    table = route_table(fabric, down=down)
    for (src, dst), r in table.routes.items():
        walked = follow(table, src, dst)
        if r.primary is None:
            assert walked is None
        else:
            assert walked == list(r.primary.sites)


def test_every_pair_is_checked_and_objectives_give_the_verdict() -> None:
    pairs = {(p.a, p.b): p for p in check_pairs(THREE)}
    assert set(pairs) == {("shanghai", "singapore"), ("shanghai", "tokyo"), ("singapore", "tokyo")}
    sh_tk = pairs[("shanghai", "tokyo")]
    assert sh_tk.objective is not None and sh_tk.verdict == "primary-only"
    assert (sh_tk.primary_rtt_ms, sh_tk.backup_rtt_ms) == (26, 140)
    assert sh_tk.backup_sites == ("shanghai", "singapore", "tokyo")
    sh_sg = pairs[("shanghai", "singapore")]
    assert sh_sg.objective is None and sh_sg.verdict == "ok"  # a disjoint backup exists


def test_measured_rtts_change_the_verdict() -> None:
    # measured 45 ms on the direct Shanghai-Tokyo circuit: the objective fails outright
    pairs = {(p.a, p.b): p for p in check_pairs(THREE, rtt_ms={"sha-tyo": 45.0})}
    assert pairs[("shanghai", "tokyo")].verdict == "violated"


def test_metro_sub_millisecond_pairs_hold_on_both_paths() -> None:
    pairs = {(p.a, p.b): p for p in check_pairs(METRO)}
    east_west = pairs[("metro-east", "metro-west")]
    assert east_west.verdict == "ok"
    assert east_west.backup_rtt_ms == pytest.approx(0.75)
    assert pairs[("metro-east", "regional")].objective is None
