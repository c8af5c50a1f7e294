"""The pure settlement rules that decide what a job becomes when its attempts end."""

from __future__ import annotations

from onecluster.model import AttemptState, JobState
from onecluster.store import AttemptFacts, settle

RUNNING = AttemptFacts(site="a", state=AttemptState.RUNNING)


def exited(code: int | None, site: str = "a", at: float = 1.0) -> AttemptFacts:
    return AttemptFacts(site=site, state=AttemptState.EXITED, exit_code=code, finished_at=at)


LOST = AttemptFacts(site="b", state=AttemptState.LOST, finished_at=1.0)


def test_all_parts_exit_zero_completes_the_job() -> None:
    out = settle(JobState.RUNNING, [exited(0), exited(0, "b")])
    assert out.state is JobState.COMPLETED
    assert out.exit_code == 0


def test_a_non_zero_exit_fails_the_job_with_the_first_failing_code() -> None:
    out = settle(JobState.RUNNING, [exited(0), exited(3, "b", at=2.0), exited(9, "c", at=1.5)])
    assert out.state is JobState.FAILED
    assert out.exit_code == 9
    assert out.reason is not None
    assert "site c" in out.reason


def test_a_failed_gang_member_stops_the_rest_and_keeps_the_job_running() -> None:
    out = settle(JobState.RUNNING, [exited(1), RUNNING])
    assert out.state is None
    assert out.stop_rest is not None


def test_a_run_still_going_changes_nothing() -> None:
    assert settle(JobState.RUNNING, [RUNNING, exited(0)]) == settle(JobState.RUNNING, [RUNNING])
    assert settle(JobState.RUNNING, [RUNNING]).state is None


def test_a_preempted_job_is_requeued_whatever_its_exit_code() -> None:
    out = settle(JobState.PREEMPTING, [exited(143)])
    assert out.state is JobState.PENDING
    assert out.preempted


def test_a_lost_attempt_requeues_without_counting_a_preemption() -> None:
    out = settle(JobState.RUNNING, [exited(0), LOST])
    assert out.state is JobState.PENDING
    assert not out.preempted
    assert out.reason is not None
    assert "lost" in out.reason


def test_cancelling_ends_cancelled_once_every_attempt_ended() -> None:
    assert settle(JobState.CANCELLING, [exited(137), LOST]).state is JobState.CANCELLED
    assert settle(JobState.CANCELLING, [RUNNING]).state is None
