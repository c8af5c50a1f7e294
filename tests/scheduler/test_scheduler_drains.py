"""Drained pools (``onecluster drain``): nothing new is placed or reclaimed there, what runs
there keeps running, and ``jobs --why`` shows them closed."""

from __future__ import annotations

from onecluster.model import Fabric, JobSpec, SitePart
from onecluster.scheduler import (
    Allocation,
    ClusterView,
    PendingJob,
    PendingQueue,
    Scheduler,
    explain,
)


def _job(job_id: str, team: str = "t1", gpus: int = 1, **kw: object) -> PendingJob:
    spec = JobSpec(team=team, gpus=gpus, duration_s=3600.0, gpu_types=("H100",), **kw)  # type: ignore[arg-type]
    return PendingJob(job_id=job_id, spec=spec, submitted_at=0.0)


def test_a_drained_pool_takes_no_new_work_and_undrained_it_does(small: Fabric) -> None:
    queue = PendingQueue.of([_job("j")])
    drained = Scheduler(small, drained=frozenset({("a", "H100")}))
    [start] = drained.plan(ClusterView(), queue, 0).starts
    assert [p.site for p in start.parts] == ["b"]  # a is cheaper, but drained
    everywhere = Scheduler(small, drained=frozenset({("a", "H100"), ("b", "H100")}))
    assert everywhere.plan(ClusterView(), queue, 0).starts == ()
    [start] = Scheduler(small).plan(ClusterView(), queue, 0).starts
    assert [p.site for p in start.parts] == ["a"]


def test_work_in_a_drained_pool_is_neither_preempted_nor_joined(small: Fabric) -> None:
    borrowed = Allocation(
        job_id="old",
        team="t2",
        parts=(SitePart(site="a", gpu_type="H100", gpus=8),),
        borrowed=True,
        preemptible=True,
    )
    home_of_t2 = Allocation(
        job_id="t2-own", team="t2", parts=(SitePart(site="b", gpu_type="H100", gpus=8),)
    )
    view = ClusterView(running=(borrowed, home_of_t2))
    owner = PendingQueue.of([_job("owner", gpus=8)])
    # Open, the owner reclaims its home pool from the borrower.
    assert [p.job_id for p in Scheduler(small).plan(view, owner, 0).preemptions] == ["old"]
    plan = Scheduler(small, drained=frozenset({("a", "H100")})).plan(view, owner, 0)
    assert (plan.starts, plan.preemptions) == ((), ())


def test_the_view_given_keeps_its_own_closed_pools_and_gains_the_drains(small: Fabric) -> None:
    scheduler = Scheduler(small, drained=frozenset({("a", "H100")}))
    view = ClusterView(closed_pools=frozenset({("b", "H100")}))
    assert scheduler.with_drains(view).closed_pools == {("a", "H100"), ("b", "H100")}
    assert Scheduler(small).with_drains(view) is view
    assert scheduler.plan(view, PendingQueue.of([_job("j")]), 0).starts == ()


def test_why_shows_a_drained_pool_closed(small: Fabric) -> None:
    scheduler = Scheduler(small, drained=frozenset({("a", "H100")}))
    queue = PendingQueue.of([_job("j", gpus=8), _job("k", gpus=8)])
    e = explain(scheduler, ClusterView(), queue, "k", 0)
    status = {(p.site, p.gpu_type): p.status for p in e.pools}
    assert status == {("a", "H100"): "closed", ("b", "H100"): "up"}
    assert "a is taking no new work" in e.summary
