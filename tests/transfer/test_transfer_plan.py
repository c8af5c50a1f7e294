"""Paths, streams and batches of a push."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from onecluster.fabric import load_fabric
from onecluster.transfer import ChunkRef, Etiquette, Hop, batches, plan_paths, streams_for

FABRIC = load_fabric(Path(__file__).parents[2] / "examples" / "fabrics" / "three-site.yaml")
ENDS = {
    ("shanghai", "sha-sin-hk"): "10.212.0.1",
    ("singapore", "sha-sin-hk"): "10.212.0.2",
    ("shanghai", "sha-sin-tw"): "10.212.1.1",
    ("singapore", "sha-sin-tw"): "10.212.1.2",
    ("shanghai", "sha-tyo"): "10.212.2.1",
    ("tokyo", "sha-tyo"): "10.212.2.2",
    ("singapore", "sin-tyo"): "10.212.3.1",
    ("tokyo", "sin-tyo"): "10.212.3.2",
}
DATA = {s: Hop(f"10.211.0.{i + 1}", 7470) for i, s in enumerate(FABRIC.site_names)}


def test_a_push_uses_both_direct_circuits_and_the_relay_at_once() -> None:
    paths = plan_paths(FABRIC, "singapore", "shanghai", down=frozenset(), ends=ENDS, data=DATA)
    by_name = {p.name: p for p in paths}
    assert set(by_name) == {"sha-sin-hk", "sha-sin-tw", "sha-tyo+sin-tyo"}
    assert by_name["sha-sin-hk"].hops == (Hop("10.212.0.2", 7470),)
    relay = by_name["sha-tyo+sin-tyo"]
    assert relay.relay == "tokyo"
    assert relay.hops == (Hop("10.212.2.2", 7470), Hop("10.212.3.1", 7470))
    assert relay.rate_bps == 0.5e9  # half of the smaller leg, 1 Gbit/s: Tokyo's traffic first
    assert by_name["sha-sin-hk"].rate_bps == 1e9


def test_when_the_direct_circuits_are_down_the_relay_carries_the_push() -> None:
    down = frozenset({"sha-sin-hk", "sha-sin-tw"})
    paths = plan_paths(FABRIC, "singapore", "shanghai", down=down, ends=ENDS, data=DATA)
    assert [p.relay for p in paths] == ["tokyo"]


def test_without_circuit_addresses_the_kernel_routes_to_the_data_endpoint() -> None:
    paths = plan_paths(FABRIC, "singapore", "shanghai", down=frozenset(), ends={}, data=DATA)
    assert [(p.name, p.hops) for p in paths] == [("default", (DATA["singapore"],))]
    assert plan_paths(FABRIC, "singapore", "tokyo", down=frozenset(), ends={}, data={}) == []


def test_uncapped_etiquette_gives_the_fabrics_max_flow() -> None:
    free = Etiquette(bulk_share=None, relay_share=None)
    paths = plan_paths(
        FABRIC, "singapore", "shanghai", down=frozenset(), ends=ENDS, data=DATA, etiquette=free
    )
    assert all(p.rate_bps is None for p in paths) and len(paths) == 3


def test_streams_cover_twice_the_bdp_within_bounds() -> None:
    assert streams_for(1e9, 0.068, 64 * 2**20) == 2  # 8.5 MB BDP, 64 MiB windows
    assert streams_for(1e9, 0.068, 4 * 2**20) == 5  # the default 4 MiB window
    assert streams_for(10e9, 0.2, 4 * 2**20) == 8
    assert streams_for(None, 0.07, 4 * 2**20) == 4


@given(st.lists(st.integers(1, 5 * 2**20), max_size=200))
def test_batches_keep_every_chunk_in_order_within_their_bounds(sizes: list[int]) -> None:
    chunks = [ChunkRef(i.to_bytes(32, "big"), s) for i, s in enumerate(sizes)]
    out = list(batches(chunks, max_bytes=8 * 2**20, max_count=16))
    assert [c for b in out for c in b] == chunks
    for batch in out:
        assert len(batch) <= 16
        assert len(batch) == 1 or sum(c.size for c in batch) <= 8 * 2**20
