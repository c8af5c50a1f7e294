import pytest

from onecluster.errors import ImpossibleJobError
from onecluster.model import Fabric, JobSpec, SitePart
from onecluster.scheduler import (
    Allocation,
    ClusterView,
    PendingJob,
    PendingQueue,
    PolicyConfig,
    Scheduler,
)

TB = 10**12


def job(job_id: str, team: str = "t1", gpus: int = 1, at: float = 0.0, **kw: object) -> PendingJob:
    spec = JobSpec(team=team, gpus=gpus, duration_s=kw.pop("duration_s", 3600.0), **kw)  # type: ignore[arg-type]
    return PendingJob(job_id=job_id, spec=spec, submitted_at=at)


def sites_of(plan_starts: object) -> dict[str, tuple[str, ...]]:
    return {s.job_id: tuple(p.site for p in s.parts) for s in plan_starts}  # type: ignore[attr-defined]


def test_cheaper_site_wins_without_data(small: Fabric) -> None:
    plan = Scheduler(small).plan(ClusterView(), PendingQueue.of([job("j", gpu_types=("H100",))]), 0)
    assert sites_of(plan.starts) == {"j": ("a",)}


def test_data_locality_beats_price(small: Fabric) -> None:
    view = ClusterView(replicas={"corpus": frozenset({"b"})})
    q = PendingQueue.of([job("j", gpu_types=("H100",), dataset="corpus", dataset_bytes=TB)])
    plan = Scheduler(small).plan(view, q, 0)
    assert sites_of(plan.starts) == {"j": ("b",)}
    assert plan.starts[0].missing_bytes == 0


def test_missing_data_is_priced_by_free_circuit_capacity(small: Fabric) -> None:
    # The data is at c.  a is cheaper, but both ways into a (direct, or relayed via b) are
    # 90% busy, so staging there takes ten times longer.
    view = ClusterView(replicas={"corpus": frozenset({"c"})}, circuit_load={"a-c": 0.9, "a-b": 0.9})
    q = PendingQueue.of([job("j", gpu_types=("H100",), dataset="corpus", dataset_bytes=TB)])
    start = Scheduler(small).plan(view, q, 0).starts[0]
    assert start.parts[0].site == "b"
    assert start.missing_bytes == TB
    assert start.staging_s == pytest.approx(TB / (1e9 / 8))


def test_relay_path_counts_when_the_direct_circuit_is_busy(small: Fabric) -> None:
    # Only a-c is busy: the data reaches a at full rate relayed through b, and a is cheaper.
    view = ClusterView(replicas={"corpus": frozenset({"c"})}, circuit_load={"a-c": 0.9})
    q = PendingQueue.of([job("j", gpu_types=("H100",), dataset="corpus", dataset_bytes=TB)])
    start = Scheduler(small).plan(view, q, 0).starts[0]
    assert start.parts[0].site == "a"
    assert start.staging_s == pytest.approx(TB / (1e9 / 8))


def test_gang_stays_in_one_site_unless_it_asks(small: Fabric) -> None:
    sched = Scheduler(small)
    with pytest.raises(ImpossibleJobError, match="at most 8 H100 GPUs fit in one site"):
        sched.admit(JobSpec(team="t1", gpus=12, duration_s=1, gpu_types=("H100",)))
    spec = JobSpec(team="t1", gpus=12, duration_s=1, gpu_types=("H100",), max_sites=2)
    sched.admit(spec)
    plan = sched.plan(
        ClusterView(), PendingQueue.of([PendingJob(job_id="g", spec=spec, submitted_at=0)]), 0
    )
    parts = plan.starts[0].parts
    assert sum(p.gpus for p in parts) == 12
    assert {p.site for p in parts} == {"a", "b"}


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (JobSpec(team="nobody", gpus=1, duration_s=1), "team 'nobody' is not in the fabric"),
        (
            JobSpec(team="t1", gpus=1, duration_s=1, gpu_types=("TPU",)),
            "GPU type 'TPU' exists at no site",
        ),
        (JobSpec(team="t1", gpus=99, duration_s=1), "asks for 99 GPUs"),
    ],
)
def test_impossible_jobs_are_refused_with_the_reason(
    small: Fabric, spec: JobSpec, words: str
) -> None:
    with pytest.raises(ImpossibleJobError, match=words):
        Scheduler(small).admit(spec)


def test_down_site_gets_nothing(small: Fabric) -> None:
    q = PendingQueue.of([job("j", gpu_types=("H100",))])
    plan = Scheduler(small).plan(ClusterView(down_sites=frozenset({"a"})), q, 0)
    assert sites_of(plan.starts) == {"j": ("b",)}


def test_pinned_job_runs_only_at_its_site(small: Fabric) -> None:
    pj = PendingJob(
        job_id="p", spec=JobSpec(team="t1", gpus=1, duration_s=1), submitted_at=0, pinned_site="c"
    )
    plan = Scheduler(small).plan(ClusterView(), PendingQueue.of([pj]), 0)
    assert plan.starts[0].parts == (SitePart(site="c", gpu_type="L40S", gpus=1),)


def test_separate_keeps_jobs_at_home(small: Fabric) -> None:
    busy = Allocation(
        job_id="x",
        team="t1",
        parts=(SitePart(site="a", gpu_type="H100", gpus=8),),
        expected_end=100,
    )
    q = PendingQueue.of([job("j", gpu_types=("H100",))])
    sep = Scheduler(small, PolicyConfig(kind="separate")).plan(ClusterView(running=(busy,)), q, 0)
    uni = Scheduler(small).plan(ClusterView(running=(busy,)), q, 0)
    assert sep.starts == ()
    assert sites_of(uni.starts) == {"j": ("b",)}


def test_fifo_head_blocks_and_unified_backfills(small: Fabric) -> None:
    busy = Allocation(
        job_id="x",
        team="t1",
        parts=(SitePart(site="a", gpu_type="H100", gpus=6),),
        expected_end=100,
    )
    down = frozenset({"b", "c"})
    q = PendingQueue.of([job("big", gpus=8, at=0), job("small", gpus=1, at=1, duration_s=50)])
    fifo = Scheduler(small, PolicyConfig(kind="fifo")).plan(
        ClusterView(running=(busy,), down_sites=down), q, 0
    )
    uni = Scheduler(small).plan(ClusterView(running=(busy,), down_sites=down), q, 0)
    assert fifo.starts == ()
    assert sites_of(uni.starts) == {"small": ("a",)}


def test_backfill_never_delays_the_reserved_job(small: Fabric) -> None:
    # a: 6 of 8 busy until t=100.  big (8) is blocked and reserves a; at t=100 it can start.
    busy = Allocation(
        job_id="x",
        team="t1",
        parts=(SitePart(site="a", gpu_type="H100", gpus=6),),
        expected_end=100,
    )
    view = ClusterView(running=(busy,), down_sites=frozenset({"b", "c"}))
    q = PendingQueue.of(
        [
            job("big", gpus=8, at=0),
            job("long", gpus=2, at=1, duration_s=500),  # would still run at t=100: held back
            job("short", gpus=2, at=2, duration_s=50),  # ends before t=100: backfills
        ]
    )
    plan = Scheduler(small).plan(view, q, 0)
    assert sites_of(plan.starts) == {"short": ("a",)}


def test_blocked_job_reserves_where_it_starts_soonest(small: Fabric) -> None:
    # a frees up at t=100, b (more GPUs free right now) only at t=1000: the big job's place
    # is held at a, so a long small job must go to b even though a is cheaper.
    running = (
        Allocation(
            job_id="xa",
            team="t1",
            parts=(SitePart(site="a", gpu_type="H100", gpus=6),),
            expected_end=100,
        ),
        Allocation(
            job_id="xb",
            team="t2",
            parts=(SitePart(site="b", gpu_type="H100", gpus=5),),
            expected_end=1000,
        ),
    )
    view = ClusterView(running=running, down_sites=frozenset({"c"}))
    q = PendingQueue.of([job("big", gpus=8, at=0), job("long", gpus=2, at=1, duration_s=500)])
    plan = Scheduler(small).plan(view, q, 0)
    assert sites_of(plan.starts) == {"long": ("b",)}
    assert plan.stats.reservations == 1


def test_reported_capacity_below_the_fabric_is_respected(small: Fabric) -> None:
    # a's agent reports only 2 of its 8 H100: a 4-GPU job must go to b despite the price.
    view = ClusterView(capacity={("a", "H100"): 2}, down_sites=frozenset({"c"}))
    plan = Scheduler(small).plan(view, PendingQueue.of([job("j", gpus=4)]), 0)
    assert sites_of(plan.starts) == {"j": ("b",)}
