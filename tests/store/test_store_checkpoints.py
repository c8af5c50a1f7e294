"""A job's checkpoints through the store: kept with the job, told to each of its attempts, and
which attempts a preemption stopped (their work since the last checkpoint is what reports
count as lost)."""

from __future__ import annotations

from onecluster.model import AttemptState, JobSpec, JobState
from onecluster.store import AgentReport, PlacedPart, PreemptOrder, StartOrder, Store, SyncReport

TOKYO = PlacedPart(site="tokyo", gpu_type="H100", gpus=8, cost_per_gpu_hour=2.0)
SINGAPORE = PlacedPart(site="singapore", gpu_type="H100", gpus=4, cost_per_gpu_hour=1.0)


def spec(gpus: int = 8, **kw: object) -> JobSpec:
    return JobSpec(team="llm", gpus=gpus, duration_s=3600.0, command=("train",), **kw)  # type: ignore[arg-type]


def started(store: Store, job_spec: JobSpec, *parts: PlacedPart, now: float = 0.0) -> str:
    """A job placed on ``parts`` (default: tokyo) whose attempts its agents report running."""
    job = store.add_job(job_spec, now=now)
    placed = parts or (TOKYO,)
    assert store.apply_plan([StartOrder(job_id=job.id, parts=placed)], [], now=now) == (1, 0)
    for attempt in store.attempts(job.id):
        running = AgentReport(attempt_id=attempt.id, state="running")
        store.sync(
            attempt.site, SyncReport(agent_id=f"a-{attempt.site}", attempts=(running,)), now=now
        )
    return job.id


def exit_all(store: Store, job_id: str, code: int, now: float) -> None:
    for attempt in store.attempts(job_id):
        if attempt.state in (AttemptState.EXITED, AttemptState.LOST):
            continue
        done = AgentReport(attempt_id=attempt.id, state="exited", exit_code=code)
        store.sync(
            attempt.site, SyncReport(agent_id=f"a-{attempt.site}", attempts=(done,)), now=now
        )


def test_a_jobs_checkpoints_are_kept_with_it(store: Store) -> None:
    declared = spec(checkpoint_interval_s=900.5, checkpoint_on_sigterm=True)
    plain = spec()
    job, other = store.add_jobs([declared, plain], now=1.0)
    again = store.job(job.id)
    assert again == job
    assert again.spec() == declared
    assert (again.checkpoint_interval_s, again.checkpoint_on_sigterm) == (900.5, True)
    assert store.job(other.id).spec() == plain
    assert (store.job(other.id).checkpoint_interval_s, other.checkpoint_on_sigterm) == (None, False)
    assert {j.id: j.spec() for j in store.pending_jobs()} == {job.id: declared, other.id: plain}


def test_every_attempt_of_a_run_is_told_its_jobs_checkpoint_interval(store: Store) -> None:
    gang = store.add_job(spec(gpus=12, max_sites=2, checkpoint_interval_s=600.0), now=0.0)
    store.apply_plan([StartOrder(job_id=gang.id, parts=(TOKYO, SINGAPORE))], [], now=0.0)
    [at_tokyo] = store.sync("tokyo", SyncReport(agent_id="a-tokyo"), now=1.0)
    [at_singapore] = store.sync("singapore", SyncReport(agent_id="a-singapore"), now=1.0)
    assert at_tokyo.checkpoint_interval_s == at_singapore.checkpoint_interval_s == 600.0
    plain = store.add_job(spec(checkpoint_on_sigterm=True), now=2.0)
    store.apply_plan([StartOrder(job_id=plain.id, parts=(TOKYO,))], [], now=2.0)
    wanted = store.sync("tokyo", SyncReport(agent_id="a-tokyo"), now=3.0)
    assert {w.job_id: w.checkpoint_interval_s for w in wanted} == {gang.id: 600.0, plain.id: None}


def test_only_the_attempts_a_preemption_stopped_are_preempted(store: Store) -> None:
    victim = started(store, spec(checkpoint_interval_s=600.0), now=0.0)
    store.apply_plan([], [PreemptOrder(job_id=victim, reason="for j-hi")], now=100.0)
    exit_all(store, victim, 143, now=101.0)
    assert store.job(victim).state is JobState.PENDING
    # Its next run was not preempted (yet).
    store.apply_plan([StartOrder(job_id=victim, parts=(TOKYO,))], [], now=200.0)
    assert [(a.run, a.preempted) for a in store.attempts(victim)] == [(1, True), (2, False)]

    cancelled = started(store, spec(), now=0.0)
    store.cancel_job(cancelled, now=50.0)
    exit_all(store, cancelled, -15, now=51.0)
    assert store.job(cancelled).state is JobState.CANCELLED
    assert [a.preempted for a in store.attempts(cancelled)] == [False]

    # A gang whose member failed stops the rest: a break, not a preemption.
    broken = started(store, spec(gpus=12, max_sites=2), TOKYO, SINGAPORE, now=0.0)
    first = store.attempts(broken)[0]
    failed = AgentReport(attempt_id=first.id, state="exited", exit_code=1)
    store.sync(first.site, SyncReport(agent_id=f"a-{first.site}", attempts=(failed,)), now=60.0)
    assert store.attempts(broken)[1].state is AttemptState.STOPPING
    exit_all(store, broken, -15, now=61.0)
    assert [a.preempted for a in store.attempts(broken)] == [False, False]


def test_usage_gives_each_attempt_with_its_job_and_its_checkpoints(store: Store) -> None:
    victim = started(store, spec(checkpoint_interval_s=600.0), now=0.0)
    store.apply_plan([], [PreemptOrder(job_id=victim, reason="for j-hi")], now=1000.0)
    exit_all(store, victim, 143, now=1000.0)
    other = started(store, spec(checkpoint_on_sigterm=True), now=500.0)
    used = store.usage(0.0, 2000.0)
    assert [(a.job_id, a.preempted, j.id) for a, j in used] == [
        (victim, True, victim),
        (other, False, other),
    ]
    (_, job), (_, other_job) = used
    assert job.spec().kept_after(1000.0) == 600.0
    assert other_job.spec().kept_after(1000.0) == 1000.0
