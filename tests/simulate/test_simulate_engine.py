import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onecluster.errors import ValidationError
from onecluster.fabric import load_fabric
from onecluster.model import Circuit, Dataset, Fabric, GpuPool, Site, Team
from onecluster.simulate import SimResult, simulate
from onecluster.workload import TraceJob, generate

ROOT = Path(__file__).resolve().parents[2]
THREE_SITE = ROOT / "examples" / "fabrics" / "three-site.yaml"


def two_sites(
    *, quota_b: dict[str, int] | None = None, datasets: tuple[Dataset, ...] = ()
) -> Fabric:
    """Sites a and b with 8 H100 each, one 1 Gbit/s circuit; team ta at a, tb at b."""
    return Fabric(
        name="pair",
        sites=(
            Site(
                name="a", region="r1", jurisdiction="X", pools=(GpuPool(gpu_type="H100", count=8),)
            ),
            Site(
                name="b",
                region="r2",
                jurisdiction="X",
                pools=(GpuPool(gpu_type="H100", count=8), GpuPool(gpu_type="L4", count=4)),
            ),
        ),
        circuits=(Circuit(name="a-b", a="a", b="b", capacity_gbps=1.0, rtt_ms=10.0),),
        teams=(
            Team(name="ta", home_site="a", quota={"H100": 8}),
            Team(name="tb", home_site="b", quota=quota_b if quota_b is not None else {"H100": 8}),
        ),
        datasets=datasets,
    )


def job(t: float, dur: float, gpus: int, team: str, **kw: object) -> TraceJob:
    return TraceJob(submit_time=t, duration_s=dur, gpus=gpus, team=team, **kw)  # type: ignore[arg-type]


def check_invariants(fabric: Fabric, result: SimResult) -> None:
    assert result.jobs_completed == result.jobs - result.jobs_rejected
    assert 0.0 <= result.gpu_utilization <= 1.0 + 1e-9
    for key, peak in result.peak_usage.items():
        site, gpu_type = key.split("/")
        pool = fabric.site(site).pool(gpu_type)
        assert pool is not None
        assert peak <= pool.count
    assert math.isclose(sum(s.busy_gpu_s for s in result.sites.values()), result.busy_gpu_s)
    for s in result.sites.values():
        assert s.utilization <= 1.0 + 1e-9


@pytest.mark.parametrize("policy", ["unified", "separate", "fifo"])
def test_generated_workload_completes_without_over_commit(policy: str) -> None:
    fabric = load_fabric(THREE_SITE)
    teams = [t.name for t in fabric.teams]
    homes = {t.name: t.home_site for t in fabric.teams}
    jobs = generate(3_000, 11, teams, home_sites=homes, time_scale=150.0, max_duration_s=7200)
    result = simulate(fabric, jobs, policy)
    check_invariants(fabric, result)
    assert result.jobs == 3_000
    assert result.policy == policy
    assert result.gpu_utilization > 0.2
    assert result.mean_jct_s >= result.mean_wait_s
    assert result.passes > 0


@pytest.mark.parametrize("policy", ["unified", "separate", "fifo"])
def test_a_job_never_starts_on_too_few_free_gpus(policy: str) -> None:
    fabric = two_sites()
    # 5 GPUs busy at each site leave 3 free: a 4-GPU job must wait for a 5-GPU job to end.
    h100 = {"gpu_types": ("H100",)}
    jobs = [
        job(0, 100, 5, "ta", **h100),
        job(0, 100, 5, "tb", **h100),
        job(1, 50, 4, "ta", **h100),
        job(1, 50, 4, "tb", **h100),
    ]
    result = simulate(fabric, jobs, policy)
    check_invariants(fabric, result)
    assert result.peak_usage["a/H100"] <= 8
    assert result.mean_wait_s == pytest.approx((0 + 0 + 99 + 99) / 4)


def test_run_is_deterministic() -> None:
    fabric = load_fabric(THREE_SITE)
    jobs = generate(800, 2, [t.name for t in fabric.teams], time_scale=200.0, max_duration_s=3600)
    a = simulate(fabric, jobs, "unified", seed=4).to_json()
    b = simulate(fabric, jobs, "unified", seed=4).to_json()
    a.pop("sim_wall_s"), b.pop("sim_wall_s"), a.pop("jobs_per_second"), b.pop("jobs_per_second")
    assert a == b
    assert a["seed"] == 4
    assert set(a["teams"]) == {"llm", "vision", "speech"}
    assert set(a["sites"]) == {"shanghai", "singapore", "tokyo"}
    assert json.loads(json.dumps(a)) == a


def test_unified_beats_separate_on_wait() -> None:
    fabric = two_sites()
    # Team ta floods its home site a while b idles: 16 one-hour 4-GPU jobs at once.
    jobs = [job(0, 3600, 4, "ta") for _ in range(16)]
    unified = simulate(fabric, jobs, "unified")
    separate = simulate(fabric, jobs, "separate")
    for r in (unified, separate):
        check_invariants(fabric, r)
    assert unified.mean_wait_s < separate.mean_wait_s
    assert unified.p95_wait_s < separate.p95_wait_s
    assert unified.sites["b"].busy_gpu_s > 0
    assert separate.sites["b"].busy_gpu_s == 0
    assert unified.gpu_utilization > separate.gpu_utilization


def test_quota_owner_preempts_borrowed_work_which_restarts_and_completes() -> None:
    fabric = two_sites()
    jobs = [job(0, 1000, 8, "ta"), job(0, 1000, 8, "ta"), job(100, 500, 8, "tb")]
    result = simulate(fabric, jobs, "unified", grace_s=10.0)
    check_invariants(fabric, result)
    assert result.preemptions == 1
    assert result.teams["ta"].preemptions == 1
    assert result.teams["ta"].borrowed_starts == 2  # borrowed at b, then again after requeue
    assert result.lost_gpu_s == pytest.approx(8 * 110)  # 110 s of work thrown away
    # tb waited out the 10 s grace, then ran its 500 s.
    assert result.teams["tb"].mean_jct_s == pytest.approx(510)
    # The preempted job restarts from scratch once b is free again at t=610.
    assert result.makespan_s == pytest.approx(610 + 1000)


def test_checkpointing_keeps_whole_intervals_of_work() -> None:
    fabric = two_sites()
    jobs = [job(0, 1000, 8, "ta"), job(0, 1000, 8, "ta"), job(100, 500, 8, "tb")]
    result = simulate(fabric, jobs, "unified", grace_s=10.0, checkpoint_interval_s=50.0)
    # 110 s ran, 100 s of it checkpointed: 10 s lost, 900 s left after requeue at t=610.
    assert result.lost_gpu_s == pytest.approx(8 * 10)
    assert result.makespan_s == pytest.approx(610 + 900)


def test_dataset_is_staged_once_and_then_read_locally() -> None:
    size = 125_000_000_000  # 1,000 s over the 1 Gbit/s circuit
    fabric = two_sites(datasets=(Dataset(name="corpus", size_bytes=size, sites=frozenset({"a"})),))
    # L4 GPUs exist only at b, so the job must go there and the data must follow it.
    first = job(0, 100, 2, "tb", gpu_types=("L4",), dataset="corpus", dataset_bytes=size)
    second = replace(first, submit_time=5000)
    result = simulate(fabric, [first, second], "unified")
    check_invariants(fabric, result)
    assert result.bytes_moved == size
    assert result.sites["b"].bytes_in == size
    assert result.teams["tb"].mean_jct_s == pytest.approx((1000 + 100 + 100) / 2)


def test_a_trace_dataset_the_fabric_lacks_is_born_at_its_teams_home_and_staged() -> None:
    """Admission refuses undeclared datasets; the simulator declares a trace's own."""
    size = 125_000_000_000
    fabric = two_sites()
    # Team ta works at a, so its data starts there; L4 GPUs exist only at b.
    first = job(0, 100, 2, "ta", gpu_types=("L4",), dataset="corpus", dataset_bytes=size)
    result = simulate(fabric, [first, replace(first, submit_time=5000)], "unified")
    check_invariants(fabric, result)
    assert result.jobs_rejected == 0
    assert result.bytes_moved == size
    assert result.sites["b"].bytes_in == size


def test_unknown_teams_are_added_with_a_warning() -> None:
    fabric = two_sites()
    jobs = [job(0, 60, 2, "ghost", home_site="b"), job(1, 60, 2, "stray", home_site="nowhere")]
    result = simulate(fabric, jobs, "separate")
    check_invariants(fabric, result)
    assert result.jobs_completed == 2
    assert len(result.warnings) == 2
    assert "2 team(s) of the trace are not in fabric pair (ghost, stray)" in result.warnings[0]
    assert "no quota" in result.warnings[0]
    assert "stray" in result.warnings[1]
    assert result.sites["b"].starts == 1  # ghost ran at its home site b under 'separate'


def test_impossible_jobs_are_rejected_and_named() -> None:
    fabric = two_sites()
    result = simulate(fabric, [job(0, 60, 64, "ta"), job(0, 60, 1, "ta")], "unified")
    assert result.jobs == 2
    assert result.jobs_rejected == 1
    assert result.jobs_completed == 1
    assert any("can never run" in w for w in result.warnings)


def test_bad_arguments_are_refused() -> None:
    fabric = two_sites()
    with pytest.raises(ValidationError):
        simulate(fabric, [], "roulette")
    with pytest.raises(ValidationError):
        simulate(fabric, [], "unified", grace_s=-1)
    with pytest.raises(ValidationError):
        simulate(fabric, [], "unified", checkpoint_interval_s=0)


def test_empty_workload_gives_an_empty_result() -> None:
    result = simulate(two_sites(), [], "unified")
    assert result.jobs == 0
    assert result.gpu_utilization == 0.0
    assert result.to_json()["jobs_completed"] == 0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2_000),
            st.integers(1, 3_000),
            st.sampled_from([1, 2, 4, 8]),
            st.sampled_from(["ta", "tb"]),
            st.booleans(),
        ),
        min_size=1,
        max_size=40,
    ),
    st.sampled_from(["unified", "separate", "fifo"]),
)
def test_invariants_hold_for_any_small_workload(
    rows: list[tuple[int, int, int, str, bool]], policy: str
) -> None:
    fabric = two_sites(quota_b={"H100": 4})
    # L4 exists only at b, tb's home, so every job can run under every policy.
    jobs = [
        job(t, d, g, team, gpu_types=("L4",) if l4 and g <= 4 and team == "tb" else ())
        for t, d, g, team, l4 in rows
    ]
    result = simulate(fabric, jobs, policy, grace_s=5.0)
    check_invariants(fabric, result)
    assert result.jobs_rejected == 0
    for r in rows:
        assert result.makespan_s >= r[1]
