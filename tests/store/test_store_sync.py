"""Agent syncs through the store: exits settle jobs, lost sites requeue them, logs once."""

from __future__ import annotations

import pytest

from onecluster.errors import ConflictError
from onecluster.model import AttemptState, JobSpec, JobState
from onecluster.store import (
    DEFAULT_LEASE_S,
    AgentReport,
    DataSync,
    GangMember,
    LogChunk,
    PlacedPart,
    PreemptOrder,
    StartOrder,
    Store,
    SyncReport,
)

H100 = PlacedPart(site="tokyo", gpu_type="H100", gpus=8, cost_per_gpu_hour=3.0)


def running_job(store: Store, now: float = 0.0) -> tuple[str, str]:
    job = store.add_job(JobSpec(team="llm", gpus=8, duration_s=60.0, command=("true",)), now=now)
    store.apply_plan([StartOrder(job_id=job.id, parts=(H100,))], [], now=now)
    [attempt] = store.attempts(job.id)
    return job.id, attempt.id


def report(
    *attempts: AgentReport, logs: tuple[LogChunk, ...] = (), agent: str = "a1"
) -> SyncReport:
    return SyncReport(agent_id=agent, capacity={"H100": 16}, attempts=attempts, logs=logs)


def test_a_sync_lists_a_new_attempt_to_run_and_marks_the_site_up(store: Store) -> None:
    job_id, attempt_id = running_job(store)
    [wanted] = store.sync("tokyo", report(), now=1.0)
    assert (wanted.attempt_id, wanted.job_id, wanted.action) == (attempt_id, job_id, "run")
    assert (wanted.gpu_type, wanted.gpus, wanted.command) == ("H100", 8, ("true",))
    [site] = store.sites()
    assert (site.site, site.agent_id, site.down, dict(site.capacity)) == (
        "tokyo",
        "a1",
        False,
        {"H100": 16},
    )
    assert store.sync("singapore", report(), now=1.0) == []


def test_run_then_exit_zero_completes_the_job_and_prices_the_attempt(store: Store) -> None:
    job_id, attempt_id = running_job(store)
    store.sync("tokyo", report(AgentReport(attempt_id=attempt_id, state="running")), now=1.0)
    assert store.attempts(job_id)[0].state is AttemptState.RUNNING
    done = AgentReport(attempt_id=attempt_id, state="exited", exit_code=0)
    assert store.sync("tokyo", report(done), now=3600.0) == []
    job = store.job(job_id)
    assert (job.state, job.exit_code, job.finished_at) == (JobState.COMPLETED, 0, 3600.0)
    [attempt] = store.attempts(job_id)
    assert attempt.cost == 8 * 3.0
    # The agent repeats the exit until it is no longer listed: nothing changes.
    assert store.sync("tokyo", report(done), now=3700.0) == []
    assert store.job(job_id) == job


def test_a_non_zero_exit_fails_the_job(store: Store) -> None:
    job_id, attempt_id = running_job(store)
    store.sync(
        "tokyo", report(AgentReport(attempt_id=attempt_id, state="exited", exit_code=2)), now=5.0
    )
    job = store.job(job_id)
    assert (job.state, job.exit_code) == (JobState.FAILED, 2)


def test_preemption_stops_the_attempt_and_its_exit_requeues_the_job(store: Store) -> None:
    job_id, attempt_id = running_job(store)
    store.sync("tokyo", report(AgentReport(attempt_id=attempt_id, state="running")), now=1.0)
    store.apply_plan([], [PreemptOrder(job_id=job_id, reason="preempted for j-hi")], now=2.0)
    [stop] = store.sync(
        "tokyo", report(AgentReport(attempt_id=attempt_id, state="running")), now=3.0
    )
    assert (stop.action, stop.reason) == ("stop", "preempted for j-hi")
    assert store.job(job_id).state is JobState.PREEMPTING
    store.sync(
        "tokyo", report(AgentReport(attempt_id=attempt_id, state="exited", exit_code=143)), now=4.0
    )
    job = store.job(job_id)
    assert (job.state, job.preemptions, job.submitted_at) == (JobState.PENDING, 1, 0.0)


def test_cancel_of_a_running_job_waits_for_the_exit(store: Store) -> None:
    job_id, attempt_id = running_job(store)
    store.sync("tokyo", report(AgentReport(attempt_id=attempt_id, state="running")), now=1.0)
    assert store.cancel_job(job_id, now=2.0).state is JobState.CANCELLING
    [stop] = store.sync(
        "tokyo", report(AgentReport(attempt_id=attempt_id, state="running")), now=3.0
    )
    assert stop.action == "stop"
    store.sync(
        "tokyo", report(AgentReport(attempt_id=attempt_id, state="exited", exit_code=-15)), now=4.0
    )
    assert store.job(job_id).state is JobState.CANCELLED


def test_a_silent_site_goes_down_and_its_jobs_are_requeued(store: Store) -> None:
    job_id, attempt_id = running_job(store)
    store.sync("tokyo", report(AgentReport(attempt_id=attempt_id, state="running")), now=1.0)
    assert store.expire_sites(now=5.0) == []
    assert store.expire_sites(now=1.0 + DEFAULT_LEASE_S) == []  # the lease's last instant
    assert store.expire_sites(now=1.1 + DEFAULT_LEASE_S) == ["tokyo"]
    assert store.expire_sites(now=2.0 + DEFAULT_LEASE_S) == []
    assert store.sites()[0].down
    job = store.job(job_id)
    assert (job.state, job.preemptions) == (JobState.PENDING, 0)
    assert store.attempts(job_id)[0].state is AttemptState.LOST
    # The agent comes back still running the lost attempt: it is not listed (so it stops it).
    back = report(AgentReport(attempt_id=attempt_id, state="running"))
    assert store.sync("tokyo", back, now=3.0 + DEFAULT_LEASE_S) == []
    assert not store.sites()[0].down
    assert store.job(job_id).state is JobState.PENDING


def test_a_restarted_agent_that_lost_a_running_attempt_requeues_its_job(store: Store) -> None:
    job_id, attempt_id = running_job(store)
    store.sync("tokyo", report(AgentReport(attempt_id=attempt_id, state="running")), now=1.0)
    [order] = store.sync("tokyo", report(agent="a2"), now=2.0)
    assert (order.attempt_id, order.action, order.handed_to) == (attempt_id, "run", "a1")
    assert store.job(job_id).state is JobState.RUNNING  # a2 has not said anything of it yet
    # a2 does not hold it; once a1's lease has ended, that means the job is lost
    after = 1.5 + DEFAULT_LEASE_S
    assert store.sync("tokyo", report(lost(attempt_id), agent="a2"), now=after) == []
    assert store.job(job_id).state is JobState.PENDING
    assert store.attempts(job_id)[0].state is AttemptState.LOST


def test_a_sync_that_does_not_mention_running_work_requeues_nothing(store: Store) -> None:
    # A capacity report (a new agent id, no attempts, odd capacity) must never requeue work
    # that no agent has reported gone.
    job_id, attempt_id = running_job(store)
    store.sync("tokyo", report(AgentReport(attempt_id=attempt_id, state="running")), now=1.0)
    bare = SyncReport(agent_id="someone-else", capacity={"H100": 0})
    for now in (2.0, 3.0, 500.0):
        store.sync("tokyo", bare, now=now)
    assert store.job(job_id).state is JobState.RUNNING
    assert store.attempts(job_id)[0].state is AttemptState.RUNNING


def test_new_attempts_are_handed_to_the_agent_that_syncs_first(store: Store) -> None:
    running_job(store)
    [first] = store.sync("tokyo", report(agent="a1"), now=1.0)
    [second] = store.sync("tokyo", report(agent="a2"), now=2.0)
    assert first.handed_to == second.handed_to == "a1"


def test_a_refused_attempt_fails_its_job_with_the_agents_reason(store: Store) -> None:
    job_id, attempt_id = running_job(store)
    refused = AgentReport(attempt_id=attempt_id, state="refused", reason="it needs a command")
    assert store.sync("tokyo", report(refused), now=1.0) == []
    job = store.job(job_id)
    assert job.state is JobState.FAILED
    assert "it needs a command" in (job.reason or "")
    assert store.attempts(job_id)[0].state is AttemptState.EXITED


def test_a_site_keeps_the_lease_it_was_granted_whatever_the_setting_is_now(
    store: Store,
) -> None:
    job_id, attempt_id = running_job(store)
    store.sync("tokyo", report(AgentReport(attempt_id=attempt_id, state="running")), now=1.0)
    assert store.sites()[0].lease_s == DEFAULT_LEASE_S
    # A server restarted with --lease 10 grants 10 s from the next sync on, not before.
    assert store.expire_sites(now=20.0) == []
    assert store.job(job_id).state is JobState.RUNNING
    store.sync("tokyo", report(), now=21.0, lease_s=10.0)
    assert store.expire_sites(now=30.0) == []
    assert store.expire_sites(now=31.5) == ["tokyo"]


def lost(attempt_id: str) -> AgentReport:
    return AgentReport(attempt_id=attempt_id, state="lost")


def test_reports_from_another_site_or_of_unknown_attempts_change_nothing(store: Store) -> None:
    job_id, attempt_id = running_job(store)
    store.sync(
        "singapore",
        report(AgentReport(attempt_id=attempt_id, state="exited", exit_code=0)),
        now=1.0,
    )
    store.sync(
        "tokyo", report(AgentReport(attempt_id="j-zzz.1.0", state="exited", exit_code=0)), now=1.0
    )
    assert store.job(job_id).state is JobState.RUNNING
    assert store.attempts(job_id)[0].state is AttemptState.STARTING


def test_log_chunks_are_stored_once_and_read_from_an_offset(store: Store) -> None:
    job_id, attempt_id = running_job(store)
    running = AgentReport(attempt_id=attempt_id, state="running")
    first = LogChunk(attempt_id=attempt_id, offset=0, data="hello ")
    store.sync("tokyo", report(running, logs=(first,)), now=1.0)
    # A resent chunk and an overlapping one add only what is new.
    overlap = LogChunk(attempt_id=attempt_id, offset=3, data="lo world\n")
    store.sync("tokyo", report(running, logs=(first, overlap)), now=2.0)
    assert store.logs(job_id) == (len("hello world\n"), "hello world\n")
    assert store.logs(job_id, offset=6) == (12, "world\n")
    assert store.logs(job_id, offset=12) == (12, "")


def test_a_queued_attempt_stays_starting_and_the_job_says_why_and_when(store: Store) -> None:
    job_id, attempt_id = running_job(store)
    queued = AgentReport(
        attempt_id=attempt_id,
        state="running",
        queued=True,
        expected_start_at=900.0,
        waiting_reason="Resources",
    )
    store.sync("tokyo", report(queued), now=10.0)
    assert store.attempts(job_id)[0].state is AttemptState.STARTING
    job = store.job(job_id)
    assert job.expected_start_at == 900.0
    assert job.reason == "queued by the cluster manager at tokyo: Resources"
    # once it runs, neither is left behind
    running = AgentReport(attempt_id=attempt_id, state="running", started_at=20.0)
    store.sync("tokyo", report(running), now=30.0)
    assert store.attempts(job_id)[0].state is AttemptState.RUNNING
    job = store.job(job_id)
    assert (job.expected_start_at, job.reason) == (None, None)


def test_gpu_hours_count_when_the_cluster_manager_really_ran_the_attempt(store: Store) -> None:
    job_id, attempt_id = running_job(store, now=0.0)
    # queued under Slurm for 20 min, ran 30 min, reported 10 min after it ended
    queued = AgentReport(attempt_id=attempt_id, state="running", queued=True)
    store.sync("tokyo", report(queued), now=60.0)
    ran = AgentReport(attempt_id=attempt_id, state="running", started_at=1200.0)
    store.sync("tokyo", report(ran), now=1300.0)
    done = AgentReport(
        attempt_id=attempt_id, state="exited", exit_code=0, started_at=1200.0, finished_at=3000.0
    )
    store.sync("tokyo", report(done), now=3600.0)
    [attempt] = store.attempts(job_id)
    assert (attempt.ran_from, attempt.ran_until) == (1200.0, 3000.0)
    assert attempt.billed_span(now=9999.0) == (1200.0, 3000.0)
    assert attempt.cost == 8 * 3.0 * 0.5  # 8 GPUs for half an hour at 3.0


def test_times_from_the_cluster_manager_are_kept_inside_onecluster_own_span(
    store: Store,
) -> None:
    # a site clock 1 h ahead, or behind: never bill before the start or after now
    job_id, attempt_id = running_job(store, now=100.0)
    early = AgentReport(attempt_id=attempt_id, state="running", started_at=-3600.0)
    store.sync("tokyo", report(early), now=200.0)
    late = AgentReport(
        attempt_id=attempt_id, state="exited", exit_code=0, started_at=-3600.0, finished_at=9e9
    )
    store.sync("tokyo", report(late), now=400.0)
    [attempt] = store.attempts(job_id)
    assert (attempt.ran_from, attempt.ran_until) == (100.0, 400.0)


def test_a_site_with_a_problem_is_degraded_once_and_recovers_once(store: Store) -> None:
    problem = SyncReport(agent_id="a1", capacity={"H100": 16}, problem="Slurm does not answer")
    store.sync("tokyo", problem, now=1.0)
    store.sync("tokyo", problem, now=2.0)
    [site] = store.sites()
    assert (site.down, site.problem) == (False, "Slurm does not answer")
    store.sync("tokyo", report(), now=3.0)
    assert store.sites()[0].problem is None
    kinds = [e.kind for e in store.events(kind_prefix="site_")]
    assert kinds == ["site_up", "site_degraded", "site_recovered"]


def test_a_replacing_agent_gets_its_predecessors_work_only_when_that_lease_ends(
    store: Store,
) -> None:
    # A second (or restarted) agent of the site does not hold what the first one runs, and says
    # so; the first may still be running it until its own lease ends.
    job_id, attempt_id = running_job(store)
    store.sync("tokyo", report(AgentReport(attempt_id=attempt_id, state="running")), now=1.0)
    store.sync("tokyo", report(lost(attempt_id), agent="a2"), now=2.0)
    assert store.job(job_id).state is JobState.RUNNING
    store.sync("tokyo", report(lost(attempt_id), agent="a2"), now=1.0 + DEFAULT_LEASE_S)
    assert store.job(job_id).state is JobState.RUNNING  # the lease's last instant
    store.sync("tokyo", report(lost(attempt_id), agent="a2"), now=1.5 + DEFAULT_LEASE_S)
    assert store.job(job_id).state is JobState.PENDING


def test_a_replaced_agent_is_refused_and_changes_nothing(store: Store) -> None:
    job_id, attempt_id = running_job(store)
    store.sync("tokyo", report(AgentReport(attempt_id=attempt_id, state="running")), now=1.0)
    store.sync("tokyo", report(agent="a2"), now=2.0)
    done = AgentReport(attempt_id=attempt_id, state="exited", exit_code=0)
    with pytest.raises(ConflictError, match="was replaced"):
        store.sync("tokyo", report(done, agent="a1"), now=3.0)
    [site] = store.sites()
    assert (site.agent_id, site.last_heartbeat) == ("a2", 2.0)
    assert store.job(job_id).state is JobState.RUNNING


def test_each_attempt_of_a_gang_is_told_every_site_in_part_order_with_its_address(
    store: Store,
) -> None:
    # Tokyo is the gang's first part although it sorts after Singapore: part order is rank.
    job = store.add_job(
        JobSpec(team="llm", gpus=12, duration_s=60.0, command=("train",), max_sites=2), now=0.0
    )
    tokyo = PlacedPart(site="tokyo", gpu_type="H100", gpus=8)
    singapore = PlacedPart(site="singapore", gpu_type="H100", gpus=4)
    store.apply_plan([StartOrder(job_id=job.id, parts=(tokyo, singapore))], [], now=0.0)
    store.sync("tokyo", report(agent="a-tokyo"), now=1.0)
    store.record_data("tokyo", DataSync(address="10.0.0.7", port=7400), now=1.0)
    # Singapore's agent announces no address (no data plane yet): it is None, not left out.
    store.sync("singapore", report(agent="a-singapore"), now=1.0)
    gang = (
        GangMember(site="tokyo", address="10.0.0.7", gpus=8),
        GangMember(site="singapore", address=None, gpus=4),
    )
    [at_tokyo] = store.sync("tokyo", report(agent="a-tokyo"), now=2.0)
    [at_singapore] = store.sync("singapore", report(agent="a-singapore"), now=2.0)
    assert (at_tokyo.site, at_tokyo.gpus, at_tokyo.gang) == ("tokyo", 8, gang)
    assert (at_singapore.site, at_singapore.gpus, at_singapore.gang) == ("singapore", 4, gang)


def test_a_one_site_job_is_a_gang_of_one(store: Store) -> None:
    running_job(store)
    [wanted] = store.sync("tokyo", report(), now=1.0)
    assert wanted.gang == (GangMember(site="tokyo", address=None, gpus=8),)
