from onecluster.model import Fabric, JobSpec, PriorityClass, SitePart
from onecluster.scheduler import (
    Allocation,
    AllocationLedger,
    ClusterView,
    PendingJob,
    PendingQueue,
    Scheduler,
)


def pj(job_id: str, team: str, gpus: int = 1, at: float = 0, **kw: object) -> PendingJob:
    spec = JobSpec(team=team, gpus=gpus, duration_s=3600, gpu_types=("H100",), **kw)  # type: ignore[arg-type]
    return PendingJob(job_id=job_id, spec=spec, submitted_at=at)


def test_beyond_quota_runs_borrowed_and_preemptible(small: Fabric) -> None:
    q = PendingQueue.of([pj(f"j{i}", "t1", at=i) for i in range(12)])
    plan = Scheduler(small).plan(ClusterView(), q, 0)
    assert len(plan.starts) == 12
    nominal = [s for s in plan.starts if not s.borrowed]
    borrowed = [s for s in plan.starts if s.borrowed]
    assert len(nominal) == 8
    assert len(borrowed) == 4
    assert all(s.preemptible for s in borrowed)
    assert not any(s.preemptible for s in nominal)


def test_owner_reclaims_borrowed_gpus_by_preemption(small: Fabric) -> None:
    # t1 borrowed all 8 GPUs of b (t2's home); t2 now wants 4 within its quota.
    ledger = AllocationLedger.of(
        Allocation(
            job_id=f"b{i}",
            team="t1",
            parts=(SitePart(site="b", gpu_type="H100", gpus=1),),
            borrowed=True,
            preemptible=True,
            started_at=float(i),
            expected_end=10_000,
        )
        for i in range(8)
    )
    ledger.add(
        Allocation(
            job_id="a0",
            team="t1",
            parts=(SitePart(site="a", gpu_type="H100", gpus=8),),
            expected_end=10_000,
        )
    )
    q = PendingQueue.of([pj("own", "t2", gpus=4)])
    plan = Scheduler(small).plan(ClusterView(running=ledger), q, 100)
    assert plan.starts == ()
    victims = {p.job_id for p in plan.preemptions}
    # The most recently started borrowed jobs go first (least work lost).
    assert victims == {"b7", "b6", "b5", "b4"}
    assert all(p.for_job_id == "own" for p in plan.preemptions)
    # Once they have drained away, the owner starts at b, in quota.
    for v in victims:
        ledger.remove(v)
    plan = Scheduler(small).plan(ClusterView(running=ledger), q, 200)
    assert [(s.job_id, s.parts[0].site, s.borrowed) for s in plan.starts] == [("own", "b", False)]


def test_draining_gpus_are_claimed_not_preempted_twice(small: Fabric) -> None:
    ledger = AllocationLedger.of(
        Allocation(
            job_id=f"b{i}",
            team="t1",
            parts=(SitePart(site="b", gpu_type="H100", gpus=4),),
            borrowed=True,
            preemptible=True,
            draining=(i == 0),
        )
        for i in range(2)
    )
    ledger.add(
        Allocation(job_id="a0", team="t1", parts=(SitePart(site="a", gpu_type="H100", gpus=8),))
    )
    plan = Scheduler(small).plan(
        ClusterView(running=ledger), PendingQueue.of([pj("own", "t2", gpus=4)]), 0
    )
    assert plan.preemptions == ()
    assert plan.stats.waiting_on_preemption == 1


def test_in_quota_work_is_never_preempted(small: Fabric) -> None:
    ledger = AllocationLedger.of(
        [
            Allocation(
                job_id="a0", team="t1", parts=(SitePart(site="a", gpu_type="H100", gpus=8),)
            ),
            Allocation(
                job_id="b0", team="t2", parts=(SitePart(site="b", gpu_type="H100", gpus=8),)
            ),
        ]
    )
    plan = Scheduler(small).plan(
        ClusterView(running=ledger),
        PendingQueue.of([pj("hi", "t1", priority=PriorityClass.CRITICAL)]),
        0,
    )
    assert plan.starts == ()
    assert plan.preemptions == ()


def test_higher_priority_preempts_preemptible_lower_priority(small: Fabric) -> None:
    # b is full: t1's pre-emptible normal-priority job (in t1's quota) and t2's own job.
    ledger = AllocationLedger.of(
        [
            Allocation(
                job_id="a0", team="t1", parts=(SitePart(site="a", gpu_type="H100", gpus=4),)
            ),
            Allocation(
                job_id="pre",
                team="t1",
                parts=(SitePart(site="b", gpu_type="H100", gpus=4),),
                priority=PriorityClass.NORMAL,
                preemptible=True,
            ),
            Allocation(
                job_id="mine", team="t2", parts=(SitePart(site="b", gpu_type="H100", gpus=4),)
            ),
        ]
    )
    view = ClusterView(running=ledger, down_sites=frozenset({"a", "c"}))
    normal = Scheduler(small).plan(view, PendingQueue.of([pj("n", "t2", gpus=4)]), 0)
    assert normal.preemptions == ()  # same-or-lower priority never preempts in-quota work
    high = Scheduler(small).plan(
        view, PendingQueue.of([pj("h", "t2", gpus=4, priority=PriorityClass.HIGH)]), 0
    )
    assert [(p.job_id, p.for_job_id) for p in high.preemptions] == [("pre", "h")]


def test_weighted_fair_share_between_teams(small: Fabric) -> None:
    # Only c (4 × L40S) is up; t3 has weight 3, t1 weight 1 and t1 has no L40S quota.
    # Nobody borrows before in-quota work, so t3's jobs come first.
    jobs = [
        PendingJob(job_id=f"{t}-{i}", spec=JobSpec(team=t, gpus=1, duration_s=60), submitted_at=i)
        for i in range(4)
        for t in ("t1", "t3")
    ]
    plan = Scheduler(small).plan(
        ClusterView(down_sites=frozenset({"a", "b"})), PendingQueue.of(jobs), 0
    )
    assert sorted(s.job_id for s in plan.starts) == ["t3-0", "t3-1", "t3-2", "t3-3"]


def test_fair_share_interleaves_equal_teams(small: Fabric) -> None:
    # Both teams beyond quota on b only: borrowed work is shared by weight (1:1).
    ledger = AllocationLedger.of(
        [
            Allocation(
                job_id="a0", team="t1", parts=(SitePart(site="a", gpu_type="H100", gpus=8),)
            ),
            Allocation(
                job_id="c0", team="t3", parts=(SitePart(site="c", gpu_type="L40S", gpus=4),)
            ),
        ]
    )
    jobs = [pj(f"t1-{i}", "t1", at=i) for i in range(8)] + [
        PendingJob(
            job_id=f"t3-{i}",
            spec=JobSpec(team="t3", gpus=1, duration_s=60, gpu_types=("H100",)),
            submitted_at=i,
        )
        for i in range(8)
    ]
    plan = Scheduler(small).plan(
        ClusterView(running=ledger, down_sites=frozenset()), PendingQueue.of(jobs), 0
    )
    started = [s.job_id for s in plan.starts]
    assert len(started) == 8
    # t3 holds 4 GPUs with weight 3; t1 holds 8 with weight 1, so t3 is further below its
    # share and gets most of b.
    assert sum(1 for j in started if j.startswith("t3")) > sum(
        1 for j in started if j.startswith("t1")
    )


def test_in_quota_work_of_any_priority_goes_before_borrowed_work(small: Fabric) -> None:
    # A high-priority job that can only borrow must not take GPUs an owner is waiting for:
    # the owner would preempt it on the next pass, and the two would swap forever.
    borrower = PendingJob(
        job_id="borrower",
        spec=JobSpec(
            team="t3", gpus=8, duration_s=60, gpu_types=("H100",), priority=PriorityClass.HIGH
        ),
        submitted_at=0,
    )
    owner = pj("owner", "t1", gpus=8, at=1, priority=PriorityClass.LOW)
    view = ClusterView(down_sites=frozenset({"b", "c"}))
    plan = Scheduler(small).plan(view, PendingQueue.of([borrower, owner]), 0)
    assert [(s.job_id, s.borrowed) for s in plan.starts] == [("owner", False)]
