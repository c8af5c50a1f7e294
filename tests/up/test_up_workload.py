"""The demo workload: trace jobs compressed into the demo's length, sized for the fabric."""

from __future__ import annotations

from pathlib import Path

import pytest

from onecluster.errors import ValidationError
from onecluster.fabric import load_fabric
from onecluster.model import Fabric
from onecluster.up._workload import ARRIVAL_SHARE, LONGEST_SHARE, compress, demo_workload
from onecluster.workload import TraceJob

ROOT = Path(__file__).resolve().parents[2]
THREE_SITE = ROOT / "examples" / "fabrics" / "three-site.yaml"


@pytest.fixture(scope="module")
def fabric() -> Fabric:
    return load_fabric(THREE_SITE)


def _job(at: float, duration: float, gpus: int = 1, team: str = "llm") -> TraceJob:
    return TraceJob(submit_time=at, duration_s=duration, gpus=gpus, team=team)


def test_arrivals_are_compressed_linearly_into_the_first_half(fabric: Fabric) -> None:
    raw = [_job(1000, 10), _job(1500, 100), _job(3000, 1000)]
    demo = compress(raw, fabric, 60, source="test")
    assert [j.at_s for j in demo.jobs] == [0.0, 7.5, 60 * ARRIVAL_SHARE]


def test_durations_are_mapped_on_a_log_scale_between_one_second_and_a_quarter(
    fabric: Fabric,
) -> None:
    raw = [_job(0, 10), _job(1, 100), _job(2, 1000)]
    demo = compress(raw, fabric, 60, source="test")
    longest = 60 * LONGEST_SHARE
    # 100 s is half-way between 10 s and 1000 s on a log scale
    assert [j.run_s for j in demo.jobs] == [1.0, round((1.0 + longest) / 2, 1), longest]
    assert demo.jobs[0].command == ["sleep", "1.0"]


def test_gpu_factor_is_a_power_of_two_and_keeps_gangs_inside_the_largest_pool(
    fabric: Fabric,
) -> None:
    raw = [_job(t, 50, gpus=8) for t in range(5)]
    demo = compress(raw, fabric, 60, source="test")
    factor = demo.gpu_factor
    assert factor & (factor - 1) == 0
    assert all(j.gpus == 8 * factor for j in demo.jobs)
    assert max(j.gpus for j in demo.jobs) <= 384  # the largest pool of the three-site fabric


def test_generator_workload_is_deterministic_and_uses_the_fabric_teams(fabric: Fabric) -> None:
    first = demo_workload(fabric, 30, trace_path=None, jobs=12, seed=7)
    again = demo_workload(fabric, 30, trace_path=None, jobs=12, seed=7)
    assert first == again
    assert len(first.jobs) == 12
    assert {j.team for j in first.jobs} <= {"llm", "vision", "speech"}
    assert "generator" in first.source
    assert all(j.at_s <= 30 * ARRIVAL_SHARE for j in first.jobs)


def test_trace_workload_names_the_trace(fabric: Fabric, tmp_path: Path) -> None:
    trace = tmp_path / "pods.csv"
    rows = [
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
        "creation_time,deletion_time,scheduled_time"
    ]
    rows += [
        f"pod-{i},1000,1024,{1 + i % 2},1000,,LS,Succeeded,{i * 60},{i * 60 + 600 + i},{i * 60}"
        for i in range(10)
    ]
    trace.write_text("\n".join(rows) + "\n", encoding="utf-8")
    demo = demo_workload(fabric, 20, trace_path=trace, jobs=5, skip=2)
    assert len(demo.jobs) == 5
    assert demo.jobs[0].name == "pod-2"
    assert str(trace) in demo.source


def test_fabric_without_teams_cannot_run_a_demo(fabric: Fabric) -> None:
    bare = Fabric(name="bare", sites=fabric.sites, circuits=fabric.circuits)
    with pytest.raises(ValidationError, match="no teams"):
        demo_workload(bare, 20, trace_path=None, jobs=3)


def test_empty_trace_gives_an_empty_demo(fabric: Fabric) -> None:
    assert compress([], fabric, 20, source="none").jobs == ()
