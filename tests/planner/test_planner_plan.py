"""plan() and predict(): every figure in one JSON-ready value, on every example fabric."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onecluster.fabric import load_fabric
from onecluster.planner import (
    DILOCO_STREAMING,
    MODES,
    SCHEMA_VERSION,
    PlanInputs,
    SitePlan,
    plan,
    predict,
    ring_from_fabric,
)

FABRICS = Path(__file__).resolve().parents[2] / "examples" / "fabrics"


@pytest.mark.parametrize("path", sorted(FABRICS.glob("*.yaml")), ids=lambda p: p.stem)
def test_plan_works_on_every_example_fabric(path: Path) -> None:
    fabric = load_fabric(path)
    order, hops = ring_from_fabric(fabric, list(fabric.site_names))
    inputs = PlanInputs(
        model_params=7e9, sites=tuple(SitePlan(n, 64) for n in order), hops=hops, h=50
    )
    body = predict(inputs)
    json.dumps(body, allow_nan=False)  # plain JSON, no NaN or infinity
    assert [m["mode"] for m in body["modes"]] == list(MODES)
    assert body["verdict"]["mode"] in (*MODES, None)
    assert body["compute"]["gpus"] == 64 * len(order)
    for m in body["modes"]:
        assert m["step_s"] >= m["compute_s"] > 0


def test_70b_on_1024_gpus_over_the_68_ms_circuits() -> None:
    """The scenario of issue 15: 2 sites × 64 nodes × 8 GPUs, Shanghai–Singapore."""
    fabric = load_fabric(FABRICS / "three-site.yaml")
    order, hops = ring_from_fabric(fabric, ["shanghai", "singapore"])
    inputs = PlanInputs(model_params=70e9, sites=tuple(SitePlan(n, 512) for n in order), hops=hops)
    result = plan(inputs)
    assert inputs.total_gpus == 1024
    assert inputs.step_compute_s == pytest.approx(4.35, abs=0.005)
    blocking = result.mode("diloco")
    # training.md §2.2: int8, H = 100 → 70 GB a sync, ≈1.3 Gbit/s per site on average
    assert blocking.wan_bytes_per_site == 70e9
    assert blocking.average_gbps_per_site == pytest.approx(1.3, rel=0.05)
    # the two circuits give 2 Gbit/s: 280 s a sync, hidden only by streaming
    assert blocking.sync_s == pytest.approx(280, rel=0.01)
    assert blocking.penalty == pytest.approx(280 / (100 * 4.35), rel=0.01)
    assert result.verdict.mode == DILOCO_STREAMING
    assert result.critic.link_distance_km == 7200
    assert result.critic.recovery.rejoin_s == pytest.approx(420e9 * 8 / 2e9 + 10)


def test_predict_has_every_input_and_figure() -> None:
    fabric = load_fabric(FABRICS / "three-site.yaml")
    order, hops = ring_from_fabric(fabric, ["shanghai", "tokyo"])
    inputs = PlanInputs(model_params=7e9, sites=tuple(SitePlan(n, 64) for n in order), hops=hops)
    body = predict(inputs)
    assert body["schema"] == SCHEMA_VERSION
    assert set(body) == {"schema", "inputs", "compute", "hops", "modes", "verdict", "critic"}
    assert body["inputs"]["sites"] == {"shanghai": 64, "tokyo": 64}
    assert body["inputs"]["streams_per_node"] == 64
    assert body["hops"][0]["circuits"] == ["sha-tyo"]
    assert body["hops"][0]["distance_source"] == "fabric"
    assert set(body["modes"][0]) >= {
        "step_s",
        "utilisation",
        "penalty",
        "average_gbps_per_node",
        "needed_gbps_per_node",
        "binding",
        "rate",
    }


def test_a_measured_step_time_replaces_the_flops_formula() -> None:
    fabric = load_fabric(FABRICS / "three-site.yaml")
    order, hops = ring_from_fabric(fabric, ["shanghai", "tokyo"])
    inputs = PlanInputs(
        model_params=7e9,
        sites=tuple(SitePlan(n, 64) for n in order),
        hops=hops,
        step_time_s=1.25,
    )
    assert all(m["compute_s"] == 1.25 for m in predict(inputs)["modes"])
