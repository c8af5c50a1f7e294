"""Invariants of the model, for any valid inputs (Hypothesis).

More RTT never makes a mode faster; more bandwidth (circuit, NIC share, window, streams)
never makes one slower; a larger H never increases DiLoCo's WAN bytes per step; fewer bits
never send more; the verdict always names a mode that meets the target, or none does.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from onecluster.planner import MODES, PlanInputs, SitePlan, WanHop, all_modes, diloco, plan

rtts = st.floats(min_value=0.05, max_value=300.0)
capacities = st.floats(min_value=0.1, max_value=50_000.0)
factors = st.floats(min_value=1.0, max_value=100.0)
nodes = st.integers(min_value=1, max_value=128)
params = st.floats(min_value=1e8, max_value=1e12)
knobs = st.fixed_dictionaries(
    {
        "h": st.integers(min_value=1, max_value=1000),
        "bits": st.sampled_from([4, 8, 16, 32]),
        "buckets": st.integers(min_value=1, max_value=300),
        "overlap": st.floats(min_value=0.0, max_value=1.0),
        "streams_per_node": st.integers(min_value=1, max_value=256),
        "mfu": st.floats(min_value=0.05, max_value=1.0),
    }
)


def build(*, rtt: float, capacity: float, a: int, b: int, p: float, **changes: Any) -> PlanInputs:
    return PlanInputs(
        model_params=p,
        sites=(SitePlan("a", 8 * a), SitePlan("b", 8 * b)),
        hops=(WanHop(a="a", b="b", rtt_ms=rtt, capacity_gbps=capacity),),
        **changes,
    )


def steps(inputs: PlanInputs) -> dict[str, float]:
    return {m.mode: m.step_s for m in all_modes(inputs)}


def no_faster(slow: dict[str, float], fast: dict[str, float]) -> bool:
    return all(slow[name] >= fast[name] * (1 - 1e-12) for name in MODES)


@settings(max_examples=200, deadline=None)
@given(rtts, factors, capacities, nodes, nodes, params, knobs)
def test_more_rtt_never_makes_a_mode_faster(
    rtt: float, more: float, capacity: float, a: int, b: int, p: float, kw: dict[str, Any]
) -> None:
    near = build(rtt=rtt, capacity=capacity, a=a, b=b, p=p, **kw)
    far = build(rtt=rtt * more, capacity=capacity, a=a, b=b, p=p, **kw)
    assert no_faster(steps(far), steps(near))


@settings(max_examples=200, deadline=None)
@given(rtts, capacities, factors, nodes, nodes, params, knobs)
def test_more_circuit_capacity_never_slower(
    rtt: float, capacity: float, more: float, a: int, b: int, p: float, kw: dict[str, Any]
) -> None:
    thin = build(rtt=rtt, capacity=capacity, a=a, b=b, p=p, **kw)
    fat = build(rtt=rtt, capacity=capacity * more, a=a, b=b, p=p, **kw)
    assert no_faster(steps(thin), steps(fat))


@settings(max_examples=200, deadline=None)
@given(rtts, capacities, st.floats(min_value=0.01, max_value=400.0), factors, nodes, nodes, params)
def test_more_nic_or_window_never_slower(
    rtt: float, capacity: float, nic: float, more: float, a: int, b: int, p: float
) -> None:
    base = build(rtt=rtt, capacity=capacity, a=a, b=b, p=p, nic_gbps=nic)
    wider_nic = build(rtt=rtt, capacity=capacity, a=a, b=b, p=p, nic_gbps=nic * more)
    wider_window = build(
        rtt=rtt, capacity=capacity, a=a, b=b, p=p, nic_gbps=nic, window_bytes=4 * 2**20 * more
    )
    assert no_faster(steps(base), steps(wider_nic))
    assert no_faster(steps(base), steps(wider_window))


@settings(max_examples=200, deadline=None)
@given(rtts, capacities, nodes, nodes, params, st.integers(1, 1000), st.integers(1, 1000))
def test_larger_h_never_increases_diloco_wan_bytes(
    rtt: float, capacity: float, a: int, b: int, p: float, h1: int, h2: int
) -> None:
    small, large = sorted((h1, h2))
    for streaming in (False, True):
        s = diloco(build(rtt=rtt, capacity=capacity, a=a, b=b, p=p, h=small), streaming=streaming)
        g = diloco(build(rtt=rtt, capacity=capacity, a=a, b=b, p=p, h=large), streaming=streaming)
        assert g.wan_bytes_per_site / large <= s.wan_bytes_per_site / small
        assert g.average_gbps_per_site <= s.average_gbps_per_site * (1 + 1e-12)
        assert g.penalty <= s.penalty * (1 + 1e-12)


@settings(max_examples=100, deadline=None)
@given(rtts, capacities, nodes, nodes, params, knobs)
def test_fewer_bits_never_send_more_nor_stall_longer(
    rtt: float, capacity: float, a: int, b: int, p: float, kw: dict[str, Any]
) -> None:
    widths = [4, 8, 16, 32]
    results = [
        diloco(build(rtt=rtt, capacity=capacity, a=a, b=b, p=p, **{**kw, "bits": bits}))
        for bits in widths
    ]
    for narrow, wide in itertools.pairwise(results):
        assert narrow.wan_bytes_per_site < wide.wan_bytes_per_site
        assert narrow.step_s <= wide.step_s * (1 + 1e-12)


@settings(max_examples=200, deadline=None)
@given(rtts, capacities, nodes, nodes, params, knobs, st.floats(0.001, 1.0))
def test_verdict_names_a_mode_that_meets_the_target_or_none_does(
    rtt: float, capacity: float, a: int, b: int, p: float, kw: dict[str, Any], target: float
) -> None:
    result = plan(build(rtt=rtt, capacity=capacity, a=a, b=b, p=p, target_penalty=target, **kw))
    meeting = [m.mode for m in result.modes if m.meets_target]
    assert result.verdict.mode == (next((n for n in MODES if n in meeting), None))
    for m in result.modes:
        assert 0 < m.utilisation <= 1
        assert m.step_s >= m.compute_s
    # the smallest H the verdict names does meet the target, blocking
    h = result.verdict.diloco_min_h
    at_h = diloco(
        build(rtt=rtt, capacity=capacity, a=a, b=b, p=p, target_penalty=target, **{**kw, "h": h})
    )
    assert at_h.meets_target
