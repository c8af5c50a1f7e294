"""The rules that settle a job from the states of its current run's attempts (pure).

A run is one attempt per site part.  While any attempt of the run still holds GPUs, the job
keeps its state, except that a gang whose member failed or was lost is told to stop the rest.
Once every attempt has ended the job moves on:

* cancelling → cancelled;
* preempting → pending (requeued, keeps its id and ``submitted_at``, one more preemption);
* an attempt lost with its site → pending (requeued, never lost);
* every attempt exited 0 → completed; otherwise → failed with the first non-zero exit code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onecluster.model import ACTIVE_ATTEMPT_STATES, AttemptState, JobState

__all__ = ["AttemptFacts", "Settlement", "settle"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptFacts:
    """What :func:`settle` needs to know about one attempt."""

    site: str
    state: AttemptState
    exit_code: int | None = None
    finished_at: float | None = None
    #: Why it was stopped or refused, if anyone said.
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Settlement:
    """The outcome: ``state`` is ``None`` while the run is still on; ``stop_rest`` says
    why to stop the attempts still running (a gang member failed or was lost)."""

    state: JobState | None = None
    exit_code: int | None = None
    reason: str | None = None
    preempted: bool = False
    stop_rest: str | None = None


def settle(job_state: JobState, run: Sequence[AttemptFacts]) -> Settlement:
    """Settle a job in ``job_state`` whose current run's attempts are ``run``."""
    ended = sorted(
        (a for a in run if a.state not in ACTIVE_ATTEMPT_STATES),
        key=lambda a: a.finished_at or 0.0,
    )
    broken = [a for a in ended if a.state is AttemptState.LOST or a.exit_code != 0]
    if any(a.state in ACTIVE_ATTEMPT_STATES for a in run):
        if job_state is JobState.RUNNING and broken:
            return Settlement(stop_rest=_why_broken(broken[0]))
        return Settlement()
    if job_state is JobState.CANCELLING:
        return Settlement(state=JobState.CANCELLED, reason="cancelled")
    if job_state is JobState.PREEMPTING:
        return Settlement(state=JobState.PENDING, preempted=True)
    lost = [a for a in ended if a.state is AttemptState.LOST]
    if lost:
        return Settlement(state=JobState.PENDING, reason=_why_broken(lost[0]))
    if not broken:
        return Settlement(state=JobState.COMPLETED, exit_code=0)
    first = broken[0]
    return Settlement(state=JobState.FAILED, exit_code=first.exit_code, reason=_why_broken(first))


def _why_broken(attempt: AttemptFacts) -> str:
    if attempt.state is AttemptState.LOST:
        return (
            f"the attempt at site {attempt.site} was lost "
            "(its agent or cluster manager no longer runs it)"
        )
    if attempt.exit_code is None:
        why = f" ({attempt.reason})" if attempt.reason else ""
        return f"the attempt at site {attempt.site} ended without an exit code{why}"
    return f"the attempt at site {attempt.site} exited with code {attempt.exit_code}"
