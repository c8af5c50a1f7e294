"""``explain``: why a pending job waits, on small fabrics (``conftest.SMALL``: sites a and b
with 8 H100 each, c with 4 L40S; teams t1 at a, t2 at b with 8 H100 each, t3 at c)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onecluster.errors import NotFoundError
from onecluster.fabric import parse_fabric
from onecluster.model import Fabric, JobSpec, PriorityClass, SitePart
from onecluster.scheduler import (
    Allocation,
    AllocationLedger,
    ClusterView,
    PendingJob,
    PendingQueue,
    PolicyConfig,
    Scheduler,
    explain,
)
from onecluster.scheduler._replay import replay

TAU = 7 * 86400.0 / math.log(2)  # the default fair share's mean life


def pj(job_id: str, team: str, gpus: int = 8, at: float = 0, **kw: object) -> PendingJob:
    types = kw.pop("gpu_types", ("H100",))
    spec = JobSpec(team=team, gpus=gpus, duration_s=3600, gpu_types=types, **kw)  # type: ignore[arg-type]
    return PendingJob(job_id=job_id, spec=spec, submitted_at=at)


def held(job_id: str, team: str, site: str, gpus: int, end: float, **kw: object) -> Allocation:
    return Allocation(
        job_id=job_id,
        team=team,
        parts=(SitePart(site=site, gpu_type="L40S" if site == "c" else "H100", gpus=gpus),),
        expected_end=end,
        **kw,  # type: ignore[arg-type]
    )


def busy_world() -> tuple[ClusterView, PendingQueue]:
    """a full until 1000 (t1), b has 2 of 8 free until 2000 (t2); t1 used much lately.
    Queued: a high-class L40S job, two t2 jobs and t1's ``mine``."""
    ledger = AllocationLedger.of(
        [held("r-a", "t1", "a", 8, end=1000), held("r-b", "t2", "b", 6, end=2000)]
    )
    view = ClusterView(running=ledger, usage={"t1": 100 * TAU})
    queue = PendingQueue.of(
        [
            pj("hi", "t3", gpus=4, at=5, gpu_types=("L40S",), priority=PriorityClass.HIGH),
            pj("j1", "t2", at=10),
            pj("j2", "t2", at=20),
            pj("mine", "t1", at=30),
        ]
    )
    return view, queue


def test_rank_teams_ahead_and_fair_share_factors(small: Fabric) -> None:
    view, queue = busy_world()
    sched = Scheduler(small)
    e = explain(sched, view, queue, "mine", 100)
    assert (e.team, e.gpus, e.priority_class, e.pending) == ("t1", 8, PriorityClass.NORMAL, 4)
    assert (e.ahead_higher_class, e.ahead_same_class, e.ahead) == (1, 2, 3)
    [t2] = e.teams_ahead
    assert (t2.team, t2.jobs, t2.gpus) == ("t2", 2, 16)
    # t1's usage: 100 GPUs on average lately plus the 8 it holds; weights 1 of 5 (t3 has 3).
    assert e.usage_gpus == pytest.approx(108)
    assert e.weight == 1
    assert e.fair_factor == pytest.approx(2 ** (-(108 / 114) / (1 / 5)))
    assert e.age_factor == pytest.approx(70 / (7 * 86400))
    assert e.priority == pytest.approx(10_000 * e.fair_factor + 1_000 * e.age_factor)
    assert t2.priority > e.priority
    assert e.summary.startswith(
        f"waits behind 3 jobs of higher priority (1 of a higher class; "
        f"team t2 {t2.priority:.0f} vs yours {e.priority:.3g})"
    )
    assert "needs 8 H100 — at most 2 free at any site" in e.summary


def test_guarantee_terms_and_the_reservations_named(small: Fabric) -> None:
    view, queue = busy_world()
    e = explain(Scheduler(small), view, queue, "mine", 100)
    [g] = e.guarantee
    assert (g.gpu_type, g.site, g.gpus, g.used, g.borrowed) == ("H100", None, 8, 8, 0)
    pools = {p.site: p for p in e.pools}
    assert set(pools) == {"a", "b"}  # c has no H100
    assert (pools["a"].terms, pools["b"].terms) == ("home", "borrowed")
    assert (pools["a"].free, pools["b"].free, pools["b"].gpus) == (0, 2, 8)
    # t2's j1 goes first, blocked: it holds a, where GPUs free soonest; ``mine`` holds b.
    assert pools["a"].reserved is not None and pools["b"].reserved is not None
    assert (pools["a"].reserved.job_id, pools["a"].reserved.start_at) == ("j1", 1000)
    assert (pools["b"].reserved.job_id, pools["b"].reserved.start_at) == ("mine", 2000)
    assert (e.verdict, e.expected_start_at) == ("reserved", 2000)
    assert e.reservations == (SitePart(site="b", gpu_type="H100", gpus=8),)
    assert "beyond its guarantee (8/8 H100 of its guarantee in use)" in e.summary
    assert "the next 8 H100 at b to free are reserved for it (expected in 32 min)" in e.summary


def test_a_job_behind_its_teams_blocked_twin_is_not_tried(small: Fabric) -> None:
    view, queue = busy_world()
    first = explain(Scheduler(small), view, queue, "j1", 100)
    assert (first.verdict, first.expected_start_at) == ("reserved", 1000)
    assert first.reservations == (SitePart(site="a", gpu_type="H100", gpus=8),)
    assert first.ahead == 1  # only the high-class job
    twin = explain(Scheduler(small), view, queue, "j2", 100)
    assert (twin.verdict, twin.behind, twin.reservations) == ("not_reached", "j1", ())
    assert (
        "needs 8 H100 — its team's older job j1 of the same shape could not be placed, so this "
        "pass tried none behind it" in twin.summary
    )


def test_a_job_that_starts_in_this_pass_says_where(small: Fabric) -> None:
    queue = PendingQueue.of([pj("first", "t1", at=0), pj("extra", "t1", gpus=4, at=1)])
    sched = Scheduler(small)
    first = explain(sched, ClusterView(), queue, "first", 10)
    assert (first.verdict, first.borrowed) == ("starts", False)
    assert first.starts == (SitePart(site="a", gpu_type="H100", gpus=8),)
    assert first.summary == "starts in this pass on 8 H100 at a"
    # Its team's guarantee is taken by the first: the second borrows b's idle GPUs.
    extra = explain(sched, ClusterView(), queue, "extra", 10)
    assert (extra.verdict, extra.borrowed) == ("starts", True)
    assert extra.summary == (
        "starts in this pass on 4 H100 at b as borrowed work (beyond its guarantee, pre-emptible)"
    )


def test_an_owner_reclaims_borrowed_gpus_within_its_guarantee(small: Fabric) -> None:
    ledger = AllocationLedger.of(
        held(f"b{i}", "t1", "b", 1, end=10_000, borrowed=True, preemptible=True, started_at=i)
        for i in range(8)
    )
    ledger.add(held("a0", "t1", "a", 8, end=10_000))
    queue = PendingQueue.of([pj("own", "t2", gpus=4)])
    e = explain(Scheduler(small), ClusterView(running=ledger), queue, "own", 100)
    assert e.verdict == "reclaims"
    assert {r.job_id for r in e.reclaims} == {"b7", "b6", "b5", "b4"}
    assert {(r.team, r.site, r.gpus) for r in e.reclaims} == {("t1", "b", 1)}
    b = next(p for p in e.pools if p.site == "b")
    assert (b.terms, b.free, b.borrowed) == ("quota", 0, 8)
    assert e.summary == (
        "first in line; within its guarantee it reclaims 4 borrowed GPUs at b "
        "(4 jobs, 30 s grace) and starts once they have stopped"
    )


def test_an_owner_reclaims_where_only_a_borrowers_reservation_holds_the_gpus(
    small: Fabric,
) -> None:
    # t1 borrows all of b until 500 and fills a until 10,000.  Its HIGH job goes first,
    # blocked beyond its guarantee, and reserves b; t2's job within its guarantee is not held
    # back by a borrower's place: it reclaims b (an outside review found owners waiting a
    # day behind borrowed work this way).
    ledger = AllocationLedger.of(
        held(f"b{i}", "t1", "b", 4, end=500, borrowed=True, preemptible=True) for i in range(2)
    )
    ledger.add(held("a0", "t1", "a", 8, end=10_000))
    queue = PendingQueue.of(
        [pj("hi", "t1", at=0, priority=PriorityClass.HIGH), pj("own", "t2", at=0)]
    )
    e = explain(Scheduler(small), ClusterView(running=ledger), queue, "own", 100)
    b = next(p for p in e.pools if p.site == "b")
    assert (b.terms, b.borrowed, b.frees_within_grace) == ("quota", 8, False)
    assert b.reserved is not None and b.reserved.job_id == "hi"
    assert e.verdict == "reclaims"
    assert {r.job_id for r in e.reclaims} == {"b0", "b1"}
    assert "within its guarantee it reclaims 8 borrowed GPUs at b" in e.summary


def test_an_owner_waits_for_gpus_that_free_within_the_grace(small: Fabric) -> None:
    ledger = AllocationLedger.of(
        held(f"b{i}", "t1", "b", 4, end=110, borrowed=True, preemptible=True) for i in range(2)
    )
    queue = PendingQueue.of([pj("own", "t2")])
    e = explain(Scheduler(small), ClusterView(running=ledger), queue, "own", 100)
    b = next(p for p in e.pools if p.site == "b")
    assert (b.terms, b.frees_within_grace) == ("quota", True)
    assert e.verdict == "starts"  # a has 8 idle GPUs and t2's guarantee holds anywhere
    full = AllocationLedger.of([*ledger, held("a0", "t1", "a", 8, end=10_000)])
    e = explain(Scheduler(small), ClusterView(running=full), queue, "own", 100)
    assert (e.verdict, e.reclaims) == ("reserved", ())
    assert (
        "within its guarantee at b, where enough GPUs free up within the 30 s grace: it waits "
        "for them rather than preempt" in e.summary
    )


def test_a_job_held_back_by_a_reservation_names_its_holder(small: Fabric) -> None:
    ledger = AllocationLedger.of(
        [held("r-a", "t1", "a", 4, end=1000), held("r-b", "t2", "b", 8, 9e3)]
    )
    queue = PendingQueue.of([pj("big", "t1", gpus=8, at=0), pj("long", "t1", gpus=4, at=1)])
    sched = Scheduler(small)
    e = explain(sched, ClusterView(running=ledger), queue, "long", 0)
    assert (e.verdict, e.held_for) == ("held_back", ("big",))
    a = next(p for p in e.pools if p.site == "a")
    assert a.reserved is not None and (a.reserved.job_id, a.reserved.gpus) == ("big", 8)
    assert (a.free, a.terms) == (4, "quota")
    assert e.summary == (
        "waits behind 1 job (1 older of its own team); needs 4 H100 — enough are free, but "
        "held for big (reserved), and it would run past its expected start"
    )


def test_staging_and_sites_that_are_down(small: Fabric) -> None:
    queue = PendingQueue.of([pj("d", "t1", gpus=16, dataset="corpus", dataset_bytes=10**9)])
    view = ClusterView(replicas={"corpus": frozenset({"a"})})
    pools = {p.site: p for p in explain(Scheduler(small), view, queue, "d", 0).pools}
    assert (pools["a"].staging_bytes, pools["a"].staging_s) == (0, 0.0)
    assert pools["b"].staging_bytes == 10**9
    assert pools["b"].staging_s is not None and pools["b"].staging_s > 0
    e = explain(Scheduler(small), replace(view, down_sites=frozenset({"b"})), queue, "d", 0)
    pools = {p.site: p for p in e.pools}
    assert (pools["a"].status, pools["b"].status) == ("up", "down")
    assert pools["b"].staging_s is None  # no path into a site that is down
    assert e.verdict == "blocked"
    assert e.summary == (
        "first in line; needs 16 H100 — at most 8 free at a; beyond its guarantee (0/8 H100 of "
        "its guarantee in use): at its home site a it reclaims GPUs from teams homed elsewhere, "
        "elsewhere it only borrows idle GPUs; b is down"
    )


def test_fifo_counts_every_job_submitted_before(small: Fabric) -> None:
    queue = PendingQueue.of(
        [
            pj("old", "t2", at=0),
            pj("urgent", "t1", at=5, priority=PriorityClass.CRITICAL),
            pj("mine", "t1", gpus=4, at=10),
        ]
    )
    full = AllocationLedger.of([held("x", "t3", "a", 8, 100), held("y", "t3", "b", 8, 100)])
    e = explain(
        Scheduler(small, PolicyConfig(kind="fifo")), ClusterView(running=full), queue, "mine", 20
    )
    assert (e.ahead_higher_class, e.ahead_same_class) == (0, 2)
    assert {p.terms for p in e.pools} == {"open"}
    assert e.guarantee == ()
    assert e.summary.startswith(
        "waits behind 2 jobs submitted before it (first come, first served)"
    )


def test_a_job_that_is_not_pending_is_named(small: Fabric) -> None:
    queue = PendingQueue.of([pj("here", "t1")])
    with pytest.raises(NotFoundError, match="job gone is not pending"):
        explain(Scheduler(small), ClusterView(), queue, "gone", 0)


# -- the replay is the pass ------------------------------------------------------------------

PROPERTY_FABRIC = parse_fabric(
    """\
sites:
  - name: a
    region: r
    jurisdiction: X
    pools: [{gpu_type: H100, count: 8}, {gpu_type: A100, count: 4}]
  - {name: b, region: r, jurisdiction: X, pools: [{gpu_type: H100, count: 6}]}
circuits:
  - {name: a-b, between: [a, b], capacity_gbps: 1, rtt_ms: 10}
teams:
  - {name: t1, home_site: a, weight: 2, quota: {H100: 6, A100: 2}}
  - {name: t2, home_site: b, quota: {H100: 4}}
""",
    source="explain-fabric",
)

specs = st.builds(
    JobSpec,
    team=st.sampled_from(["t1", "t2"]),
    gpus=st.sampled_from([1, 2, 3, 4, 6, 8]),
    duration_s=st.floats(1, 5000),
    gpu_types=st.sampled_from([(), ("H100",), ("A100",)]),
    priority=st.sampled_from(list(PriorityClass)),
    preemptible=st.booleans(),
    max_sites=st.sampled_from([1, 1, 2]),
)
running = st.builds(
    lambda team, site, gpus, end, borrowed: (team, site, gpus, end, borrowed),
    st.sampled_from(["t1", "t2"]),
    st.sampled_from(["a", "b"]),
    st.integers(1, 3),
    st.floats(1, 5000),
    st.booleans(),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    jobs=st.lists(st.tuples(specs, st.floats(0, 100)), min_size=1, max_size=8),
    allocations=st.lists(running, max_size=5),
    kind=st.sampled_from(["unified", "separate", "fifo"]),
)
def test_the_explanation_agrees_with_the_plan(
    jobs: list[tuple[JobSpec, float]],
    allocations: list[tuple[str, str, int, float, bool]],
    kind: str,
) -> None:
    sched = Scheduler(PROPERTY_FABRIC, PolicyConfig(kind=kind))  # type: ignore[arg-type]
    ledger = AllocationLedger.of(
        Allocation(
            job_id=f"r{i}",
            team=team,
            parts=(SitePart(site=site, gpu_type="H100", gpus=gpus),),
            borrowed=borrowed,
            preemptible=borrowed,
            expected_end=end,
        )
        for i, (team, site, gpus, end, borrowed) in enumerate(allocations)
    )
    queue = PendingQueue.of(
        PendingJob(job_id=f"j{i}", spec=spec, submitted_at=at) for i, (spec, at) in enumerate(jobs)
    )
    view = ClusterView(running=ledger)
    plan = sched.plan(view, queue, 200)
    traced = replay(sched, ledger, view, queue, 200, job_id="j0")
    assert traced.starts == list(plan.starts)
    assert traced.preempts == list(plan.preemptions)
    started = {s.job_id for s in plan.starts}
    reclaiming = {p.for_job_id for p in plan.preemptions}
    for job in queue:
        e = explain(sched, view, queue, job.job_id, 200)
        assert (e.verdict == "starts") == (job.job_id in started)
        assert (e.verdict == "reclaims") == (job.job_id in reclaiming)
        assert 0 <= e.ahead < len(queue)
        assert e.summary
