"""Multi-site gangs reserve and reclaim like single-pool jobs (issue 16, item 5)."""

from __future__ import annotations

from onecluster.model import Fabric, JobSpec, SitePart
from onecluster.scheduler import (
    Allocation,
    AllocationLedger,
    ClusterView,
    PendingJob,
    PendingQueue,
    Scheduler,
)


def gang(job_id: str, team: str, gpus: int, at: float = 0.0) -> PendingJob:
    spec = JobSpec(team=team, gpus=gpus, duration_s=3600, gpu_types=("H100",), max_sites=2)
    return PendingJob(job_id=job_id, spec=spec, submitted_at=at)


def held(job_id: str, team: str, site: str, gpus: int, **kw: object) -> Allocation:
    return Allocation(
        job_id=job_id,
        team=team,
        parts=(SitePart(site=site, gpu_type="H100", gpus=gpus),),
        **kw,  # type: ignore[arg-type]
    )


def test_an_owner_gang_reclaims_borrowed_gpus_in_two_sites(small: Fabric) -> None:
    # t3 (no H100 quota) borrowed 6 H100 in a and 6 in b; t1 holds 2 in each within its
    # quota.  t2 (quota 8) asks for an 8-GPU gang over two sites: no single pool can give 8,
    # so it reclaims borrowed GPUs in both.
    ledger = AllocationLedger.of(
        [
            held("ba", "t3", "a", 6, borrowed=True, preemptible=True, expected_end=1e9),
            held("bb", "t3", "b", 6, borrowed=True, preemptible=True, expected_end=1e9),
            held("own-a", "t1", "a", 2, expected_end=1e9),
            held("own-b", "t1", "b", 2, expected_end=1e9),
        ]
    )
    plan = Scheduler(small).plan(
        ClusterView(running=ledger), PendingQueue.of([gang("g", "t2", 8)]), 10
    )
    assert {p.job_id for p in plan.preemptions} == {"ba", "bb"}
    assert all(p.for_job_id == "g" for p in plan.preemptions)
    assert plan.stats.waiting_on_preemption == 1
    # Once they are gone, the gang starts over the two sites.
    for victim in ("ba", "bb"):
        ledger.remove(victim)
    after = Scheduler(small).plan(
        ClusterView(running=ledger), PendingQueue.of([gang("g", "t2", 8)]), 40
    )
    (start,) = after.starts
    assert {part.site for part in start.parts} == {"a", "b"}


def test_a_blocked_gang_reserves_the_pools_it_will_start_in(small: Fabric) -> None:
    # Both H100 pools are busy with in-quota work ending at different times; a 16-GPU gang
    # over two sites must wait, and a long 2-GPU job must not jump it.
    ledger = AllocationLedger.of(
        [
            held("x", "t1", "a", 8, started_at=0, expected_end=100),
            held("y", "t2", "b", 6, started_at=0, expected_end=200),
        ]
    )
    queue = PendingQueue.of([gang("big", "t1", 16, at=0), gang("long", "t1", 2, at=1)])
    plan = Scheduler(small).plan(ClusterView(running=ledger), queue, 10)
    assert plan.stats.reservations == 2
    assert [s.job_id for s in plan.starts] == [], "the long job would delay the gang"
    short = PendingJob(
        job_id="short",
        spec=JobSpec(team="t2", gpus=2, duration_s=50, gpu_types=("H100",)),
        submitted_at=2,
    )
    plan = Scheduler(small).plan(
        ClusterView(running=ledger), PendingQueue.of([gang("big", "t1", 16), short]), 10
    )
    assert [s.job_id for s in plan.starts] == ["short"], "a job ending before it may backfill"
