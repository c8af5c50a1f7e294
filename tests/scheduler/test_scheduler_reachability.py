"""Jobs whose data cannot reach a site, and owners whose idle GPUs others took."""

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

TB = 10**12


def job(job_id: str, team: str = "t1", gpus: int = 1, at: float = 0.0, **kw: object) -> PendingJob:
    spec = JobSpec(team=team, gpus=gpus, duration_s=3600.0, **kw)  # type: ignore[arg-type]
    return PendingJob(job_id=job_id, spec=spec, submitted_at=at)


def h100(job_id: str, team: str, site: str, *, borrowed: bool) -> Allocation:
    return Allocation(
        job_id=job_id,
        team=team,
        parts=(SitePart(site=site, gpu_type="H100", gpus=8),),
        borrowed=borrowed,
        preemptible=borrowed,
        expected_end=86_400,
    )


def test_a_job_whose_data_cannot_arrive_does_not_block_others_of_its_shape(small: Fabric) -> None:
    # d1's only copy is at c, which is down: j1 can run nowhere; j2 (no data) can run now.
    view = ClusterView(down_sites=frozenset({"c"}), replicas={"d1": frozenset({"c"})})
    q = PendingQueue.of(
        [
            job("j1", gpu_types=("H100",), dataset="d1", dataset_bytes=TB, at=0),
            job("j2", gpu_types=("H100",), at=1),
        ]
    )
    plan = Scheduler(small).plan(view, q, 0)
    assert [s.job_id for s in plan.starts] == ["j2"]
    assert plan.stats.reservations == 0  # no place held for a job that cannot use it


def test_nothing_is_preempted_for_a_job_that_could_not_start_there(small: Fabric) -> None:
    running = AllocationLedger.of(
        [h100("b_a", "t2", "a", borrowed=True), h100("n_b", "t2", "b", borrowed=False)]
    )
    view = ClusterView(
        running=running, down_sites=frozenset({"c"}), replicas={"d1": frozenset({"c"})}
    )
    q = PendingQueue.of([job("j1", gpus=8, gpu_types=("H100",), dataset="d1", dataset_bytes=TB)])
    assert Scheduler(small).plan(view, q, 0).preemptions == ()


def test_an_owner_deferred_for_idle_gpus_it_cannot_get_reclaims_its_own(small: Fabric) -> None:
    # t1 owns 8 H100 and uses none; a holds t2's borrowed work.  c has 2 idle L40S, but they
    # are held for t3's blocked 4-GPU job, so t1's 2-GPU job cannot borrow them after all.
    running = AllocationLedger.of(
        [
            h100("b_a", "t2", "a", borrowed=True),
            h100("n_b", "t2", "b", borrowed=False),
            Allocation(
                job_id="t3run",
                team="t3",
                parts=(SitePart(site="c", gpu_type="L40S", gpus=2),),
                expected_end=1800,
            ),
        ]
    )
    q = PendingQueue.of([job("x", team="t3", gpus=4, gpu_types=("L40S",)), job("j", gpus=2)])
    plan = Scheduler(small).plan(ClusterView(running=running), q, 0)
    assert [(p.job_id, p.for_job_id) for p in plan.preemptions] == [("b_a", "j")]
