"""Jobs through the store: submit, list, place, preempt, cancel; nothing is ever lost."""

from __future__ import annotations

import pytest

from onecluster.errors import ConflictError, NotFoundError
from onecluster.model import AttemptState, JobSpec, JobState, PriorityClass, SitePart
from onecluster.store import AgentReport, PlacedPart, PreemptOrder, StartOrder, Store, SyncReport


def spec(team: str = "llm", gpus: int = 8, **kw: object) -> JobSpec:
    return JobSpec(team=team, gpus=gpus, duration_s=600.0, command=("true",), **kw)  # type: ignore[arg-type]


def place(store: Store, job_id: str, *parts: PlacedPart, now: float = 10.0) -> None:
    assert store.apply_plan([StartOrder(job_id=job_id, parts=parts)], [], now=now) == (1, 0)


H100 = PlacedPart(site="tokyo", gpu_type="H100", gpus=8, cost_per_gpu_hour=2.0)


def test_a_submitted_job_round_trips_with_its_spec(store: Store) -> None:
    s = spec(
        name="train",
        gpu_types=("H100",),
        priority=PriorityClass.HIGH,
        dataset="d1",
        dataset_bytes=5,
        preemptible=True,
        max_sites=2,
    )
    job = store.add_job(s, now=5.0)
    again = store.job(job.id)
    assert again == job
    assert again.spec() == s
    assert again.state is JobState.PENDING
    assert again.submitted_at == 5.0
    assert again.parts == ()


def test_unknown_job_is_not_found(store: Store) -> None:
    with pytest.raises(NotFoundError, match="no job j-nope"):
        store.job("j-nope")


def test_listing_filters_by_state_team_and_site_newest_first(store: Store) -> None:
    a = store.add_job(spec("llm"), now=1.0)
    b = store.add_job(spec("vision"), now=2.0)
    c = store.add_job(spec("llm"), now=3.0)
    place(store, a.id, H100)
    assert [j.id for j in store.jobs()] == [c.id, b.id, a.id]
    assert [j.id for j in store.jobs(team="llm")] == [c.id, a.id]
    assert [j.id for j in store.jobs(state="running")] == [a.id]
    assert [j.id for j in store.jobs(site="tokyo")] == [a.id]
    assert [j.id for j in store.jobs(limit=1, offset=1)] == [b.id]
    assert [j.id for j in store.pending_jobs()] == [b.id, c.id]


def test_placing_creates_one_starting_attempt_per_part(store: Store) -> None:
    job = store.add_job(spec(gpus=12, max_sites=2), now=1.0)
    other = PlacedPart(site="singapore", gpu_type="H100", gpus=4, cost_per_gpu_hour=1.0)
    place(store, job.id, H100, other, now=4.0)
    placed = store.job(job.id)
    assert placed.state is JobState.RUNNING
    assert placed.attempts == 1
    assert placed.started_at == 4.0
    assert set(placed.parts) == {
        SitePart(site="tokyo", gpu_type="H100", gpus=8),
        SitePart(site="singapore", gpu_type="H100", gpus=4),
    }
    attempts = store.attempts(job.id)
    assert [a.state for a in attempts] == [AttemptState.STARTING] * 2
    assert {a.site for a in attempts} == {"tokyo", "singapore"}
    assert all(a.waited_s == 3.0 for a in attempts)
    running = store.running_jobs()
    assert [(j.id, len(a)) for j, a in running] == [(job.id, 2)]


def test_a_start_for_a_job_no_longer_pending_is_skipped(store: Store) -> None:
    job = store.add_job(spec(), now=1.0)
    store.cancel_job(job.id, now=2.0)
    assert store.apply_plan([StartOrder(job_id=job.id, parts=(H100,))], [], now=3.0) == (0, 0)
    assert store.attempts(job.id) == []


def test_cancelling_a_pending_job_ends_it_at_once(store: Store) -> None:
    job = store.add_job(spec(), now=1.0)
    cancelled = store.cancel_job(job.id, now=2.0)
    assert cancelled.state is JobState.CANCELLED
    assert cancelled.finished_at == 2.0
    with pytest.raises(ConflictError, match="already ended"):
        store.cancel_job(job.id, now=3.0)


def test_cancelling_a_job_whose_attempt_never_ran_waits_for_its_agent(store: Store) -> None:
    # The agent may have started the attempt since its last sync: the GPUs are free only
    # once it says so — that it exited, or that it does not hold it (lost).
    job = store.add_job(spec(), now=1.0)
    place(store, job.id, H100)
    [attempt] = store.attempts(job.id)
    assert store.cancel_job(job.id, now=11.0).state is JobState.CANCELLING
    assert store.attempts(job.id)[0].state is AttemptState.STOPPING
    store.sync("tokyo", SyncReport(agent_id="a1", capacity={"H100": 16}), now=12.0)
    assert store.job(job.id).state is JobState.CANCELLING  # silence says nothing
    gone = AgentReport(attempt_id=attempt.id, state="lost")
    store.sync("tokyo", SyncReport(agent_id="a1", attempts=(gone,)), now=13.0)
    assert store.job(job.id).state is JobState.CANCELLED


def test_preempting_a_starting_job_requeues_it_with_its_id_and_submission_time(
    store: Store,
) -> None:
    job = store.add_job(spec(), now=1.0)
    place(store, job.id, H100)
    assert store.apply_plan([], [PreemptOrder(job_id=job.id, reason="for j-x")], now=20.0) == (0, 1)
    assert store.job(job.id).state is JobState.PREEMPTING  # until the agent has had its say
    [attempt] = store.attempts(job.id)
    never = AgentReport(attempt_id=attempt.id, state="lost")  # it never started it
    wanted = store.sync("tokyo", SyncReport(agent_id="a1", attempts=(never,)), now=21.0)
    assert wanted == []  # so there is nothing to stop
    back = store.job(job.id)
    assert back.state is JobState.PENDING
    assert back.preemptions == 1
    assert back.submitted_at == 1.0
    assert back.parts == ()
    place(store, job.id, H100, now=30.0)
    again = store.job(job.id)
    assert again.attempts == 2
    assert [a.run for a in store.attempts(job.id)] == [1, 2]
    assert store.attempts(job.id)[1].waited_s == 9.0


def test_counts_waits_and_events_follow_the_jobs(store: Store) -> None:
    a = store.add_job(spec(), now=1.0)
    store.add_job(spec(), now=2.0)
    place(store, a.id, H100, now=5.0)
    counts = store.job_counts()
    assert counts[JobState.PENDING] == 1
    assert counts[JobState.RUNNING] == 1
    assert counts[JobState.FAILED] == 0
    assert store.waits() == [4.0]
    assert store.pending_by_team() == {"llm": 1}
    kinds = [e.kind for e in store.events(job_id=a.id)]
    assert kinds == ["submitted", "started"]


def test_tokens_are_found_by_hash_until_revoked(store: Store) -> None:
    assert not store.has_admin_token()
    tok = store.add_token(role="admin", sha256="ab" * 32, now=1.0)
    assert store.has_admin_token()
    assert store.token("ab" * 32) == tok
    assert store.token("cd" * 32) is None
    store.revoke_token(tok.id)
    assert store.token("ab" * 32) is None
    assert not store.has_admin_token()


def test_an_attempt_its_agent_never_starts_is_given_back(store: Store) -> None:
    from onecluster.store._sync import START_TIMEOUT_S

    job = store.add_job(spec(), now=1.0)
    place(store, job.id, H100)
    quiet = SyncReport(agent_id="a1", capacity={"H100": 4})  # the agent cannot start 8
    store.sync("tokyo", quiet, now=20.0)
    assert store.job(job.id).state is JobState.RUNNING
    store.sync("tokyo", quiet, now=10.0 + START_TIMEOUT_S + 1)
    back = store.job(job.id)
    assert back.state is JobState.PENDING
    assert "lost" in (back.reason or "")
