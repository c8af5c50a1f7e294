"""The data orders each site gets, where a push is sent from, how a transfer reads on the
wire and how busy the data plane keeps each circuit (pure, on the three-site fabric)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from onecluster.fabric import load_fabric
from onecluster.model import Fabric
from onecluster.server._circuit_rates import CircuitRates
from onecluster.server._data_orders import Planner, data_orders, rank_sources
from onecluster.server._data_views import transfer_out
from onecluster.store import DataWork, PathSample, ScanRecord, TransferRecord
from onecluster.transfer import Etiquette, Hop

FABRIC = Path(__file__).resolve().parents[2] / "examples" / "fabrics" / "three-site.yaml"
ROOT = "c" * 64
GB = 10**9

#: Every site's address on each of its circuits, as its agent announced them.
ENDS = {
    ("shanghai", "sha-sin-hk"): "10.1.1.1",
    ("singapore", "sha-sin-hk"): "10.1.1.2",
    ("shanghai", "sha-sin-tw"): "10.1.2.1",
    ("singapore", "sha-sin-tw"): "10.1.2.2",
    ("shanghai", "sha-tyo"): "10.1.3.1",
    ("tokyo", "sha-tyo"): "10.1.3.2",
    ("singapore", "sin-tyo"): "10.1.4.1",
    ("tokyo", "sin-tyo"): "10.1.4.2",
}
DATA = {
    "shanghai": Hop("10.0.0.1", 7400),
    "singapore": Hop("10.0.0.2", 7400),
    "tokyo": Hop("10.0.0.3", 7401),
}


@pytest.fixture(scope="module")
def fabric() -> Fabric:
    return load_fabric(FABRIC)


def transfer(src: str = "singapore", dst: str = "shanghai", **changes: object) -> TransferRecord:
    t = TransferRecord(
        id="t-1",
        dataset="corpus",
        root=ROOT,
        src=src,
        dst=dst,
        reason="push",
        job_id=None,
        state="running",
        bytes_total=GB,
        bytes_done=GB // 4,
        bytes_sent=GB // 5,
        bytes_local=0,
        chunks_total=800,
        chunks_done=200,
        chunks_sent=160,
        paths=(),
        rate_bps=1e9,
        error=None,
        ticket="secret-ticket",
        created_at=100.0,
        started_at=110.0,
        finished_at=None,
    )
    return replace(t, **changes)  # type: ignore[arg-type]


def planner(fabric: Fabric, down: frozenset[str] = frozenset(), **kw: object) -> Planner:
    return Planner(
        fabric,
        down=down,
        ends=ENDS,
        data=DATA,
        etiquette=Etiquette(**kw),  # type: ignore[arg-type]
    )


def test_the_destination_receives_over_both_circuits_and_the_relay(fabric: Fabric) -> None:
    work = DataWork(transfers=(transfer(),))
    orders = data_orders("shanghai", work, planner(fabric))
    [order] = orders.receive
    assert (order.id, order.src, order.ticket, order.priority) == (
        "t-1",
        "singapore",
        "secret-ticket",
        "bulk",
    )
    paths = {p.name: p for p in order.paths}
    assert set(paths) == {"sha-sin-hk", "sha-sin-tw", "sha-tyo+sin-tyo"}
    assert [(h.address, h.port) for h in paths["sha-sin-hk"].hops] == [("10.1.1.2", 7400)]
    relayed = paths["sha-tyo+sin-tyo"]
    assert relayed.relay == "tokyo"
    assert [(h.address, h.port) for h in relayed.hops] == [("10.1.3.2", 7401), ("10.1.4.1", 7400)]
    assert paths["sha-sin-hk"].rate_bps == 1e9  # bulk_share 1.0 of 1 Gbit/s
    assert relayed.rate_bps == 0.5e9  # relay_share 0.5 of the smaller of 2 and 1 Gbit/s
    assert orders.serve == [] and orders.scans == []


def test_the_source_serves_every_path_and_the_relay_only_its_own(fabric: Fabric) -> None:
    work = DataWork(transfers=(transfer(),))
    [served] = data_orders("singapore", work, planner(fabric)).serve
    assert (served.relay, served.ticket) == (False, "secret-ticket")
    assert served.rates == {"sha-sin-hk": 1e9, "sha-sin-tw": 1e9, "sha-tyo+sin-tyo": 0.5e9}
    [relayed] = data_orders("tokyo", work, planner(fabric)).serve
    assert (relayed.relay, relayed.rates) == (True, {"sha-tyo+sin-tyo": 0.5e9})


def test_circuits_that_are_down_are_left_out_and_the_etiquette_is_the_servers(
    fabric: Fabric,
) -> None:
    work = DataWork(transfers=(transfer(),))
    plan = planner(fabric, frozenset({"sha-sin-hk", "sha-tyo"}), bulk_share=0.8)
    [order] = data_orders("shanghai", work, plan).receive
    assert [(p.name, p.rate_bps) for p in order.paths] == [("sha-sin-tw", 0.8e9)]
    assert data_orders("tokyo", work, plan).serve == []  # no relay through tokyo now


def test_a_source_without_a_data_endpoint_gives_no_paths_yet(fabric: Fabric) -> None:
    work = DataWork(transfers=(transfer(),))
    plan = Planner(fabric, down=frozenset(), ends=ENDS, data={}, etiquette=Etiquette())
    [order] = data_orders("shanghai", work, plan).receive
    assert order.paths == []


def test_prefetches_are_marked_and_scans_go_to_their_site(fabric: Fabric) -> None:
    scan = ScanRecord(
        id="s-1",
        dataset="corpus",
        site="tokyo",
        path="/data/corpus",
        state="queued",
        files_done=0,
        bytes_done=0,
        files_total=None,
        bytes_total=None,
        root=None,
        new_version=None,
        error=None,
        created_at=1.0,
        finished_at=None,
    )
    work = DataWork(scans=(scan,), transfers=(transfer(reason="prefetch", job_id="j-1"),))
    orders = data_orders("shanghai", work, planner(fabric))
    assert orders.receive[0].priority == "prefetch"
    assert data_orders("tokyo", work, planner(fabric)).scans[0].path == "/data/corpus"


def test_sources_rank_by_direct_capacity_up_then_sites_down_last(fabric: Fabric) -> None:
    sites = ["singapore", "tokyo"]
    # To shanghai: singapore has 2 x 1 Gbit/s, tokyo one 1 Gbit/s circuit.
    assert rank_sources(fabric, "shanghai", sites, down_circuits=(), down_sites=()) == sites
    # One of singapore's down: 1 Gbit/s each, a tie, by name.
    ranked = rank_sources(fabric, "shanghai", sites, down_circuits={"sha-sin-hk"}, down_sites=())
    assert ranked == ["singapore", "tokyo"]
    both = {"sha-sin-hk", "sha-sin-tw"}
    ranked = rank_sources(fabric, "shanghai", sites, down_circuits=both, down_sites=())
    assert ranked == ["tokyo", "singapore"]
    ranked = rank_sources(fabric, "shanghai", sites, down_circuits=(), down_sites={"singapore"})
    assert ranked == ["tokyo", "singapore"]


def test_a_transfer_on_the_wire_has_its_eta_seconds_and_reported_paths(fabric: Fabric) -> None:
    sample = PathSample(name="sha-sin-tw", bytes=GB // 5, streams=4, state="running")
    t = transfer(paths=(sample, PathSample(name="sha-sin-hk+x", bytes=5)))
    out = transfer_out(fabric, t, planner(fabric).paths(t), now=130.0)
    assert out.seconds == 20.0
    assert out.eta_s == pytest.approx(0.75 * GB * 8 / 1e9)
    by_name = {p.name: p for p in out.paths}
    assert (by_name["sha-sin-tw"].bytes, by_name["sha-sin-tw"].streams) == (GB // 5, 4)
    assert by_name["sha-sin-hk"].state == "planned"
    assert by_name["sha-sin-hk+x"].circuits == ["sha-sin-hk"]  # reported, no longer planned
    done = transfer(state="done", bytes_done=GB, finished_at=118.0, paths=(sample,))
    out = transfer_out(fabric, done, [], now=500.0)
    assert (out.seconds, out.eta_s, out.rate_bps) == (8.0, 0.0, GB * 8 / 8.0)
    assert [(p.name, p.circuits, p.rtt_s) for p in out.paths] == [
        ("sha-sin-tw", ["sha-sin-tw"], 0.071)
    ]
    queued = transfer(state="queued", started_at=None, rate_bps=0.0)
    out = transfer_out(fabric, queued, [], now=500.0)
    assert (out.seconds, out.eta_s) == (0.0, None)


def test_circuit_rates_come_from_two_samples_and_the_busier_end(fabric: Fabric) -> None:
    rates = CircuitRates(fabric, stale_s=5.0)
    rates.observe("shanghai", {"sha-tyo": 0, "sin-tyo": 999}, 10.0)  # sin-tyo is not its own
    assert rates.rates(10.0) == {}
    rates.observe("shanghai", {"sha-tyo": 62_500_000}, 11.0)
    rates.observe("tokyo", {"sha-tyo": 0}, 10.0)
    rates.observe("tokyo", {"sha-tyo": 50_000_000}, 11.0)
    assert rates.rates(11.0) == {"sha-tyo": 62_500_000.0}
    assert rates.load(11.0) == {"sha-tyo": 0.5}  # 62.5 MB/s of a 1 Gbit/s circuit
    assert rates.rates(17.0) == {}  # both ends went silent
    rates.observe("shanghai", {"sha-tyo": 5}, 18.0)  # the agent restarted: no rate yet
    assert rates.rates(18.0) == {}


def test_a_transfer_out_of_a_site_that_controls_exports_never_relays_abroad(
    fabric: Fabric,
) -> None:
    """Shanghai (CN) controls exports: its transfers take their direct circuits only, and
    wait when those are down, rather than be copied through Tokyo (JP) on the way."""
    outbound = transfer(src="shanghai", dst="singapore")
    names = {p.name for p in planner(fabric).paths(outbound)}
    assert names == {"sha-sin-hk", "sha-sin-tw"}
    cut = planner(fabric, down=frozenset({"sha-sin-hk", "sha-sin-tw"}))
    assert cut.paths(outbound) == []
    tokyo = data_orders("tokyo", DataWork(transfers=(outbound,)), planner(fabric))
    assert tokyo.serve == [] and tokyo.receive == []
    # Into Shanghai, the relay through Tokyo stays.
    assert "sha-tyo+sin-tyo" in {p.name for p in cut.paths(transfer())}
