"""Properties of guarantees and checkpoint-aware preemption (issue 16)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from onecluster.fabric import parse_fabric
from onecluster.model import JobSpec, SitePart
from onecluster.scheduler import (
    Allocation,
    AllocationLedger,
    ClusterView,
    PendingJob,
    PendingQueue,
    PolicyConfig,
    Scheduler,
    UsageHistory,
    decayed_gpu_s,
)
from onecluster.simulate import simulate
from onecluster.workload import TraceJob

FABRIC = parse_fabric(
    """\
sites:
  - {name: a, region: r, jurisdiction: X, pools: [{gpu_type: H100, count: 8}]}
  - {name: b, region: r, jurisdiction: X, pools: [{gpu_type: H100, count: 6}]}
circuits:
  - {name: a-b, between: [a, b], capacity_gbps: 1, rtt_ms: 10}
teams:
  - {name: t1, home_site: a, quota: {H100: 4}}
  - {name: t2, home_site: a}
  - {name: t3, home_site: b}
  - {name: t4, home_site: a}
  - {name: t5, home_site: b, quota: {}}
""",
    source="fairness.yaml",
)
GRACE = 30.0


@settings(max_examples=60, deadline=None)
@given(
    borrowers=st.lists(
        st.tuples(st.sampled_from(["t2", "t3"]), st.sampled_from(["a", "b"]), st.integers(1, 3)),
        min_size=1,
        max_size=10,
    ),
    need=st.integers(1, 4),
    ends_in=st.floats(0, 10_000),
)
def test_a_team_under_its_guarantee_waits_behind_borrowers_at_most_the_grace(
    borrowers: list[tuple[str, str, int]], need: int, ends_in: float
) -> None:
    # Fill the pools with borrowed work (as far as it fits), then t1 asks within its quota.
    ledger, used = AllocationLedger(), {"a": 0, "b": 0}
    for i, (team, site, asked) in enumerate(borrowers):
        gpus = min(asked, {"a": 8, "b": 6}[site] - used[site])
        if gpus <= 0:
            continue
        used[site] += gpus
        ledger.add(
            Allocation(
                job_id=f"x{i}",
                team=team,
                parts=(SitePart(site=site, gpu_type="H100", gpus=gpus),),
                borrowed=True,
                preemptible=True,
                expected_end=100.0 + ends_in,
            )
        )
    scheduler = Scheduler(FABRIC, PolicyConfig(grace_s=GRACE))
    owner = PendingJob(
        job_id="own", spec=JobSpec(team="t1", gpus=need, duration_s=60), submitted_at=100
    )
    plan = scheduler.plan(ClusterView(running=ledger), PendingQueue.of([owner]), 100.0)
    if any(s.job_id == "own" for s in plan.starts):
        return
    if not plan.preemptions:
        # It may wait only for GPUs that free up by themselves within the grace.
        assert ends_in <= GRACE
        return
    # After the grace the victims are gone: the owner starts, ahead of every borrower.
    for p in plan.preemptions:
        ledger.remove(p.job_id)
    queue = PendingQueue.of(
        [
            owner,
            # A borrower (t5 is guaranteed nothing) that has waited longer still goes after.
            PendingJob(
                job_id="late", spec=JobSpec(team="t5", gpus=1, duration_s=60), submitted_at=0
            ),
        ]
    )
    after = scheduler.plan(ClusterView(running=ledger), queue, 100.0 + GRACE)
    assert any(s.job_id == "own" and not s.borrowed for s in after.starts)


@settings(max_examples=25, deadline=None)
@given(
    jobs=st.lists(
        st.tuples(
            st.floats(0, 2_000),
            st.floats(10, 3_000),
            st.integers(1, 6),
            st.sampled_from(["t1", "t2", "t3"]),
            st.sampled_from([None, 60.0, 500.0]),
            st.booleans(),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_no_job_is_lost_or_run_twice_under_checkpoint_aware_preemption(
    jobs: list[tuple[float, float, int, str, float | None, bool]],
) -> None:
    trace = [
        TraceJob(
            submit_time=t,
            duration_s=d,
            gpus=g,
            team=team,
            checkpoint_interval_s=every,
            checkpoint_on_sigterm=on_term,
        )
        for t, d, g, team, every, on_term in jobs
    ]
    result = simulate(FABRIC, trace, "unified", grace_s=GRACE)
    # Every job completed exactly once (a second completion raises inside the simulator).
    assert result.jobs_completed == len(trace)
    # Work is conserved: what ran is the jobs' work plus what preemption threw away plus the
    # grace spent draining, never less.
    work = sum(d * g for _, d, g, *_ in jobs)
    assert result.busy_gpu_s >= work + result.lost_gpu_s - 1e-6 * work
    # A job that checkpoints on SIGTERM never loses work.
    if all(on_term for *_, on_term in jobs):
        assert result.lost_gpu_s == 0


def test_decayed_usage_halves_every_half_life_and_matches_the_closed_form() -> None:
    h = UsageHistory(half_life_s=100.0)
    h.change("t1", 4, 0.0)
    h.change("t1", -4, 100.0)
    at_end = h.at(100.0)["t1"]
    assert abs(at_end - decayed_gpu_s(4, 0.0, 100.0, now=100.0, half_life_s=100.0)) < 1e-9
    assert abs(h.at(200.0)["t1"] - at_end / 2) < 1e-9
    assert decayed_gpu_s(4, 50.0, 40.0, now=100.0, half_life_s=100.0) == 0.0


def test_a_team_that_ran_less_lately_goes_first_whatever_it_holds_now() -> None:
    queue = PendingQueue.of(
        [
            PendingJob(
                job_id="heavy", spec=JobSpec(team="t2", gpus=6, duration_s=60), submitted_at=0
            ),
            PendingJob(
                job_id="light", spec=JobSpec(team="t4", gpus=6, duration_s=60), submitted_at=1
            ),
        ]
    )
    # Only one 6-GPU job fits in a's spare capacity once b is taken.
    ledger = AllocationLedger.of(
        [
            Allocation(
                job_id="hold",
                team="t1",
                parts=(SitePart(site="b", gpu_type="H100", gpus=6),),
                expected_end=1e9,
            ),
            Allocation(
                job_id="hold2",
                team="t1",
                parts=(SitePart(site="a", gpu_type="H100", gpus=2),),
                expected_end=1e9,
            ),
        ]
    )
    usage = {"t2": 1e6, "t4": 0.0}
    plan = Scheduler(FABRIC).plan(ClusterView(running=ledger, usage=usage), queue, 10)
    assert [s.job_id for s in plan.starts] == ["light"]
    plan = Scheduler(FABRIC).plan(ClusterView(running=ledger), queue, 10)
    assert [s.job_id for s in plan.starts] == ["heavy"], "without history: the older job"
