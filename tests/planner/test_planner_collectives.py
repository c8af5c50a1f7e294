"""α-β costs and the WAN rate, checked against hand-derived figures."""

from __future__ import annotations

import pytest

from onecluster.planner import (
    NET_STEP_S,
    PlanInputs,
    SitePlan,
    WanHop,
    all_gather_s,
    reduce_scatter_s,
    ring_allreduce_s,
    wan_alpha_s,
    wan_rate,
)


def test_ring_allreduce_by_hand() -> None:
    # 4 ranks, 1 GB at 1 GB/s, α = 1 ms: 2·3/4·1 s + 2·3·1 ms.
    assert ring_allreduce_s(1e9, 4, 1e9, 1e-3) == pytest.approx(1.5 + 0.006)
    assert ring_allreduce_s(1e9, 1, 1e9, 1e-3) == 0.0


def test_reduce_scatter_and_all_gather_are_each_half_an_allreduce() -> None:
    assert reduce_scatter_s(1e9, 4, 1e9, 1e-3) == pytest.approx(0.75 + 0.003)
    assert all_gather_s(1e9, 4, 1e9, 1e-3) == reduce_scatter_s(1e9, 4, 1e9, 1e-3)
    total = reduce_scatter_s(1e9, 8, 2e9, 1e-4) + all_gather_s(1e9, 8, 2e9, 1e-4)
    assert total == pytest.approx(ring_allreduce_s(1e9, 8, 2e9, 1e-4))
    assert reduce_scatter_s(1e9, 1, 1e9, 1.0) == 0.0


def test_wan_alpha_is_one_way_delay_plus_ncclsnetwork_step() -> None:
    assert wan_alpha_s(WanHop(a="a", b="b", rtt_ms=10, capacity_gbps=1)) == pytest.approx(
        0.005 + NET_STEP_S
    )


def _inputs(**changes: object) -> PlanInputs:
    return PlanInputs(
        model_params=1e9,
        sites=(SitePlan("a", 16), SitePlan("b", 16)),
        hops=(WanHop(a="a", b="b", rtt_ms=10, capacity_gbps=8),),
        **changes,  # type: ignore[arg-type]
    )


def test_default_nic_share_fills_the_circuit_exactly() -> None:
    rate = wan_rate(_inputs(), 0)
    assert (rate.nic_gbps, rate.per_node_gbps, rate.per_site_gbps) == (4.0, 4.0, 8.0)
    assert rate.binding == "circuit"
    assert rate.bytes_per_s == 1e9
    # 64 streams × 4 MiB / 10 ms
    assert rate.window_gbps == pytest.approx(64 * 4 * 2**20 * 8 / 0.01 / 1e9)


def test_one_sending_node_gets_only_its_nic_share() -> None:
    rate = wan_rate(_inputs(), 0, sending_nodes=1)
    assert (rate.per_site_gbps, rate.binding) == (4.0, "nic")


def test_a_small_window_binds() -> None:
    rate = wan_rate(_inputs(streams_per_node=1, window_bytes=2**20), 1)
    per_node = 2**20 * 8 / 0.01 / 1e9
    assert rate.per_node_gbps == pytest.approx(per_node)
    assert rate.per_site_gbps == pytest.approx(2 * per_node)
    assert rate.binding == "window"


def test_a_larger_nic_cannot_beat_the_circuit() -> None:
    rate = wan_rate(_inputs(nic_gbps=100.0), 0)
    assert (rate.per_site_gbps, rate.per_node_gbps, rate.binding) == (8.0, 4.0, "circuit")
