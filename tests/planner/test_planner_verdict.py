"""The verdict: the first mode in preference order that meets the target, and the H needed."""

from __future__ import annotations

import pytest

from onecluster.planner import (
    DDP_FLAT,
    DDP_HIERARCHICAL,
    DILOCO,
    DILOCO_STREAMING,
    PlanInputs,
    SitePlan,
    WanHop,
    choose,
    diloco,
    min_h,
    plan,
)


def _inputs(rtt_ms: float, capacity_gbps: float, **changes: object) -> PlanInputs:
    return PlanInputs(
        model_params=70e9,
        sites=(SitePlan("a", 512), SitePlan("b", 512)),
        hops=(WanHop(a="a", b="b", rtt_ms=rtt_ms, capacity_gbps=capacity_gbps),),
        **changes,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("rtt_ms", "capacity_gbps", "changes", "mode"),
    [
        (0.49, 6400, {}, DDP_HIERARCHICAL),  # metro, a Tbit/s DCI
        (68, 6400, {}, DILOCO),  # far: DDP fails, blocking DiLoCo holds
        (68, 2, {}, DILOCO_STREAMING),  # far and thin: only overlap hides 280 s
        (68, 0.5, {}, None),  # too thin even to overlap
    ],
)
def test_the_verdict_prefers_per_step_then_blocking_then_streaming(
    rtt_ms: float, capacity_gbps: float, changes: dict[str, object], mode: str | None
) -> None:
    result = plan(_inputs(rtt_ms, capacity_gbps, **changes))
    assert result.verdict.mode == mode
    if mode is None:
        assert "no mode keeps the penalty" in result.verdict.reason
        assert result.verdict.closest == DILOCO_STREAMING


def test_hierarchical_comes_before_flat_when_both_meet_the_target() -> None:
    # A single node per site: flat and hierarchical cross with the same node; hierarchical
    # still comes first in the order.
    inputs = PlanInputs(
        model_params=1e6,
        sites=(SitePlan("a", 8), SitePlan("b", 8)),
        hops=(WanHop(a="a", b="b", rtt_ms=0.1, capacity_gbps=400),),
    )
    result = plan(inputs)
    assert result.mode(DDP_FLAT).meets_target and result.verdict.mode == DDP_HIERARCHICAL
    with pytest.raises(KeyError):
        result.mode("allreduce-by-pigeon")


def test_choose_takes_modes_in_any_order() -> None:
    result = plan(_inputs(68, 6400))
    assert choose(tuple(reversed(result.modes))) == result.verdict


def test_min_h_by_hand() -> None:
    assert min_h(10.0, 1.0, 0.05, streaming=False) == 200
    assert min_h(10.0, 1.0, 0.05, streaming=True) == 10  # 10 / 1.05 = 9.52 → 10
    assert min_h(0.0, 1.0, 0.05, streaming=True) == 1
    assert min_h(2.0, 1.0, 1.0, streaming=False) == 2  # exact, not 3 by float noise


def test_min_h_is_the_smallest_that_meets_the_target() -> None:
    result = plan(_inputs(68, 2))
    h = result.verdict.diloco_min_h
    assert diloco(_inputs(68, 2, h=h)).meets_target
    assert not diloco(_inputs(68, 2, h=h - 1)).meets_target
    s = result.verdict.streaming_min_h
    assert diloco(_inputs(68, 2, h=s), streaming=True).meets_target
    assert not diloco(_inputs(68, 2, h=s - 1), streaming=True).meets_target
