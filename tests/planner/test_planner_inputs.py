"""PlanInputs: defaults, derived figures and every refusal of bad input."""

from __future__ import annotations

from typing import Any

import pytest

from onecluster.errors import ValidationError
from onecluster.planner import PEAK_TFLOPS, PlanInputs, SitePlan, WanHop, peak_tflops

HOP = WanHop(a="a", b="b", rtt_ms=10, capacity_gbps=8)


def _inputs(**changes: Any) -> PlanInputs:
    fields: dict[str, Any] = {
        "model_params": 1e9,
        "sites": (SitePlan("a", 16), SitePlan("b", 16)),
        "hops": (HOP,),
    }
    fields.update(changes)
    return PlanInputs(**fields)


def test_defaults_are_the_documented_ones() -> None:
    i = _inputs()
    assert (i.gpu_type, i.peak, i.mfu, i.tokens_per_step) == ("H100", 989.0, 0.40, 4 * 2**20)
    assert (i.gpus_per_node, i.intra_gbps, i.bytes_per_param) == (8, 400.0, 2.0)
    assert (i.h, i.bits, i.buckets, i.overlap) == (100, 8, 1, 0.0)
    assert (i.window_bytes, i.streams, i.detection_timeout_s) == (4 * 2**20, 64, 5.0)
    assert (i.state_bytes_per_param, i.rejoin_overhead_s, i.target_penalty) == (6.0, 10.0, 0.05)


def test_step_compute_is_six_p_tokens_over_gpus_peak_mfu() -> None:
    i = _inputs(gpu_tflops=100.0, mfu=0.5, tokens_per_step=1e6)
    assert i.step_compute_s == pytest.approx(6 * 1e9 * 1e6 / (32 * 100e12 * 0.5))
    assert _inputs(step_time_s=2.5).step_compute_s == 2.5


def test_bytes_on_the_wire() -> None:
    i = _inputs(bytes_per_param=2.0, bits=4, state_bytes_per_param=6.0)
    assert (i.gradient_bytes, i.pseudo_gradient_bytes, i.state_bytes) == (2e9, 5e8, 6e9)
    assert (i.total_gpus, i.total_nodes, i.nodes(i.sites[0])) == (32, 4, 2)


def test_the_gpu_table_and_its_override() -> None:
    assert set(PEAK_TFLOPS) == {"H100", "H800", "A100", "L40S", "H200"}
    assert peak_tflops("a100") == 312.0
    assert peak_tflops("B200", 2250.0) == 2250.0
    with pytest.raises(ValidationError, match="no peak throughput for GPU type 'B200'"):
        _inputs(gpu_type="B200")
    assert _inputs(gpu_type="B200", gpu_tflops=2250.0).peak == 2250.0


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"model_params": 0}, "--model-params must be a finite number greater than 0"),
        ({"model_params": -7e9}, "--model-params"),
        ({"mfu": 0}, "--mfu"),
        ({"mfu": 1.5}, "--mfu is a fraction of peak"),
        ({"tokens_per_step": 0}, "--tokens-per-step"),
        ({"step_time_s": -1.0}, "--step-time-s"),
        ({"gpu_tflops": 0.0}, "--gpu-tflops"),
        ({"gpus_per_node": 0}, "--gpus-per-node"),
        ({"nic_gbps": 0.0}, "--nic-gbps"),
        ({"intra_gbps": -1.0}, "--intra-gbps"),
        ({"bytes_per_param": 0.0}, "--bytes-per-param"),
        ({"h": 0}, "--h must be a whole number"),
        ({"bits": 12}, "--bits must be one of 4, 8, 16, 32"),
        ({"buckets": 0}, "--buckets"),
        ({"overlap": -0.1}, "--overlap"),
        ({"overlap": 1.5}, "--overlap is a fraction"),
        ({"window_bytes": 0.0}, "--window-bytes"),
        ({"streams_per_node": 0}, "--streams-per-node"),
        ({"detection_timeout_s": 0.0}, "--detection-timeout-s"),
        ({"state_bytes_per_param": 0.0}, "--state-bytes-per-param"),
        ({"rejoin_overhead_s": -1.0}, "--rejoin-overhead-s"),
        ({"target_penalty": 0.0}, "--target-penalty"),
        ({"model_params": float("inf")}, "--model-params"),
        ({"sites": (SitePlan("a", 16),)}, "at least two sites"),
        ({"sites": (SitePlan("a", 16), SitePlan("a", 16))}, "named twice"),
        ({"sites": (SitePlan("a", 12), SitePlan("b", 16))}, "not a whole number of 8-GPU nodes"),
        ({"hops": ()}, "2 sites need 1 WAN hops"),
        ({"hops": (WanHop(a="a", b="c", rtt_ms=1, capacity_gbps=1),)}, "the ring needs a-b"),
    ],
)
def test_bad_inputs_are_refused_with_the_flag_named(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        _inputs(**changes)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: SitePlan("a", 0), "the GPUs at site a must be a whole number"),
        (lambda: SitePlan("", 8), "needs a name"),
        (lambda: WanHop(a="a", b="a", rtt_ms=1, capacity_gbps=1), "two different sites"),
        (lambda: WanHop(a="a", b="b", rtt_ms=0, capacity_gbps=1), "RTT between a and b"),
        (lambda: WanHop(a="a", b="b", rtt_ms=1, capacity_gbps=-1), "capacity between a and b"),
        (
            lambda: WanHop(a="a", b="b", rtt_ms=1, capacity_gbps=1, distance_km=-5),
            "distance between a and b",
        ),
    ],
)
def test_sites_and_hops_validate_themselves(make: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        make()


def test_distance_comes_from_the_fabric_or_102_km_per_ms_of_rtt() -> None:
    assert WanHop(a="a", b="b", rtt_ms=68, capacity_gbps=1, distance_km=6900).distance == (
        6900,
        "fabric",
    )
    assert WanHop(a="a", b="b", rtt_ms=68, capacity_gbps=1).distance == (6936.0, "rtt")


def test_three_sites_need_a_closed_ring_of_hops() -> None:
    sites = (SitePlan("a", 8), SitePlan("b", 8), SitePlan("c", 8))
    ab = WanHop(a="a", b="b", rtt_ms=1, capacity_gbps=1)
    bc = WanHop(a="b", b="c", rtt_ms=1, capacity_gbps=1)
    ca = WanHop(a="c", b="a", rtt_ms=1, capacity_gbps=1)
    assert _inputs(sites=sites, hops=(ab, bc, ca)).hop_from(2) is ca
    with pytest.raises(ValidationError, match="3 sites need 3 WAN hops"):
        _inputs(sites=sites, hops=(ab, bc))
