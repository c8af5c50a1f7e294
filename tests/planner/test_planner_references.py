"""The planner against the worked numbers it must reproduce.

``fabric.md`` §4.6 "Illustrative planner outputs": 70B dense, 1,024 H100, 2 sites × 512 GPUs,
bf16 gradients G = 140 GB, 4 Mi tokens per step, MFU 0.40 (t_comp ≈ 4.35 s), DCI 16×400G
= 800 GB/s, 8 connections × 4 MiB per rank; at 50 km and at 68 ms RTT, with 1 or 175
buckets.  Tolerance: the notes' ±10 % sensitivity band (§4.4 step 6), or half the last
printed digit where the printed figure is coarser than that.

``training.md`` §2.2: the same job with H = 100, per site and per node (64 nodes a site).
"""

from __future__ import annotations

import pytest

from onecluster.planner import (
    DDP_HIERARCHICAL,
    DILOCO,
    PlanInputs,
    SitePlan,
    WanHop,
    ddp_hierarchical,
    diloco,
    plan,
)

BAND = 0.10


def reference(rtt_ms: float, *, buckets: int = 1, **changes: object) -> PlanInputs:
    return PlanInputs(
        model_params=70e9,
        sites=(SitePlan("east", 512), SitePlan("west", 512)),
        hops=(
            WanHop(
                a="east",
                b="west",
                rtt_ms=rtt_ms,
                capacity_gbps=16 * 400,
                distance_km=50 if rtt_ms < 1 else 0,
            ),
        ),
        buckets=buckets,
        **changes,  # type: ignore[arg-type]
    )


METRO = 0.49  # 50 km × 9.8 µs/km


def test_step_compute_is_4_35_s() -> None:
    assert reference(METRO).step_compute_s == pytest.approx(4.35, abs=0.005)


@pytest.mark.parametrize(
    ("rtt_ms", "buckets", "binding", "bandwidth_s", "latency_s", "exposed"),
    [
        (METRO, 1, "circuit", 0.175, 0.001, 0.04),
        (METRO, 175, "circuit", 0.175, 0.093, 0.06),
        (68.0, 1, "window", 0.55, 0.068, 0.14),
        (68.0, 175, "latency", 0.55, 11.9, 2.86),
    ],
)
def test_fabric_md_illustrative_planner_outputs(
    rtt_ms: float,
    buckets: int,
    binding: str,
    bandwidth_s: float,
    latency_s: float,
    exposed: float,
) -> None:
    m = ddp_hierarchical(reference(rtt_ms, buckets=buckets))
    assert m.binding == binding
    assert m.bandwidth_s == pytest.approx(bandwidth_s, rel=BAND)
    assert m.latency_s == pytest.approx(latency_s, rel=BAND, abs=0.0005)
    assert m.penalty == pytest.approx(exposed, rel=BAND, abs=0.005)


def test_per_rank_rates_and_oversubscription() -> None:
    metro, far = ddp_hierarchical(reference(METRO)), ddp_hierarchical(reference(68.0))
    # 1.56 GB/s per rank at 50 km (the DCI's share), 0.49 GB/s per rank at 68 ms (window)
    assert metro.rate.per_node_gbps / 8 / 8 == pytest.approx(1.56, rel=BAND)
    assert far.rate.per_node_gbps / 8 / 8 == pytest.approx(0.49, rel=BAND)
    # 12.5 GB/s per node against 8×400G inside the site: "~30×"
    critic = plan(reference(METRO, target_penalty=0.05)).critic
    assert critic.available_gbps_per_node == pytest.approx(100.0)
    assert critic.oversubscription == pytest.approx(30, rel=BAND)


@pytest.mark.parametrize(
    ("bits", "payload_gb", "average", "blocking_site", "blocking_node"),
    [
        (32, 280, 5.2, 103, 1.6),
        (16, 140, 2.6, 52, 0.8),
        (8, 70, 1.3, 26, 0.4),
        (4, 35, 0.64, 13, 0.2),
    ],
)
def test_training_md_bandwidth_per_site_and_node(
    bits: int, payload_gb: float, average: float, blocking_site: float, blocking_node: float
) -> None:
    m = diloco(reference(68.0, bits=bits, h=100))
    assert m.wan_bytes_per_site / 1e9 == pytest.approx(payload_gb)
    assert m.average_gbps_per_site == pytest.approx(average, rel=0.05)
    assert m.needed_gbps_per_site == pytest.approx(blocking_site, rel=0.05)
    assert m.needed_gbps_per_node == pytest.approx(blocking_node, rel=0.05)


def test_training_md_dp_every_step_needs_257_gbits_per_site() -> None:
    m = ddp_hierarchical(reference(68.0))
    assert m.wan_bytes_per_site == 140e9
    assert m.average_gbps_per_site == pytest.approx(257, rel=0.01)
    assert m.average_gbps_per_node == pytest.approx(4, rel=BAND)


def test_training_md_rejoin_of_420_gb() -> None:
    # bf16 parameters + fp32 outer momentum ≈ 420 GB: ~34 s at 100 Gbit/s (+ 10 s overhead)
    hop = WanHop(a="east", b="west", rtt_ms=68.0, capacity_gbps=100)
    sites = (SitePlan("east", 512), SitePlan("west", 512))
    r = plan(PlanInputs(model_params=70e9, sites=sites, hops=(hop,))).critic.recovery
    assert r.rejoin_gbps == 100
    assert r.state_bytes == 420e9
    assert r.rejoin_s - 10 == pytest.approx(34, rel=0.02)


def test_verdicts_follow_the_notes() -> None:
    # metro, one call: hierarchical DDP at +4 %; 68 ms: only DiLoCo stays under 5 %
    assert plan(reference(METRO)).verdict.mode == DDP_HIERARCHICAL
    assert plan(reference(68.0)).verdict.mode == DILOCO
