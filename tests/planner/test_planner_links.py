"""From a fabric to the WAN ring: circuits joined, ring order chosen, bad sites refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from onecluster.errors import ValidationError
from onecluster.fabric import load_fabric
from onecluster.model import Circuit, Fabric, GpuPool, Site
from onecluster.planner import PlanInputs, SitePlan, fabric_notes, hop_between, ring_from_fabric

FABRICS = Path(__file__).resolve().parents[2] / "examples" / "fabrics"


def _fabric(*circuits: tuple[str, str, float, float]) -> Fabric:
    names = sorted({end for c in circuits for end in c[:2]})
    return Fabric(
        name="test",
        sites=tuple(
            Site(name=n, region="r", jurisdiction="J", pools=(GpuPool(gpu_type="H100", count=64),))
            for n in names
        ),
        circuits=tuple(
            Circuit(name=f"{a}-{b}", a=a, b=b, capacity_gbps=cap, rtt_ms=rtt)
            for a, b, cap, rtt in circuits
        ),
    )


def test_parallel_circuits_add_capacity_and_keep_the_slowest_rtt() -> None:
    fabric = load_fabric(FABRICS / "three-site.yaml")
    hop = hop_between(fabric, "shanghai", "singapore")
    assert hop is not None
    assert (hop.capacity_gbps, hop.rtt_ms, hop.distance_km) == (2, 71, 7200)
    assert hop.circuits == ("sha-sin-hk", "sha-sin-tw")
    assert hop_between(_fabric(("a", "b", 1, 1), ("b", "c", 1, 1)), "a", "c") is None


def test_bundles_count_every_parallel_circuit() -> None:
    fabric = load_fabric(FABRICS / "four-site-metro.yaml")
    hop = hop_between(fabric, "metro-west", "regional")
    assert hop is not None and hop.capacity_gbps == 400 * 8


def test_two_sites_keep_their_order_and_one_hop() -> None:
    fabric = load_fabric(FABRICS / "three-site.yaml")
    order, hops = ring_from_fabric(fabric, ["singapore", "tokyo"])
    assert order == ("singapore", "tokyo")
    assert len(hops) == 1 and hops[0].joins("tokyo", "singapore")


def test_three_sites_form_the_triangle() -> None:
    fabric = load_fabric(FABRICS / "three-site.yaml")
    order, hops = ring_from_fabric(fabric, ["shanghai", "singapore", "tokyo"])
    assert len(hops) == 3
    for j, hop in enumerate(hops):
        assert (hop.a, hop.b) == (order[j], order[(j + 1) % 3])


def test_the_ring_avoids_missing_circuits_and_prefers_the_fastest_bottleneck() -> None:
    # a-b-c-d-a is a ring; a-c is missing.  b-d is fat, but a ring through it must use a-c.
    fabric = _fabric(
        ("a", "b", 10, 1),
        ("b", "c", 10, 1),
        ("c", "d", 10, 1),
        ("d", "a", 10, 1),
        ("b", "d", 100, 1),
    )
    order, hops = ring_from_fabric(fabric, ["a", "b", "c", "d"])
    assert order in {("a", "b", "c", "d"), ("a", "d", "c", "b")}
    assert min(h.capacity_gbps for h in hops) == 10
    four = load_fabric(FABRICS / "four-site-metro.yaml")
    order, _ = ring_from_fabric(four, list(four.site_names))
    assert order[0] == "metro-east" and {order[1], order[3]} == {"metro-west", "metro-north"}


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["shanghai", "mars"], "fabric three-site has no site 'mars'"),
        (["shanghai", "shanghai"], "named twice"),
        (["shanghai"], "at least two sites"),
    ],
)
def test_bad_site_choices_are_refused(names: list[str], message: str) -> None:
    fabric = load_fabric(FABRICS / "three-site.yaml")
    with pytest.raises(ValidationError, match=message):
        ring_from_fabric(fabric, names)


def test_a_site_with_no_circuit_to_another_chosen_site_is_refused() -> None:
    fabric = _fabric(("a", "b", 1, 1), ("b", "c", 1, 1))
    with pytest.raises(ValidationError, match="site a has no circuit to any other chosen site"):
        ring_from_fabric(fabric, ["a", "c"])


def test_sites_no_ring_joins_are_refused() -> None:
    fabric = _fabric(("a", "b", 1, 1), ("b", "c", 1, 1))  # a line, not a ring
    with pytest.raises(ValidationError, match="no ring of direct circuits joins"):
        ring_from_fabric(fabric, ["a", "b", "c"])


def test_notes_say_where_the_fabric_holds_fewer_gpus_than_planned() -> None:
    fabric = load_fabric(FABRICS / "three-site.yaml")
    _order, hops = ring_from_fabric(fabric, ["singapore", "tokyo"])
    inputs = PlanInputs(
        model_params=1e9, sites=(SitePlan("singapore", 384), SitePlan("tokyo", 512)), hops=hops
    )
    assert fabric_notes(fabric, inputs) == [
        "site tokyo holds 192 H100 GPUs in fabric three-site; the plan assumes 512"
    ]
