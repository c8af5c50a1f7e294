"""Fast reroute's choice of next hop: the server's table unless its next circuit is silent
here; then a loop-free detour from the fabric, else the table's backup, else unreachable."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from onecluster.fabric import load_fabric, parse_fabric
from onecluster.topology import LocalHop, TableRoute, local_hops, route_table

ROOT = Path(__file__).resolve().parents[2]
THREE = load_fabric(ROOT / "examples/fabrics/three-site.yaml")
METRO = load_fabric(ROOT / "examples/fabrics/four-site-metro.yaml")

# a's shortest way round a-d is through c, but c forwards to d through a: a loop until c
# learns of the silence.  b forwards to d directly: the loop-free alternate.
LOOP = parse_fabric(
    """
fabric: loop
sites:
  - {name: a, region: r, jurisdiction: X, pools: [{gpu_type: H100, count: 1, cost_per_gpu_hour: 1}]}
  - {name: b, region: r, jurisdiction: X, pools: [{gpu_type: H100, count: 1, cost_per_gpu_hour: 1}]}
  - {name: c, region: r, jurisdiction: X, pools: [{gpu_type: H100, count: 1, cost_per_gpu_hour: 1}]}
  - {name: d, region: r, jurisdiction: X, pools: [{gpu_type: H100, count: 1, cost_per_gpu_hour: 1}]}
circuits:
  - {name: a-d, between: [a, d], capacity_gbps: 1, rtt_ms: 10, risk_group: g1}
  - {name: a-c, between: [a, c], capacity_gbps: 1, rtt_ms: 1, risk_group: g2}
  - {name: c-d, between: [c, d], capacity_gbps: 1, rtt_ms: 50, risk_group: g3}
  - {name: a-b, between: [a, b], capacity_gbps: 1, rtt_ms: 30, risk_group: g4}
  - {name: b-d, between: [b, d], capacity_gbps: 1, rtt_ms: 30, risk_group: g5}
"""
)


def table_of(fabric_site: str, down: frozenset[str] = frozenset()) -> list[TableRoute]:
    """What the server would send ``fabric_site`` of the three-site fabric."""
    table = route_table(THREE, down=down)
    entries = []
    for r in table.of_site(fabric_site):
        p, b = r.primary, r.backup
        entries.append(
            TableRoute(
                dst=r.dst,
                next_circuit=p.circuits[0] if p else None,
                next_site=p.sites[1] if p else None,
                backup_circuit=b.circuits[0] if b else None,
                backup_site=b.sites[1] if b else None,
            )
        )
    return entries


def by_dst(hops: list[LocalHop]) -> dict[str, tuple[str | None, str]]:
    return {h.dst: (h.circuit, h.source) for h in hops}


def test_nothing_silent_follows_the_table() -> None:
    hops = local_hops("shanghai", table_of("shanghai"), silent=(), fabric=THREE)
    assert by_dst(hops) == {"singapore": ("sha-sin-hk", "table"), "tokyo": ("sha-tyo", "table")}


def test_a_silent_primary_moves_to_the_next_best_circuit_and_nothing_else_moves() -> None:
    hops = local_hops("shanghai", table_of("shanghai"), silent={"sha-sin-hk"}, fabric=THREE)
    assert by_dst(hops) == {"singapore": ("sha-sin-tw", "detour"), "tokyo": ("sha-tyo", "table")}


def test_both_shanghai_singapore_circuits_silent_go_through_tokyo_both_ways() -> None:
    cut = {"sha-sin-hk", "sha-sin-tw"}
    there = by_dst(local_hops("shanghai", table_of("shanghai"), silent=cut, fabric=THREE))
    back = by_dst(local_hops("singapore", table_of("singapore"), silent=cut, fabric=THREE))
    assert there["singapore"] == ("sha-tyo", "detour")
    assert back["shanghai"] == ("sin-tyo", "detour")
    # Tokyo, in between, sees nothing silent and forwards on its table: straight on
    onward = by_dst(local_hops("tokyo", table_of("tokyo"), silent=(), fabric=THREE))
    assert onward == {"shanghai": ("sha-tyo", "table"), "singapore": ("sin-tyo", "table")}


def test_the_detour_is_what_the_server_computes_once_it_hears() -> None:
    cut = frozenset({"sha-sin-hk", "sha-sin-tw"})
    local = by_dst(local_hops("shanghai", table_of("shanghai"), silent=cut, fabric=THREE))
    confirmed = by_dst(local_hops("shanghai", table_of("shanghai", cut), silent=cut, fabric=THREE))
    assert local["singapore"][0] == confirmed["singapore"][0] == "sha-tyo"
    assert confirmed["singapore"][1] == "table"  # the new table: no override left


def test_a_stale_table_never_puts_traffic_back_on_a_silent_circuit() -> None:
    # the server (stopped, or not yet told) still routes over sha-sin-hk
    stale = table_of("shanghai")
    for fabric in (THREE, None):
        hops = by_dst(local_hops("shanghai", stale, silent={"sha-sin-hk"}, fabric=fabric))
        assert hops["singapore"][0] != "sha-sin-hk"


def test_the_server_corrects_a_detour_where_it_knows_more() -> None:
    # the server knows sin-tyo is down (a circuit this site does not probe): its table goes
    # over sha-sin-tw, which is not silent here, so the site follows it
    table = table_of("shanghai", frozenset({"sha-sin-hk", "sin-tyo"}))
    hops = by_dst(local_hops("shanghai", table, silent={"sha-sin-hk"}, fabric=THREE))
    assert hops["singapore"] == ("sha-sin-tw", "table")
    # and a detour never uses a circuit the table routes around
    table = table_of("shanghai", frozenset({"sin-tyo"}))
    cut = {"sha-sin-hk", "sha-sin-tw"}
    hops = by_dst(local_hops("shanghai", table, silent=cut, table_down={"sin-tyo"}, fabric=THREE))
    assert hops["singapore"] == (None, "none")


def test_without_the_fabric_the_tables_backup_is_taken() -> None:
    hops = by_dst(local_hops("shanghai", table_of("shanghai"), silent={"sha-sin-hk"}))
    assert hops["singapore"] == ("sha-sin-tw", "backup")
    # the backup silent too, and nothing known beyond it: unreachable, fail fast
    cut = {"sha-sin-hk", "sha-sin-tw"}
    hops = by_dst(local_hops("shanghai", table_of("shanghai"), silent=cut))
    assert hops["singapore"] == (None, "none")


def test_a_detour_whose_next_site_would_send_the_traffic_back_is_not_taken() -> None:
    table = [TableRoute(dst="d", next_circuit="a-d", next_site="d")]
    hops = local_hops("a", table, silent={"a-d"}, fabric=LOOP)
    # via c is shorter (51 ms) but c's own route to d runs through a; b's does not
    assert by_dst(hops) == {"d": ("a-b", "detour")}


def test_a_detour_starts_only_on_a_circuit_whose_far_end_is_known() -> None:
    cut = {"sha-sin-hk"}
    known = {"sha-sin-hk", "sha-tyo"}  # sha-sin-tw's far end has not announced itself
    hops = by_dst(
        local_hops("shanghai", table_of("shanghai"), silent=cut, fabric=THREE, reachable=known)
    )
    assert hops["singapore"] == ("sha-tyo", "detour")  # not sha-sin-tw, the shorter one
    hops = by_dst(local_hops("shanghai", table_of("shanghai"), silent=cut, reachable=known))
    assert hops["singapore"] == (None, "none")  # nor its backup


def test_a_table_that_says_unreachable_stays_unreachable() -> None:
    table = [TableRoute(dst="tokyo", next_circuit=None, next_site=None)]
    assert by_dst(local_hops("shanghai", table, silent={"sha-tyo"}, fabric=THREE)) == {
        "tokyo": (None, "table")
    }


@given(
    st.sampled_from(sorted(METRO.site_names)),
    st.sets(st.sampled_from(sorted(c.name for c in METRO.circuits))),
)
def test_a_local_hop_never_uses_a_silent_circuit_and_its_neighbour_never_sends_back(
    site: str, silent: set[str]
) -> None:
    """For every site and every set of silent circuits of the metro fabric: the chosen hop
    avoids the silence, and the neighbour's own table route does not come back through the
    site (so no loop while the neighbour does not know)."""
    mine = {c.name for c in METRO.circuits if site in (c.a, c.b)}
    quiet = silent & mine  # a site's probes judge its own circuits only
    full = route_table(METRO)
    table = []
    for r in full.of_site(site):
        p = r.primary
        assert p is not None
        table.append(TableRoute(dst=r.dst, next_circuit=p.circuits[0], next_site=p.sites[1]))
    for hop in local_hops(site, table, silent=quiet, fabric=METRO):
        assert hop.circuit not in quiet
        if hop.circuit is not None and hop.site != hop.dst:
            assert hop.site is not None
            onward = full.route(hop.site, hop.dst).primary
            assert onward is not None and site not in onward.sites
