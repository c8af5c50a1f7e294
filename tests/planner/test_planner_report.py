"""The critic's three numbers: distance, bandwidth per node, recovery."""

from __future__ import annotations

import pytest

from onecluster.planner import (
    DILOCO,
    PlanInputs,
    SitePlan,
    WanHop,
    critic_numbers,
    ddp_hierarchical,
    diloco,
    recovery,
)


def _inputs(*hops: WanHop, **changes: object) -> PlanInputs:
    sites = tuple(SitePlan(n, 16) for n in ("a", "b", "c")[: max(2, len(hops))])
    return PlanInputs(
        model_params=1e9,
        sites=sites,
        hops=hops,
        gpu_tflops=100.0,
        mfu=0.5,
        tokens_per_step=1e6,
        h=10,
        **changes,  # type: ignore[arg-type]
    )


HOP = WanHop(a="a", b="b", rtt_ms=10, capacity_gbps=8)


def test_distance_is_the_longest_hop_from_the_fabric_or_the_rtt() -> None:
    hops = (
        WanHop(a="a", b="b", rtt_ms=10, capacity_gbps=8, distance_km=900),
        WanHop(a="b", b="c", rtt_ms=12, capacity_gbps=8),
        WanHop(a="c", b="a", rtt_ms=2, capacity_gbps=8, distance_km=150),
    )
    inputs = _inputs(*hops)
    c = critic_numbers(inputs, diloco(inputs))
    assert (c.link_distance_km, c.distance_source, c.rtt_ms) == (12 * 102, "rtt", 12)


def test_bandwidth_per_node_average_burst_and_oversubscription() -> None:
    inputs = _inputs(HOP)
    blocking = critic_numbers(inputs, diloco(inputs))
    assert blocking.average_gbps_per_node == pytest.approx(8 / 37.5 / 2)
    assert blocking.burst_gbps_per_node == diloco(inputs).needed_gbps_per_node
    assert blocking.available_gbps_per_node == 4.0
    assert blocking.in_site_gbps_per_node == 3200.0
    assert blocking.oversubscription == 800.0
    streaming = critic_numbers(inputs, diloco(inputs, streaming=True))
    assert streaming.burst_gbps_per_node is None  # nothing to burst: the sync overlaps


def test_recovery_by_hand() -> None:
    inputs = _inputs(HOP, detection_timeout_s=2.0, rejoin_overhead_s=10.0)
    m = diloco(inputs)
    r = recovery(inputs, m)
    assert r.detection_s == 2.0
    assert r.survivors_s == pytest.approx(2.0 + 10 * m.step_s)
    # 6 GB (bf16 + fp32 momentum) over the 8 Gbit/s hop, plus 10 s
    assert (r.state_bytes, r.rejoin_gbps) == (6e9, 8.0)
    assert r.rejoin_s == pytest.approx(6 + 10)
    assert r.steps_lost_at_most == 10
    assert recovery(inputs, ddp_hierarchical(inputs)).steps_lost_at_most == 1


def test_to_json_names_every_number() -> None:
    inputs = _inputs(HOP)
    body = critic_numbers(inputs, diloco(inputs)).to_json()
    assert body["mode"] == DILOCO
    assert set(body["bandwidth_per_node"]) == {
        "average_gbps",
        "burst_gbps",
        "available_gbps",
        "in_site_gbps",
        "oversubscription",
    }
    assert set(body["recovery"]) >= {"detection_s", "survivors_s", "rejoin_s"}
