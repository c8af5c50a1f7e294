"""Loops and stalls an outside review found in the first cut of issue 16's rules."""

from __future__ import annotations

from onecluster.fabric import parse_fabric
from onecluster.model import JobSpec, SitePart
from onecluster.scheduler import (
    Allocation,
    AllocationLedger,
    ClusterView,
    PendingJob,
    PendingQueue,
    Scheduler,
)
from onecluster.simulate import simulate
from onecluster.workload import TraceJob

TWO = parse_fabric(
    """\
sites:
  - {name: a, region: r, jurisdiction: X, pools: [{gpu_type: H100, count: 8}]}
  - {name: b, region: r, jurisdiction: X, pools: [{gpu_type: H100, count: 8}]}
circuits:
  - {name: a-b, between: [a, b], capacity_gbps: 1, rtt_ms: 10}
teams:
  - {name: ta, home_site: a}
  - {name: tb, home_site: b}
""",
    source="two.yaml",
)
H = 3600.0


def test_two_gangs_bigger_than_their_home_site_do_not_preempt_each_other() -> None:
    jobs = [
        TraceJob(submit_time=t, duration_s=24 * H, gpus=12, team="ta", max_sites=2)
        for t in (0.0, 600.0)
    ]
    result = simulate(TWO, jobs, "unified")
    assert result.jobs_completed == 2
    assert result.preemptions == 0, "a gang at home in a's pool is not away there"


def test_a_short_gang_starts_before_a_reserved_one_when_it_ends_first() -> None:
    ledger = AllocationLedger.of(
        [
            Allocation(
                job_id="x",
                team="tb",
                parts=(SitePart(site="b", gpu_type="H100", gpus=1),),
                expected_end=10 * H,
            )
        ]
    )
    queue = PendingQueue.of(
        [
            PendingJob(
                job_id="R",
                spec=JobSpec(team="tb", gpus=16, duration_s=100 * H, max_sites=2),
                submitted_at=0,
            ),
            PendingJob(
                job_id="G",
                spec=JobSpec(team="ta", gpus=12, duration_s=600, max_sites=2),
                submitted_at=10,
            ),
        ]
    )
    plan = Scheduler(TWO).plan(ClusterView(running=ledger), queue, 100.0)
    assert [s.job_id for s in plan.starts] == ["G"]
    assert plan.stats.waiting_on_preemption == 0, "no claim on GPUs that are simply free"


def test_the_simulator_keeps_the_grace_of_the_config_it_is_given() -> None:
    from onecluster.scheduler import PolicyConfig

    jobs = [TraceJob(submit_time=0.0, duration_s=10 * H, gpus=1, team="tb") for _ in range(16)]
    jobs.append(TraceJob(submit_time=100.0, duration_s=H, gpus=1, team="ta"))
    result = simulate(TWO, jobs, config=PolicyConfig(grace_s=5.0))
    assert result.reclaims == 1
    assert result.reclaim_max_s == 5.0, "an owner arriving at a full home waits the grace"
    assert simulate(TWO, jobs, config=PolicyConfig(grace_s=5.0), grace_s=12.0).reclaim_max_s == 12.0
