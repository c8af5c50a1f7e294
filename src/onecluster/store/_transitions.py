"""Job state changes, each run inside the caller's transaction (one :class:`Session`).

Every function here loads the rows it changes with ``FOR UPDATE`` (a no-op on SQLite, whose
transactions already hold the write lock) and leaves the job in a state from which the
reconcile loop or the next agent sync can carry on: a job is never dropped on the floor.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from onecluster.model import (
    ACTIVE_ATTEMPT_STATES,
    TERMINAL_STATES,
    AttemptState,
    JobState,
    SitePart,
)
from onecluster.store._convert import parts_json
from onecluster.store._events import record_events
from onecluster.store._lifecycle import AttemptFacts, settle
from onecluster.store._records import StartOrder
from onecluster.store._tables import AttemptRow, JobRow, VersionRow

#: Key in ``Session.info`` set by a transaction that requeued or cancelled a pending job.
PENDING_CHANGED = "onecluster.pending_changed"

__all__ = [
    "ACTIVE",
    "PENDING_CHANGED",
    "STAGE_CHECK",
    "end_attempt",
    "lock_jobs",
    "preempt",
    "settle_job",
    "start",
    "stop_run",
]

ACTIVE = tuple(sorted(s.value for s in ACTIVE_ATTEMPT_STATES))

#: ``attempts.data_wait`` of a new attempt whose job names a registered dataset: the
#: reconcile loop has not looked yet whether its site holds the dataset.
STAGE_CHECK = "check"


def lock_jobs(session: Session, job_ids: Iterable[str]) -> dict[str, JobRow]:
    """Load and lock jobs in id order (one order everywhere, so transactions never deadlock)."""
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    rows = session.scalars(
        select(JobRow).where(JobRow.id.in_(ids)).order_by(JobRow.id).with_for_update()
    )
    return {row.id: row for row in rows}


def event(session: Session, now: float, kind: str, message: str, job_id: str | None = None) -> None:
    """Record an event in the current transaction; it is inserted when the transaction
    commits, with an id above every event committed before it (see
    :mod:`onecluster.store._events`)."""
    record_events(session, [{"time": now, "kind": kind, "job_id": job_id, "message": message}])


def current_run(session: Session, job: JobRow) -> list[AttemptRow]:
    """The attempts of the job's latest run."""
    return list(
        session.scalars(
            select(AttemptRow).where(AttemptRow.job_id == job.id, AttemptRow.run == job.attempts)
        )
    )


def start(session: Session, job: JobRow, order: StartOrder, now: float) -> bool:
    """Start a new run of pending ``job`` on ``order.parts``; ``False`` if it is not pending."""
    if job.state != JobState.PENDING or not order.parts:
        return False
    job.attempts += 1
    waited = max(0.0, now - job.queued_at)
    # A registered dataset with a version: each attempt waits until its site holds it.
    stage = None
    if job.dataset is not None:
        versions = select(VersionRow.root).where(VersionRow.dataset == job.dataset).limit(1)
        stage = STAGE_CHECK if session.scalar(versions) is not None else None
    for index, part in enumerate(order.parts):
        session.add(
            AttemptRow(
                id=f"{job.id}.{job.attempts}.{index}",
                job_id=job.id,
                run=job.attempts,
                site=part.site,
                gpu_type=part.gpu_type,
                gpus=part.gpus,
                parts=parts_json(
                    (SitePart(site=part.site, gpu_type=part.gpu_type, gpus=part.gpus),)
                ),
                state=AttemptState.STARTING,
                stop_reason=None,
                exit_code=None,
                started_at=now,
                finished_at=None,
                borrowed=order.borrowed,
                preemptible=job.preemptible,
                waited_s=waited,
                cost_per_gpu_hour=part.cost_per_gpu_hour,
                cost=0.0,
                log_size=0,
                data_wait=stage,
            )
        )
    job.state = JobState.RUNNING
    job.parts = parts_json(
        tuple(SitePart(site=p.site, gpu_type=p.gpu_type, gpus=p.gpus) for p in order.parts)
    )
    job.borrowed = order.borrowed
    job.reason = f"waiting for data: {job.dataset}" if stage else None
    if job.started_at is None:
        job.started_at = now
    where = ", ".join(f"{p.gpus}x{p.gpu_type}@{p.site}" for p in order.parts)
    event(session, now, "started", f"job {job.id} run {job.attempts} started on {where}", job.id)
    return True


def end_attempt(
    attempt: AttemptRow, state: AttemptState, exit_code: int | None, now: float
) -> None:
    """Mark ``attempt`` exited or lost at ``now`` and price the GPU time it held: the span it
    really ran under the site's cluster manager when its agent reported one, else from its
    start by onecluster to ``now``."""
    attempt.state = state
    attempt.exit_code = exit_code
    attempt.finished_at = now
    if attempt.ran_from is not None:
        start = attempt.ran_from
        end = attempt.ran_until if attempt.ran_until is not None else now
        attempt.ran_until = min(max(end, start), now)
        hours = (attempt.ran_until - start) / 3600.0
    else:
        hours = max(0.0, now - attempt.started_at) / 3600.0
    attempt.cost = hours * attempt.gpus * attempt.cost_per_gpu_hour


def stop_run(
    session: Session, job: JobRow, reason: str, now: float, *, preempted: bool = False
) -> None:
    """Tell every active attempt of the job's run to stop (``preempted``: because the job is
    preempted; reports count what such an attempt lost).

    An attempt not yet reported running stops like a running one: its agent may have
    started it since its last sync, so its GPUs are free only once the agent reports it
    exited, or does not report it at all (then it ends as lost).  Ending it at once would
    let the job start elsewhere while the first process still runs.
    """
    for attempt in current_run(session, job):
        if attempt.state in (AttemptState.STARTING, AttemptState.RUNNING):
            attempt.state = AttemptState.STOPPING
            attempt.stop_reason = reason
            attempt.preempted = preempted


def preempt(session: Session, job: JobRow, reason: str, now: float) -> bool:
    """Stop running ``job`` so it can be requeued; ``False`` if it is not running."""
    if job.state != JobState.RUNNING:
        return False
    job.state = JobState.PREEMPTING
    job.reason = reason
    stop_run(session, job, reason, now, preempted=True)
    event(session, now, "preempting", f"job {job.id}: {reason}", job.id)
    settle_job(session, job, now)
    return True


def settle_job(session: Session, job: JobRow, now: float) -> None:
    """Move ``job`` on from the states of its current run (see :mod:`._lifecycle`)."""
    if job.state in TERMINAL_STATES or job.state == JobState.PENDING:
        return
    outcome = settle(JobState(job.state), facts_of(session, job))
    if outcome.stop_rest is not None:
        stop_run(session, job, outcome.stop_rest, now)
        event(session, now, "stopping", f"job {job.id}: {outcome.stop_rest}", job.id)
        outcome = settle(JobState(job.state), facts_of(session, job))
    if outcome.state is None:
        return
    if outcome.state == JobState.PENDING:
        session.info[PENDING_CHANGED] = True
        job.state = JobState.PENDING
        job.queued_at = now
        job.parts = []
        job.borrowed = False
        if outcome.preempted:
            job.preemptions += 1
        job.reason = outcome.reason or job.reason
        event(session, now, "requeued", f"job {job.id} requeued: {job.reason}", job.id)
        return
    job.state = outcome.state
    job.finished_at = now
    job.exit_code = outcome.exit_code
    job.reason = outcome.reason
    event(session, now, outcome.state.value, f"job {job.id} {outcome.state.value}", job.id)


def facts_of(session: Session, job: JobRow) -> list[AttemptFacts]:
    """The current run's attempts as :class:`AttemptFacts` (autoflush includes pending changes)."""
    return [
        AttemptFacts(
            site=a.site,
            state=AttemptState(a.state),
            exit_code=a.exit_code,
            finished_at=a.finished_at,
            reason=a.stop_reason,
        )
        for a in current_run(session, job)
    ]


def active_attempts_at(session: Session, site: str) -> list[AttemptRow]:
    """Attempts at ``site`` that still hold GPUs."""
    return list(
        session.scalars(
            select(AttemptRow)
            .where(AttemptRow.site == site, AttemptRow.state.in_(ACTIVE))
            .order_by(AttemptRow.id)
        )
    )
