"""The modes on a tiny case whose every figure is derived by hand below.

Two sites of 2 nodes × 8 GPUs; 1e9 parameters; 100 TFLOP/s at MFU 0.5 and 1e6 tokens per
step, so t = 6·1e9·1e6 / (32·100e12·0.5) = 3.75 s.  One hop: 10 ms RTT, 8 Gbit/s = 1 GB/s,
so α = 5 ms + 14 µs; each node's share is 4 Gbit/s.  Gradient G = 2 GB (bf16), DiLoCo
int8 pseudo-gradient Δ = 1 GB, H = 10.
"""

from __future__ import annotations

import pytest

from onecluster.planner import (
    DDP_FLAT,
    DDP_HIERARCHICAL,
    DILOCO,
    DILOCO_STREAMING,
    MODES,
    NCCL_BASE_S,
    PlanInputs,
    SitePlan,
    WanHop,
    all_modes,
    ddp_flat,
    ddp_hierarchical,
    diloco,
)

T = 3.75
ALPHA = 0.005 + 14e-6


def tiny(**changes: object) -> PlanInputs:
    fields: dict[str, object] = {
        "model_params": 1e9,
        "sites": (SitePlan("a", 16), SitePlan("b", 16)),
        "hops": (WanHop(a="a", b="b", rtt_ms=10, capacity_gbps=8),),
        "gpu_tflops": 100.0,
        "mfu": 0.5,
        "tokens_per_step": 1e6,
        "h": 10,
        "bits": 8,
    }
    fields.update(changes)
    return PlanInputs(**fields)  # type: ignore[arg-type]


def test_hierarchical_ddp_by_hand() -> None:
    m = ddp_hierarchical(tiny())
    assert m.compute_s == pytest.approx(T)
    assert m.wan_bytes_per_site == 2e9  # k = 2(S−1)/S = 1 for two sites
    assert m.bandwidth_s == pytest.approx(2.0)  # 2 GB at 1 GB/s, all 2 nodes sending
    assert m.latency_s == pytest.approx(NCCL_BASE_S + 2 * ALPHA)
    assert m.penalty == pytest.approx((2.0 + NCCL_BASE_S + 2 * ALPHA) / T)
    assert m.step_s == pytest.approx(T + 2.0 + NCCL_BASE_S + 2 * ALPHA)
    assert m.utilisation == pytest.approx(T / m.step_s)
    assert (m.binding, m.sending_nodes, m.blocking, m.interval_steps) == ("circuit", 2, True, 1)
    assert m.average_gbps_per_site == pytest.approx(16 / T)
    assert m.average_gbps_per_node == pytest.approx(8 / T)
    budget = 0.05 * T - m.latency_s
    assert m.needed_gbps_per_site == pytest.approx(16 / budget)
    # in site: RS + AG over 2 nodes at 8 × 400 Gbit/s = 400 GB/s: 2 · ½ · 2 GB / 400 GB/s + 2α
    assert m.in_site_s == pytest.approx(2 * (0.5 * 2e9 / 400e9 + 14e-6))
    assert not m.meets_target


def test_flat_ring_by_hand() -> None:
    m = ddp_flat(tiny())
    # n = 4 nodes: the boundary node (4 Gbit/s = 0.5 GB/s) carries 2·3/4·2 GB = 3 GB
    assert m.wan_bytes_per_site == pytest.approx(3e9)
    assert m.bandwidth_s == pytest.approx(6.0)
    assert m.latency_s == pytest.approx(NCCL_BASE_S + 2 * 3 * ALPHA)
    assert (m.binding, m.sending_nodes) == ("nic", 1)
    assert m.average_gbps_per_node == m.average_gbps_per_site == pytest.approx(24 / T)


def test_buckets_multiply_the_latency_term_only() -> None:
    one, many = ddp_hierarchical(tiny()), ddp_hierarchical(tiny(buckets=175))
    assert many.bandwidth_s == one.bandwidth_s
    assert many.latency_s == pytest.approx(175 * one.latency_s)


def test_overlap_hides_ddp_sync_behind_compute() -> None:
    m = ddp_hierarchical(tiny(overlap=0.4))
    assert m.hidden_s == pytest.approx(0.4 * T)
    assert m.stall_s == pytest.approx(m.sync_s - 0.4 * T)
    assert ddp_hierarchical(tiny(overlap=0.6)).penalty == 0.0  # 2.01 s hides in 2.25 s


def test_blocking_diloco_by_hand() -> None:
    m = diloco(tiny())
    assert m.wan_bytes_per_site == 1e9
    assert m.sync_s == pytest.approx(1.0 + NCCL_BASE_S + 2 * ALPHA)
    assert m.penalty == pytest.approx(m.sync_s / (10 * T))
    assert m.step_s == pytest.approx(T + m.sync_s / 10)
    assert m.average_gbps_per_site == pytest.approx(8 / (10 * T))
    assert m.needed_gbps_per_site == pytest.approx(8 / (0.05 * 10 * T - m.latency_s))
    assert (m.interval_steps, m.blocking, m.meets_target) == (10, True, True)


def test_streaming_diloco_stalls_only_past_the_next_interval() -> None:
    m = diloco(tiny(), streaming=True)
    assert (m.hidden_s, m.stall_s, m.penalty, m.blocking) == (10 * T, 0.0, 0.0, False)
    slow = diloco(tiny(hops=(WanHop(a="a", b="b", rtt_ms=10, capacity_gbps=0.1),)), streaming=True)
    # 1 GB at 12.5 MB/s = 80 s against 37.5 s of compute
    assert slow.stall_s == pytest.approx(80 + slow.latency_s - 10 * T)


def test_bits_set_the_pseudo_gradient() -> None:
    assert diloco(tiny(bits=4)).wan_bytes_per_site == 5e8
    assert diloco(tiny(bits=32)).wan_bytes_per_site == 4e9


def test_three_sites_send_two_thirds_more_per_site() -> None:
    sites = (SitePlan("a", 16), SitePlan("b", 16), SitePlan("c", 16))
    hops = (
        WanHop(a="a", b="b", rtt_ms=10, capacity_gbps=8),
        WanHop(a="b", b="c", rtt_ms=20, capacity_gbps=8),
        WanHop(a="c", b="a", rtt_ms=10, capacity_gbps=4),
    )
    m = ddp_hierarchical(tiny(sites=sites, hops=hops, tokens_per_step=1.5e6))
    assert m.wan_bytes_per_site == pytest.approx(4 / 3 * 2e9)
    assert m.bandwidth_s == pytest.approx(4 / 3 * 2e9 / 0.5e9)  # the 4 Gbit/s hop is slowest
    assert m.latency_s == pytest.approx(NCCL_BASE_S + 4 * (0.010 + 14e-6))  # longest hop
    assert m.compute_s == pytest.approx(T)


def test_the_slowest_site_sets_the_sync() -> None:
    sites = (SitePlan("a", 32), SitePlan("b", 8))
    m = diloco(tiny(sites=sites, nic_gbps=1.0))
    assert m.sending_nodes == 1  # b: one node at 1 Gbit/s
    assert m.bandwidth_s == pytest.approx(1e9 / (1e9 / 8))


def test_all_modes_in_preference_order() -> None:
    assert tuple(m.mode for m in all_modes(tiny())) == MODES
    assert MODES == (DDP_HIERARCHICAL, DDP_FLAT, DILOCO, DILOCO_STREAMING)
